package pebblelog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plaudit/plaudit/internal/logtest"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/persisttest"
)

// corruptedStore writes directory entries and two agents' events into one
// flushed table, flips a byte of the table at offset(size), and reopens.
func corruptedStore(t *testing.T, offset func(size int) int) (*Store, *logtest.Recorder, string) {
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
	table, _, _ := flipTableByte(t, dir, offset)
	h := &logtest.Recorder{Min: slog.LevelError}
	s, err = Open(dir, Options{Logger: slog.New(h), BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s, h, filepath.Base(table)
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
	if errs := h.Lines(); len(errs) != 1 {
		t.Fatalf("logged at ERROR: %q, want one line", errs)
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

// TestTruncatedWALIsLoggedAndConsistent cuts the newest WAL in half, as
// an outside hand could: Pebble cannot tell that from a crash mid-write,
// nor can the store, but the replay that stopped short is in the log,
// and what is left loads as a consistent prefix of the log.
func TestTruncatedWALIsLoggedAndConsistent(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 100; seq++ {
		appendN(t, s, "a", seq, 1)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wals, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(wals) == 0 {
		t.Fatal("no WAL")
	}
	newest := wals[len(wals)-1]
	st, err := os.Stat(newest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(newest, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	log := &logtest.Recorder{}
	s, err = Open(dir, Options{Logger: slog.New(log), BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Load("a")
	if err != nil {
		t.Fatalf("Load after a truncated WAL: %v", err)
	}
	if r.LastSeq == 0 || r.LastSeq >= 100 {
		t.Fatalf("LastSeq = %d, want a prefix of the 100 events", r.LastSeq)
	}
	persisttest.CheckTail(t, "a", r.Tail, persisttest.Events("a", 1, int(r.LastSeq)))
	found := false
	for _, l := range log.Lines() {
		found = found || strings.Contains(l, filepath.Base(newest)) && strings.Contains(l, "stopped reading at offset")
	}
	if !found {
		t.Fatalf("the short replay of %s is not in the log:\n%s", filepath.Base(newest), log)
	}
}

// flipTableByte flips the byte at(size) of the one table in dir (a closed
// store's) and returns the table's path, the offset flipped and the size.
func flipTableByte(t *testing.T, dir string, at func(size int) int) (table string, off, size int) {
	t.Helper()
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(tables) != 1 {
		t.Fatalf("%d tables, want 1", len(tables))
	}
	data, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	off = at(len(data))
	data[off] ^= 0xff
	if err := os.WriteFile(tables[0], data, 0o644); err != nil {
		t.Fatal(err)
	}
	return tables[0], off, len(data)
}
