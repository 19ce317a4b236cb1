package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// dataDir makes a stopped data directory holding agent "a" (a snapshot and
// a log tail of real engine events) and directory entries, a table flushed.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := pebblelog.Open(dir, pebblelog.Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	ev := engine.AppendEvent(nil, engine.AgentCreated{Info: engine.AgentInfo{ID: "a", Workspace: "default", Name: "a"}})
	for seq := uint64(1); seq <= 60; seq++ {
		if err := s.Append(persist.Batch{Agent: "a", First: seq, Events: [][]byte{ev},
			Index: []persist.KV{{Key: fmt.Appendf(nil, "run/r%d", seq), Value: []byte("a")}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readAll(t *testing.T, dir string) map[string]string {
	t.Helper()
	s, err := pebblelog.Open(dir, pebblelog.Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := map[string]string{}
	r, err := s.Load("a")
	if err != nil {
		t.Fatal(err)
	}
	out["a"] = fmt.Sprintf("%d %d %x", r.SnapshotSeq, r.LastSeq, bytes.Join(r.Tail, nil))
	if err := s.Scan(nil, func(k, v []byte) error { out[string(k)] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// backedUp backs a dataDir up offline and returns the backup's directory
// and manifest.
func backedUp(t *testing.T) (string, Manifest) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "b")
	m, err := Offline(dataDir(t), dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// TestOfflineBackupRestores: a stopped directory backed up and restored
// reads the same, and the backup holds only the manifest's files.
func TestOfflineBackupRestores(t *testing.T) {
	data := dataDir(t)
	want := readAll(t, data)
	dir := filepath.Join(t.TempDir(), "b")
	m, err := Offline(data, dir, "test")
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(m.Files)+1 {
		t.Fatalf("backup holds %d files, the manifest lists %d (+ itself)", len(entries), len(m.Files))
	}
	restored := filepath.Join(t.TempDir(), "r")
	if _, report, err := Restore(dir, restored); err != nil || len(report.Agents) != 1 {
		t.Fatalf("Restore = %+v, %v", report, err)
	}
	got := readAll(t, restored)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored:\n%v\nwant\n%v", got, want)
	}
}

// TestRestoreRefuses: a backup that does not match its manifest, or a
// destination that is not empty, is refused with nothing written.
func TestRestoreRefuses(t *testing.T) {
	backupDir, m := backedUp(t)
	table := ""
	for _, f := range m.Files {
		if strings.HasSuffix(f.Name, ".sst") {
			table = f.Name
		}
	}
	if table == "" {
		t.Fatalf("no table in %+v", m.Files)
	}
	copyDir := func(t *testing.T) string {
		dst := filepath.Join(t.TempDir(), "copy")
		if err := os.MkdirAll(dst, 0o755); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(backupDir)
		for _, e := range entries {
			b, _ := os.ReadFile(filepath.Join(backupDir, e.Name()))
			if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dst
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string) (dest string)
		want   error
	}{
		{"a flipped byte", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, table)
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			os.WriteFile(p, b, 0o644)
			return ""
		}, ErrCorrupt},
		{"a truncated file", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, table)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-1], 0o644)
			return ""
		}, ErrCorrupt},
		{"a missing file", func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, table))
			return ""
		}, ErrCorrupt},
		{"no such directory", func(t *testing.T, dir string) string {
			os.RemoveAll(dir)
			return ""
		}, fs.ErrNotExist},
		{"no manifest", func(t *testing.T, dir string) string {
			os.Remove(filepath.Join(dir, ManifestName))
			return ""
		}, ErrCorrupt},
		{"a damaged manifest", func(t *testing.T, dir string) string {
			os.WriteFile(filepath.Join(dir, ManifestName), []byte(`{"format": "plaudit-backup/1", "files": [{"name": "../x"`), 0o644)
			return ""
		}, ErrCorrupt},
		{"a non-empty destination", func(t *testing.T, dir string) string {
			dest := filepath.Join(t.TempDir(), "full")
			os.MkdirAll(dest, 0o755)
			os.WriteFile(filepath.Join(dest, "keep"), []byte("x"), 0o644)
			return dest
		}, ErrNotEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			from := copyDir(t)
			dest := tt.damage(t, from)
			if dest == "" {
				dest = filepath.Join(t.TempDir(), "new")
			}
			before, _ := os.ReadDir(dest)
			_, _, err := Restore(from, dest)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Restore = %v, want %v", err, tt.want)
			}
			after, _ := os.ReadDir(dest)
			if len(after) != len(before) {
				t.Fatalf("Restore wrote %d files into %s before refusing", len(after)-len(before), dest)
			}
		})
	}
}

