package natsdoor

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerLogger routes an embedded nats-server's log into l: notices at
// INFO, warnings and a client's failed authentication or authorization at
// WARN, other errors and fatal errors at ERROR, debug and trace lines at
// DEBUG. Install it with server.SetLoggerV2.
func ServerLogger(l *slog.Logger) server.Logger { return serverLogger{l} }

type serverLogger struct{ l *slog.Logger }

func (s serverLogger) log(level slog.Level, format string, args []any) {
	s.l.Log(nil, level, fmt.Sprintf(format, args...), "component", "nats-server")
}

func (s serverLogger) Noticef(format string, v ...any) { s.log(slog.LevelInfo, format, v) }
func (s serverLogger) Warnf(format string, v ...any)   { s.log(slog.LevelWarn, format, v) }
func (s serverLogger) Errorf(format string, v ...any) {
	level := slog.LevelError
	if msg := fmt.Sprintf(format, v...); strings.Contains(msg, "authentication error") ||
		strings.Contains(msg, "Authorization Violation") {
		// A client's doing, not the server's fault: any client could
		// otherwise fill the error log by connecting with a bad key.
		level = slog.LevelWarn
	}
	s.log(level, format, v)
}
func (s serverLogger) Fatalf(format string, v ...any) { s.log(slog.LevelError, format, v) }
func (s serverLogger) Debugf(format string, v ...any) { s.log(slog.LevelDebug, format, v) }
func (s serverLogger) Tracef(format string, v ...any) { s.log(slog.LevelDebug, format, v) }
