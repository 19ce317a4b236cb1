package natsdoor

import (
	"log/slog"
	"testing"

	"github.com/plaudit/plaudit/internal/logtest"
)

func TestServerLoggerLevels(t *testing.T) {
	rec := &logtest.Recorder{Min: slog.LevelDebug}
	l := ServerLogger(slog.New(rec))
	l.Errorf("%s - %s", "authentication error", `Token "[REDACTED]"`)
	l.Errorf("Publish Violation - %s", "Authorization Violation")
	l.Errorf("Error trying to connect to route: %v", "dial tcp: refused")
	l.Warnf("slow consumer")
	l.Noticef("Server is ready")
	want := []string{"WARN authentication error", "WARN Publish Violation", "ERROR Error trying", "WARN slow consumer", "INFO Server is ready"}
	lines := rec.Lines()
	if len(lines) != len(want) {
		t.Fatalf("lines %q", lines)
	}
	for i, w := range want {
		if len(lines[i]) < len(w) || lines[i][:len(w)] != w {
			t.Errorf("line %d = %q, want it to begin %q", i, lines[i], w)
		}
	}
}