// TestReceiveRefusesABrokenStream: a stream cut short (a server that died
// mid-backup) or one whose file does not match the manifest leaves no
// backup behind.
func TestReceiveRefusesABrokenStream(t *testing.T) {
	data := dataDir(t)
	s, err := pebblelog.Open(data, pebblelog.Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := Take(s, "test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := stream(&buf); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	whole := buf.Bytes()
	tests := []struct {
		name string
		b    []byte
	}{
		{"cut before the manifest", whole[:len(whole)/2]},
		{"cut in the manifest", whole[:bytes.LastIndex(whole, []byte(`"files"`))]},
		{"a flipped byte in a file", func() []byte {
			b := bytes.Clone(whole)
			b[700] ^= 1 // in the first file, after its 512-byte header
			return b
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "b")
			if _, err := Receive(bytes.NewReader(tt.b), dir); err == nil {
				t.Fatal("Receive accepted it")
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Fatalf("left %d files behind", len(entries))
			}
		})
	}
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Receive(bytes.NewReader(whole), dir); err != nil {
		t.Fatalf("the whole stream: %v", err)
	}
}

// TestARestoreThatFailsLeavesNothing: a backup whose files match their
// manifest but do not make a store (a flipped byte, the checksums written
// again) fails at the inspection, and the destination is left empty: no
// file, no lock, no marker, so the restore can be tried again there.
func TestARestoreThatFailsLeavesNothing(t *testing.T) {
	backupDir, m := backedUp(t)
	damaged := false
	for i, f := range m.Files {
		if !strings.HasSuffix(f.Name, ".sst") {
			continue
		}
		p := filepath.Join(backupDir, f.Name)
		b, _ := os.ReadFile(p)
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		m.Files[i].SHA256 = hex.EncodeToString(sum[:])
		damaged = true
	}
	if !damaged {
		t.Fatal("no table to damage")
	}
	if err := os.WriteFile(filepath.Join(backupDir, ManifestName), m.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(t.TempDir(), "r")
	if _, _, err := Restore(backupDir, dest); err == nil {
		t.Fatal("a backup whose table is damaged restored")
	}
	if entries, _ := os.ReadDir(dest); len(entries) != 0 {
		t.Fatalf("a failed restore left %v", entries)
	}
}

// TestAnUnfinishedRestoreIsRefused: a restore cut short (killed between its
// files) leaves its marker, and the server's store refuses the directory
// rather than starting it as a new, empty one; a finished restore leaves
// neither the marker nor Pebble's lock.
func TestAnUnfinishedRestoreIsRefused(t *testing.T) {
	backupDir, m := backedUp(t)
	done := filepath.Join(t.TempDir(), "done")
	if _, _, err := Restore(backupDir, done); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{pebblelog.RestoreMarker, "LOCK"} {
		if _, err := os.Stat(filepath.Join(done, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a finished restore left %s: %v", name, err)
		}
	}
	// As a restore killed after its marker and some of its files.
	half := filepath.Join(t.TempDir(), "half")
	if err := os.MkdirAll(half, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{pebblelog.RestoreMarker, m.Files[0].Name} {
		b, _ := os.ReadFile(filepath.Join(backupDir, name))
		if err := os.WriteFile(filepath.Join(half, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before, _ := os.ReadDir(half)
	if s, err := pebblelog.Open(half, pebblelog.Options{BallastSize: -1}); !errors.Is(err, pebblelog.ErrUnfinishedRestore) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a half-restored directory: %v, want ErrUnfinishedRestore", err)
	}
	if after, _ := os.ReadDir(half); len(after) != len(before) {
		t.Fatalf("the refused directory changed: %v → %v", before, after)
	}
}

// TestABackupThatFailsItsCheckLeavesNothing: a backup of a directory whose
// table is damaged fails its own check, and its directory is emptied, so
// it cannot pass for a finished backup.
func TestABackupThatFailsItsCheckLeavesNothing(t *testing.T) {
	data := dataDir(t)
	entries, _ := os.ReadDir(data)
	damaged := false
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".sst") {
			p := filepath.Join(data, e.Name())
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0xff
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			damaged = true
		}
	}
	if !damaged {
		t.Fatal("no table to damage")
	}
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := Offline(data, dir, "test"); !errors.Is(err, persist.ErrCorrupt) {
		t.Fatalf("a damaged directory backed up: %v, want its check's ErrCorrupt", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("a backup that failed its check left %d files", len(left))
	}
}

// TestAnOfflineBackupOfAHeldDirectorySaysUseServer: a directory a server
// holds (Pebble's lock) is refused with the hint to back it up online.
func TestAnOfflineBackupOfAHeldDirectorySaysUseServer(t *testing.T) {
	data := dataDir(t)
	s, err := pebblelog.Open(data, pebblelog.Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = Offline(data, filepath.Join(t.TempDir(), "b"), "test")
	if err == nil || !strings.Contains(err.Error(), "back it up with --server") {
		t.Fatalf("Offline of a held directory: %v, want the hint to use --server", err)
	}
}
