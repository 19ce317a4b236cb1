package pebblelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/persisttest"
)

// filledStore writes directory entries, two agents' events and a snapshot
// of one of them (covering events 1–40).
func filledStore(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := s.Put(persist.KV{Key: fmt.Appendf(nil, "run/r%02d", i), Value: []byte("a")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Put(persist.KV{Key: []byte("agent/default/a"), Value: []byte("info")}); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, "a", 1, 50)
	appendN(t, s, "b", 1, 30)
	if err := s.SaveSnapshot("a", 40, persist.Bytes("state of a at 40")); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestInspectReportsAgentsAndDirectory(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprintf("flushed=%v", flush), func(t *testing.T) {
			dir := t.TempDir()
			s := filledStore(t, dir)
			if flush {
				if err := s.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var decoded int
			r, err := Inspect(dir, InspectOptions{CheckEvent: func([]byte) error { decoded++; return nil }})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Err(); err != nil {
				t.Fatalf("healthy store: %v", err)
			}
			if len(r.Agents) != 2 {
				t.Fatalf("agents = %+v", r.Agents)
			}
			a, b := r.Agents[0], r.Agents[1]
			if a.ID != "a" || a.Events != 10 || a.FirstSeq != 41 || a.LastSeq != 50 || a.HighWater != 50 ||
				a.SnapshotSeq != 40 || a.StateBytes != int64(len("state of a at 40")) || a.SnapshotBytes == 0 {
				t.Fatalf("agent a = %+v", a)
			}
			if b.ID != "b" || b.Events != 30 || b.FirstSeq != 1 || b.LastSeq != 30 || b.SnapshotSeq != 0 {
				t.Fatalf("agent b = %+v", b)
			}
			if decoded != 40 {
				t.Fatalf("CheckEvent saw %d events, want 40", decoded)
			}
			// Bytes count keys (with the store's "d/") and values:
			// 2+15+4 for the agent, 20 × (2+7+1) for the runs.
			want := []DirGroup{{Prefix: "agent", Entries: 1, Bytes: 21}, {Prefix: "run", Entries: 20, Bytes: 200}}
			if !slices.Equal(r.Directory, want) {
				t.Fatalf("directory = %+v, want %+v", r.Directory, want)
			}
			tables := 0
			for _, f := range r.Files {
				if f.Kind == "table" {
					tables++
				}
			}
			if flush && tables == 0 {
				t.Fatalf("no table listed after a flush: %+v", r.Files)
			}
		})
	}
}

// TestInspectFindsCorruption: each kind of damage is a problem naming where
// it is.
func TestInspectFindsCorruption(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, s *Store)
		want   Problem
	}{
		{"event checksum", func(t *testing.T, s *Store) { rewrite(t, s, eventKey("b", 7), flipLast) },
			Problem{Agent: "b", Detail: "event 7: checksum mismatch"}},
		{"record under another key", func(t *testing.T, s *Store) {
			rewrite(t, s, eventKey("b", 8), func([]byte) []byte {
				v, closer, err := s.db.Get(eventKey("b", 9))
				if err != nil {
					t.Fatal(err)
				}
				defer closer.Close()
				return append([]byte(nil), v...)
			})
		}, Problem{Agent: "b", Detail: "event 8: checksum mismatch"}},
		{"snapshot checksum", func(t *testing.T, s *Store) { rewrite(t, s, snapshotKey("a"), flipLast) },
			Problem{Agent: "a", Detail: "snapshot: checksum mismatch"}},
		{"log behind its high-water mark", func(t *testing.T, s *Store) { setHighWater(t, s, "b", 31) },
			Problem{Agent: "b", Detail: "the log ends at event 30, but events to 31 were acknowledged"}},
		{"log behind an older store's high-water mark", func(t *testing.T, s *Store) { setLegacyHighWater(t, s, "b", 32) },
			Problem{Agent: "b", Detail: "the log ends at event 30, but events to 32 were acknowledged"}},
		{"log behind its high-water mark, an older store's lower", func(t *testing.T, s *Store) {
			setHighWater(t, s, "b", 31)
			setLegacyHighWater(t, s, "b", 2)
		}, Problem{Agent: "b", Detail: "the log ends at event 30, but events to 31 were acknowledged"}},
		{"high-water mark of the wrong size", func(t *testing.T, s *Store) {
			if err := s.db.Set(highKey("b"), []byte{1}, pebble.Sync); err != nil {
				t.Fatal(err)
			}
		}, Problem{Agent: "b", Detail: "high-water mark of 1 bytes"}},
		{"gap", func(t *testing.T, s *Store) {
			if err := s.db.Delete(eventKey("b", 12), nil); err != nil {
				t.Fatal(err)
			}
		}, Problem{Agent: "b", Detail: "event 13: gap: expected 12"}},
		{"key without a tag", func(t *testing.T, s *Store) { setRaw(t, s, "x") },
			Problem{Detail: `key outside the layout: "x"`}},
		{"key whose tag has no slash", func(t *testing.T, s *Store) { setRaw(t, s, "dx/run") },
			Problem{Detail: `key outside the layout: "dx/run"`}},
		{"directory key with an empty name", func(t *testing.T, s *Store) { setRaw(t, s, "d/") },
			Problem{Detail: `key outside the layout: "d/"`}},
		{"unknown tag", func(t *testing.T, s *Store) { setRaw(t, s, "q/1") },
			Problem{Detail: `key outside the layout: "q/1"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := filledStore(t, dir)
			tt.damage(t, s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := Inspect(dir, InspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Problems) != 1 || r.Problems[0] != tt.want {
				t.Fatalf("problems = %+v, want [%+v]", r.Problems, tt.want)
			}
			// A problem does not end the scan: the keys after it are read.
			if len(r.Agents) != 2 || r.Agents[1].ID != "b" || r.Agents[1].LastSeq == 0 {
				t.Fatalf("agents = %+v, want a and b read past the problem", r.Agents)
			}
			if err := r.Err(); !errors.Is(err, persist.ErrCorrupt) {
				t.Fatalf("Err() = %v, want ErrCorrupt", err)
			}
		})
	}
}

// TestInspectCatchesAFlippedTableByte: a byte flipped in a flushed table
// is a problem naming the table, whatever block it lands in.
func TestInspectCatchesAFlippedTableByte(t *testing.T) {
	for _, at := range []func(size int) int{
		func(int) int { return 100 },                  // the first data block
		func(size int) int { return size / 2 },        // a data block of the events
		func(size int) int { return size - 60 - 100 }, // the index and properties, before the footer
	} {
		dir := t.TempDir()
		s := filledStore(t, dir)
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		table, off, size := flipTableByte(t, dir, at)
		r, err := Inspect(dir, InspectOptions{})
		if err != nil {
			// A damaged table can also stop Pebble from opening at all.
			if !strings.Contains(err.Error(), filepath.Base(table)) {
				t.Fatalf("byte %d of %d: Inspect = %v, want it to name %s", off, size, err, filepath.Base(table))
			}
			continue
		}
		t.Logf("byte %d of %d: %v", off, size, r.Err())
		// The table's own check finds it first and says which keys (so
		// which agents) the damaged table holds.
		if len(r.Problems) == 0 || r.Problems[0].File != filepath.Base(table) || !strings.Contains(r.Problems[0].Detail, "the table holds keys") {
			t.Fatalf("byte %d of %d: problems = %+v, want the first to name %s and its keys", off, size, r.Problems, filepath.Base(table))
		}
	}
}

func TestInspectRefusesAnOpenStore(t *testing.T) {
	dir := t.TempDir()
	s := filledStore(t, dir)
	defer s.Close()
	if _, err := Inspect(dir, InspectOptions{}); err == nil || !strings.Contains(err.Error(), "is a server running on it?") {
		t.Fatalf("Inspect of an open store = %v, want a refusal", err)
	}
}

// TestCheckpointIsAWholeStore: a checkpoint opens as a store with the same
// logs, snapshots and directory; it holds no ballast; remove deletes it;
// and Open deletes what a crash left behind.
func TestCheckpointIsAWholeStore(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{BallastSize: 1 << 16, MinFree: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, ballastName)); err != nil {
		t.Fatalf("no ballast to leave out: %v", err)
	}
	appendN(t, s, "a", 1, 50)
	if err := s.SaveSnapshot("a", 40, persist.Bytes("state")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(persist.KV{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	cp, remove, err := s.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(cp) != filepath.Join(dir, CheckpointsDir) {
		t.Fatalf("checkpoint in %s, want it under %s", cp, filepath.Join(dir, CheckpointsDir))
	}
	appendN(t, s, "a", 51, 1) // after the checkpoint: not in it
	if _, err := os.Stat(filepath.Join(cp, ballastName)); !os.IsNotExist(err) {
		t.Fatalf("the checkpoint holds the ballast: %v", err)
	}
	c, err := Open(cp, Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Load("a")
	if err != nil {
		t.Fatal(err)
	}
	if r.SnapshotSeq != 40 || string(r.Snapshot) != "state" || r.LastSeq != 50 {
		t.Fatalf("checkpoint's agent a: snapshot %d %q, last %d", r.SnapshotSeq, r.Snapshot, r.LastSeq)
	}
	persisttest.CheckTail(t, "a", r.Tail, persisttest.Events("a", 41, 10))
	if v, err := c.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("checkpoint's k = %q, %v", v, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cp); !os.IsNotExist(err) {
		t.Fatalf("checkpoint not removed: %v", err)
	}

	// One left behind by a crash is gone at the next Open.
	if _, _, err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(filepath.Join(dir, CheckpointsDir)); !os.IsNotExist(err) {
		t.Fatalf("stale checkpoints kept: %v", err)
	}
}

func TestProblemReadsAsFileAgentDetail(t *testing.T) {
	for _, tc := range []struct {
		p    Problem
		want string
	}{
		{Problem{Detail: "bad"}, "bad"},
		{Problem{File: "000007.sst", Detail: "bad"}, "file 000007.sst: bad"},
		{Problem{Agent: "agt_1", Detail: "bad"}, "agent agt_1: bad"},
		{Problem{File: "000007.sst", Agent: "agt_1", Detail: "bad"}, "file 000007.sst: agent agt_1: bad"},
	} {
		if got := tc.p.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// setRaw writes key straight into Pebble, past the store's layout.
func setRaw(t *testing.T, s *Store, key string) {
	t.Helper()
	if err := s.db.Set([]byte(key), []byte("v"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// TestInspectTakesAOneByteDirectoryKey: the shortest name Put takes is
// one byte, and it is inside the layout.
func TestInspectTakesAOneByteDirectoryKey(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{BallastSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(persist.KV{Key: []byte("a"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Inspect(dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []DirGroup{{Prefix: "a", Entries: 1, Bytes: 4}}; len(r.Problems) != 0 || !slices.Equal(r.Directory, want) {
		t.Fatalf("problems %+v, directory %+v; want none and %+v", r.Problems, r.Directory, want)
	}
}

// TestInspectSaysWhereReadingStopped: a damaged block ends the key scan;
// the problem names the last key read before it, or none when the first
// block is the damaged one, and the table it is in.
func TestInspectSaysWhereReadingStopped(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   func(size int) int
		want string
	}{
		{"first block", func(int) int { return 100 }, "reading stopped: "},
		{"a later block", func(size int) int { return size * 3 / 5 }, `reading stopped after key "d/run/`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{BallastSize: -1})
			if err != nil {
				t.Fatal(err)
			}
			// About 40 KB of directory entries: several data blocks.
			for i := range 400 {
				if err := s.Put(persist.KV{Key: fmt.Appendf(nil, "run/r%04d", i), Value: bytes.Repeat([]byte{byte(i)}, 100)}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			table, _, _ := flipTableByte(t, dir, tc.at)
			r, err := Inspect(dir, InspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var stopped *Problem
			for i, p := range r.Problems {
				if strings.HasPrefix(p.Detail, "reading stopped") {
					stopped = &r.Problems[i]
				}
			}
			if stopped == nil || !strings.HasPrefix(stopped.Detail, tc.want) || stopped.File != filepath.Base(table) {
				t.Fatalf("problems %+v; want one starting %q naming %s", r.Problems, tc.want, filepath.Base(table))
			}
		})
	}
}

// TestInspectTakesASnapshotCoveringTheWholeLog: an agent whose snapshot
// covers every event has an empty log, which is healthy.
func TestInspectTakesASnapshotCoveringTheWholeLog(t *testing.T) {
	dir := t.TempDir()
	s := filledStore(t, dir)
	if err := s.SaveSnapshot("b", 30, persist.Bytes("state of b at 30")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := Inspect(dir, InspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Err(); err != nil {
		t.Fatalf("a snapshot covering the whole log: %v", err)
	}
	if b := r.Agents[1]; b.ID != "b" || b.Events != 0 || b.SnapshotSeq != 30 || b.HighWater != 30 {
		t.Fatalf("agent b = %+v", b)
	}
}

// TestKeysNameTheirAgent: event, high-water and snapshot keys name their
// agent (event keys with their seq in decimal); a key that only looks like
// one names none and is quoted as it is.
func TestKeysNameTheirAgent(t *testing.T) {
	seq7 := string(binary.BigEndian.AppendUint64(nil, 7))
	for _, tc := range []struct {
		key       string
		agent     string // "" when the key names none
		described string
	}{
		{string(eventKey("agt_1", 7)), "agt_1", "e/agt_1/7"},
		{string(eventKey("a", 7)), "a", "e/a/7"},
		{"e//" + seq7, "", strconv.Quote("e//" + seq7)},           // no agent
		{"e//x/" + seq7, "", strconv.Quote("e//x/" + seq7)},       // an agent starting with a slash
		{"e/a/b/" + seq7, "", strconv.Quote("e/a/b/" + seq7)},     // a slash inside the agent
		{"e/agt_1x" + seq7, "", strconv.Quote("e/agt_1x" + seq7)}, // no slash before the seq
		{"e/" + seq7[:7], "", strconv.Quote("e/" + seq7[:7])},     // shorter than a seq
		{string(highKey("a")), "a", `"e/a0"`},
		{string(highKey("agt_1")), "agt_1", `"e/agt_10"`},
		{"e/0", "", `"e/0"`},     // a mark of no agent
		{"e/a/0", "", `"e/a/0"`}, // a slash inside: neither mark nor event
		{"e/a1", "", `"e/a1"`},   // not the bound of any agent's events
		{string(legacyHighKey("a")), "a", `"h/a"`},
		{string(snapshotKey("agt_1")), "agt_1", `"s/agt_1"`},
		{"s/", "", `"s/"`},
		{"sx" + "agt_1", "", `"sxagt_1"`},
		{string(dirKey([]byte("run/r1"))), "", `"d/run/r1"`},
		{"", "", `""`},
	} {
		agent, ok := agentOfKey([]byte(tc.key))
		if agent != tc.agent || ok != (tc.agent != "") {
			t.Errorf("agentOfKey(%q) = %q, %v; want %q", tc.key, agent, ok, tc.agent)
		}
		if got := describeKey([]byte(tc.key)); got != tc.described {
			t.Errorf("describeKey(%q) = %s, want %s", tc.key, got, tc.described)
		}
	}
}
