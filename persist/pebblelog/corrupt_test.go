package pebblelog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/plaudit/plaudit/persist"
)

// recordingHandler keeps the messages logged at ERROR.
type recordingHandler struct {
	mu     sync.Mutex
	errors []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.mu.Lock()
		h.errors = append(h.errors, r.Message)
		h.mu.Unlock()
	}
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// corruptedStore writes directory entries and two agents' events into one
// flushed table, flips a byte of the table at offset(size), and reopens.
func corruptedStore(t *testing.T, offset func(size int) int) (*Store, *recordingHandler, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := s.Put(persist.KV{Key: fmt.Appendf(nil, "k%03d", i), Value: bytes.Repeat([]byte("v"), 200)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []string{"a", "b"} {
		for i := 1; i <= 100; i++ {
			if err := s.Append(persist.Batch{Agent: a, First: uint64(i), Events: [][]byte{bytes.Repeat([]byte{byte(i)}, 1000)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) != 1 {
		t.Fatalf("%d tables, want 1", len(tables))
	}
	data, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	data[offset(len(data))] ^= 0xff
	if err := os.WriteFile(tables[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	h := &recordingHandler{}
	s, err = Open(dir, Options{Logger: slog.New(h), BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s, h, filepath.Base(tables[0])
}

// TestCorruptTableIsAnErrorNamingTheFile: a damaged block is an error
// value (wrapping ErrCorrupt, naming the agent and the file) for the agent
// whose events it holds, logged at ERROR once; the other agent and the
// directory load, and Close is clean.
func TestCorruptTableIsAnErrorNamingTheFile(t *testing.T) {
	s, h, table := corruptedStore(t, func(size int) int { return size / 4 })
	for range 2 {
		_, err := s.Load("a")
		if !errors.Is(err, persist.ErrCorrupt) {
			t.Fatalf("Load(a) = %v, want ErrCorrupt", err)
		}
		if want := "agent a: "; !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "on-disk corruption in "+table) {
			t.Fatalf("Load(a) = %q, want it to name the agent and %s", err, table)
		}
	}
	if len(h.errors) != 1 {
		t.Fatalf("logged at ERROR: %q, want one line", h.errors)
	}
	checkLoads(t, s, "b", 100)
	n := 0
	if err := s.Scan([]byte("k"), func(_, _ []byte) error { n++; return nil }); err != nil || n != 50 {
		t.Fatalf("Scan = %d entries, %v", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestCorruptDirectoryBlockIsAnError: damage in the first block (the
// directory's) is an error of the scan, not a panic.
func TestCorruptDirectoryBlockIsAnError(t *testing.T) {
	s, _, table := corruptedStore(t, func(int) int { return 100 })
	err := s.Scan([]byte("k"), func(_, _ []byte) error { return nil })
	if !errors.Is(err, persist.ErrCorrupt) || !strings.Contains(err.Error(), table) {
		t.Fatalf("Scan = %v, want ErrCorrupt naming %s", err, table)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
