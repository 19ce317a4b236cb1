package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// TestBackupRestoreInspectCommands runs the three commands on a stopped
// data directory with a flushed table: backup and restore succeed and
// inspect reports the restored agent; a flipped byte in the table makes
// inspect fail naming it.
func TestBackupRestoreInspectCommands(t *testing.T) {
	// Set for the keys commands, it does not stand in for --server when
	// --data is given.
	t.Setenv("PLAUDIT_SERVER", "http://127.0.0.1:1")
	data := filepath.Join(t.TempDir(), "data")
	s, err := pebblelog.Open(data, pebblelog.Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	ev := engine.AppendEvent(nil, engine.AgentCreated{Info: engine.AgentInfo{ID: "agt_1", Workspace: "default", Name: strings.Repeat("n", 100)}})
	for seq := uint64(1); seq <= 20; seq++ {
		if err := s.Append(persist.Batch{Agent: "agt_1", First: seq, Events: [][]byte{ev}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	bk, restored := filepath.Join(t.TempDir(), "bk"), filepath.Join(t.TempDir(), "restored")
	var out bytes.Buffer
	for _, args := range [][]string{
		{"backup", "--data", data, "--to", bk},
		{"restore", "--from", bk, "--data", restored},
		{"inspect", "--data", restored},
	} {
		if code := run(args, &out, &out); code != 0 {
			t.Fatalf("%s: exit %d\n%s", args, code, &out)
		}
	}
	if !strings.Contains(out.String(), "agt_1 ") || !strings.Contains(out.String(), "ok: ") {
		t.Fatalf("inspect output:\n%s", &out)
	}
	out.Reset()
	if code := run([]string{"inspect", "--json", "--data", restored}, &out, io.Discard); code != 0 {
		t.Fatalf("inspect --json: exit %d", code)
	}
	var report struct {
		Agents []struct {
			ID     string `json:"id"`
			Events int    `json:"events"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(out.Bytes(), &report); err != nil || len(report.Agents) != 1 || report.Agents[0].Events != 20 {
		t.Fatalf("inspect --json = %+v, %v:\n%s", report, err, &out)
	}

	tables, _ := filepath.Glob(filepath.Join(restored, "*.sst"))
	if len(tables) != 1 {
		t.Fatalf("%d tables restored, want 1", len(tables))
	}
	b, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0x10
	if err := os.WriteFile(tables[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	code := run([]string{"inspect", "--data", restored}, &out, &out)
	if code != 1 || !strings.Contains(out.String(), "file "+filepath.Base(tables[0])) {
		t.Fatalf("inspect of a damaged table: exit %d:\n%s", code, &out)
	}
}

// TestAdminCommandsSayWhatIsWrong: a backup of a server without a key is
// refused before any request, naming --key; a backup needs one source, and
// both given is an error; a restore from a directory that does not exist
// says so.
func TestAdminCommandsSayWhatIsWrong(t *testing.T) {
	t.Setenv("PLAUDIT_KEY", "")
	t.Setenv("PLAUDIT_API_KEY", "")
	t.Setenv("PLAUDIT_SERVER", "")
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "--server", "http://127.0.0.1:1", "--to", filepath.Join(dir, "bk")}, "--server needs --key"},
		{[]string{"backup", "--to", filepath.Join(dir, "bk")}, "one of --server (or $PLAUDIT_SERVER) and --data"},
		{[]string{"backup", "--server", "http://127.0.0.1:1", "--data", dir, "--to", filepath.Join(dir, "bk")}, "can't be used together"},
		{[]string{"restore", "--from", filepath.Join(dir, "nope"), "--data", filepath.Join(dir, "new")}, "nope: file does not exist"},
	} {
		var out bytes.Buffer
		if code := run(tc.args, &out, &out); code == 0 || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: exit %d, %q; want a failure naming %q", tc.args, code, out.String(), tc.want)
		}
	}
}
