package pebblelog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/persisttest"
)

// TestAcknowledgedWriteSurvivesACrashRightAfter: every write method syncs
// before it returns. Each case writes once on a crashable memory FS and
// cuts the power the moment the method returns, losing every byte not
// synced (UnsyncedDataPercent 0): the recovered store must hold the write.
func TestAcknowledgedWriteSurvivesACrashRightAfter(t *testing.T) {
	events := func(n int) [][]byte {
		evs := make([][]byte, n)
		for i := range evs {
			evs[i] = fmt.Appendf(nil, "event-%d", i+1)
		}
		return evs
	}
	val := func(t *testing.T, s *Store, key string) []byte {
		t.Helper()
		v, err := s.Get([]byte(key))
		if errors.Is(err, persist.ErrNotFound) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name  string
		setup func(s *Store) error // synced before the write under test
		write func(s *Store) error
		check func(t *testing.T, s *Store)
	}{
		{
			name:  "put",
			write: func(s *Store) error { return s.Put(persist.KV{Key: []byte("ws/a"), Value: []byte("1")}) },
			check: func(t *testing.T, s *Store) {
				if v := val(t, s, "ws/a"); string(v) != "1" {
					t.Fatalf("acknowledged put lost: ws/a = %q", v)
				}
			},
		},
		{
			name:  "put deleting a key",
			setup: func(s *Store) error { return s.Put(persist.KV{Key: []byte("ws/a"), Value: []byte("1")}) },
			write: func(s *Store) error { return s.Put(persist.KV{Key: []byte("ws/a")}) },
			check: func(t *testing.T, s *Store) {
				if v := val(t, s, "ws/a"); v != nil {
					t.Fatalf("acknowledged delete lost: ws/a = %q", v)
				}
			},
		},
		{
			name: "delete range",
			setup: func(s *Store) error {
				return s.Put(persist.KV{Key: []byte("ws/a"), Value: []byte("1")}, persist.KV{Key: []byte("ws/b"), Value: []byte("2")})
			},
			write: func(s *Store) error { return s.DeleteRange([]byte("ws/"), []byte("ws0")) },
			check: func(t *testing.T, s *Store) {
				if a, b := val(t, s, "ws/a"), val(t, s, "ws/b"); a != nil || b != nil {
					t.Fatalf("acknowledged range deletion lost: ws/a = %q, ws/b = %q", a, b)
				}
			},
		},
		{
			name:  "append",
			write: func(s *Store) error { return s.Append(persist.Batch{Agent: "agt_1", First: 1, Events: events(3)}) },
			check: func(t *testing.T, s *Store) {
				if r, err := s.Load("agt_1"); err != nil || r.LastSeq != 3 {
					t.Fatalf("acknowledged append lost: LastSeq %d, %v", r.LastSeq, err)
				}
			},
		},
		{
			name:  "snapshot",
			setup: func(s *Store) error { return s.Append(persist.Batch{Agent: "agt_1", First: 1, Events: events(3)}) },
			write: func(s *Store) error { return s.SaveSnapshot("agt_1", 2, persist.Bytes("state@2")) },
			check: func(t *testing.T, s *Store) {
				r, err := s.Load("agt_1")
				if err != nil {
					t.Fatal(err)
				}
				if r.SnapshotSeq != 2 || !bytes.Equal(r.Snapshot, []byte("state@2")) || len(r.Tail) != 1 || r.LastSeq != 3 {
					t.Fatalf("acknowledged snapshot lost: snapshot %q at %d, %d events after it, LastSeq %d",
						r.Snapshot, r.SnapshotSeq, len(r.Tail), r.LastSeq)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			s, err := Open("db", Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			if tc.setup != nil {
				if err := tc.setup(s); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.write(s); err != nil {
				t.Fatal(err)
			}
			s = cutPower(t, fs, s)
			tc.check(t, s)
		})
	}
}

// TestTornRecordDroppedOnLoadStaysDroppedAfterACrash: Load deletes a torn
// final record (one past the high-water mark). Whether or not that delete
// reached the disk before a crash, the store recovers the acknowledged log:
// a torn record that comes back is dropped again on the next Load, and an
// Append that reuses its sequence overwrites it in a synced batch.
func TestTornRecordDroppedOnLoadStaysDroppedAfterACrash(t *testing.T) {
	redo := [][]byte{[]byte("redo-5"), []byte("redo-6")}
	tests := []struct {
		name  string
		after func(s *Store) error // between the Load and the crash
		want  [][]byte
	}{
		{"crash right after the load", func(*Store) error { return nil }, persisttest.Events("agt_t", 1, 4)},
		{"crash after an append at the torn sequence",
			func(s *Store) error { return s.Append(persist.Batch{Agent: "agt_t", First: 5, Events: redo}) },
			append(persisttest.Events("agt_t", 1, 4), redo...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			s, err := Open("db", Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			appendN(t, s, "agt_t", 1, 5)
			rewrite(t, s, eventKey("agt_t", 5), flipLast)
			setHighWater(t, s, "agt_t", 4) // event 5 was never acknowledged
			if r, err := s.Load("agt_t"); err != nil || r.LastSeq != 4 {
				t.Fatalf("Load before the crash: LastSeq %d, %v; want 4", r.LastSeq, err)
			}
			if err := tc.after(s); err != nil {
				t.Fatal(err)
			}
			s = cutPower(t, fs, s)
			for range 2 { // the first Load may drop the torn record again
				r, err := s.Load("agt_t")
				if err != nil {
					t.Fatalf("Load after the crash: %v", err)
				}
				persisttest.CheckTail(t, "agt_t", r.Tail, tc.want)
			}
		})
	}
}

// cutPower loses everything s wrote to fs and did not sync, as a power cut
// would now, and returns the store reopened on what is left (closed when
// the test ends).
func cutPower(t *testing.T, fs *vfs.MemFS, s *Store) *Store {
	t.Helper()
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	reopened, err := Open("db", Options{FS: clone})
	if err != nil {
		t.Fatalf("open crash clone: %v", err)
	}
	t.Cleanup(func() { _ = reopened.Close() })
	return reopened
}
