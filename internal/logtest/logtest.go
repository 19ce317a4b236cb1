// Package logtest records what code logs through slog, for tests that
// assert on log lines.
package logtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// Recorder is a slog.Handler that keeps every record at Min or above as
// one line: "LEVEL message key=value …". The zero value records INFO and
// above. It is safe for concurrent use.
type Recorder struct {
	Min   slog.Level
	mu    sync.Mutex
	lines []string
}

// Enabled implements slog.Handler.
func (r *Recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.Min }

// Handle implements slog.Handler.
func (r *Recorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Level.String())
	b.WriteByte(' ')
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteByte(' ')
		b.WriteString(a.String())
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, b.String())
	r.mu.Unlock()
	return nil
}

// WithAttrs implements slog.Handler; the attributes are not recorded.
func (r *Recorder) WithAttrs([]slog.Attr) slog.Handler { return r }

// WithGroup implements slog.Handler; the group is not recorded.
func (r *Recorder) WithGroup(string) slog.Handler { return r }

// Lines returns the lines recorded so far.
func (r *Recorder) Lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// Count returns how many lines contain substr.
func (r *Recorder) Count(substr string) int {
	n := 0
	for _, l := range r.Lines() {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// String is every line, one per line, for failure messages.
func (r *Recorder) String() string { return strings.Join(r.Lines(), "\n") }
