package natsdoor

import (
	"fmt"
	"log/slog"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerLogger routes an embedded nats-server's log into l: notices at
// INFO, warnings at WARN, errors and fatal errors at ERROR, debug and trace
// lines at DEBUG. Install it with server.SetLoggerV2.
func ServerLogger(l *slog.Logger) server.Logger { return serverLogger{l} }

type serverLogger struct{ l *slog.Logger }

func (s serverLogger) log(level slog.Level, format string, args []any) {
	s.l.Log(nil, level, fmt.Sprintf(format, args...), "component", "nats-server")
}

func (s serverLogger) Noticef(format string, v ...any) { s.log(slog.LevelInfo, format, v) }
func (s serverLogger) Warnf(format string, v ...any)   { s.log(slog.LevelWarn, format, v) }
func (s serverLogger) Errorf(format string, v ...any)  { s.log(slog.LevelError, format, v) }
func (s serverLogger) Fatalf(format string, v ...any)  { s.log(slog.LevelError, format, v) }
func (s serverLogger) Debugf(format string, v ...any)  { s.log(slog.LevelDebug, format, v) }
func (s serverLogger) Tracef(format string, v ...any)  { s.log(slog.LevelDebug, format, v) }
