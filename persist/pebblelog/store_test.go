package pebblelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/klauspost/compress/zstd"

	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/persisttest"
)

func TestContractDisk(t *testing.T) {
	persisttest.RunContract(t, func(t *testing.T) persist.Store { return openDisk(t, t.TempDir()) })
}

func TestContractCrashableMem(t *testing.T) {
	persisttest.RunContract(t, func(t *testing.T) persist.Store {
		s, err := Open("db", Options{FS: vfs.NewCrashableMem()})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func openDisk(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openTemp(t *testing.T) *Store {
	s := openDisk(t, t.TempDir())
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func appendN(t *testing.T, s *Store, agent string, first uint64, n int) {
	t.Helper()
	err := s.Append(persist.Batch{Agent: agent, First: first, Events: persisttest.Events(agent, first, n)})
	if err != nil {
		t.Fatal(err)
	}
}

func TestReopenLoadsSameState(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir)
	appendN(t, s, "agt_a", 1, 5)
	appendN(t, s, "agt_b", 1, 3)
	if err := s.SaveSnapshot("agt_a", 3, persist.Bytes("a@3")); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, "agt_a", 6, 2)
	if err := s.Put(persist.KV{Key: []byte("ws/1"), Value: []byte("one")}); err != nil {
		t.Fatal(err)
	}
	want := map[string]persist.Recovered{}
	for _, agent := range []string{"agt_a", "agt_b", "agt_c"} {
		r, err := s.Load(agent)
		if err != nil {
			t.Fatal(err)
		}
		want[agent] = r
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openDisk(t, dir)
	defer s.Close()
	for agent, w := range want {
		got, err := s.Load(agent)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("after reopen Load(%s) = %+v, want %+v", agent, got, w)
		}
	}
	if v, err := s.Get([]byte("ws/1")); err != nil || string(v) != "one" {
		t.Errorf("after reopen Get(ws/1) = %q, %v", v, err)
	}
}

func TestSnapshotTrimsCoveredEvents(t *testing.T) {
	s := openTemp(t)
	appendN(t, s, "agt", 1, 10)
	appendN(t, s, "agt2", 1, 3)
	if err := s.SaveSnapshot("agt", 6, persist.Bytes("state")); err != nil {
		t.Fatal(err)
	}
	if got := rawSeqs(t, s, "agt"); !reflect.DeepEqual(got, []uint64{7, 8, 9, 10}) {
		t.Fatalf("log after snapshot at 6 = %v, want [7 8 9 10]", got)
	}
	if got := rawSeqs(t, s, "agt2"); !reflect.DeepEqual(got, []uint64{1, 2, 3}) {
		t.Fatalf("other agent's log = %v, want [1 2 3]", got)
	}
}

func rawSeqs(t *testing.T, s *Store, agent string) []uint64 {
	t.Helper()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: eventPrefix(agent), UpperBound: eventUpper(agent)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var seqs []uint64
	for ok := it.First(); ok; ok = it.Next() {
		seq, _ := seqOf(it.Key(), len(eventPrefix(agent)))
		seqs = append(seqs, seq)
	}
	return seqs
}

// rewrite replaces the stored value at key with f(value), bypassing Store.
func rewrite(t *testing.T, s *Store, key []byte, f func(v []byte) []byte) {
	t.Helper()
	v, closer, err := s.db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	nv := f(bytes.Clone(v))
	closer.Close()
	if err := s.db.Set(key, nv, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

func flipLast(v []byte) []byte { v[len(v)-1] ^= 0x40; return v }

func TestTornFinalRecordIsDropped(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"flipped byte": flipLast,
		"truncated":    func(v []byte) []byte { return v[:2] },
		"empty":        func([]byte) []byte { return []byte{} },
	} {
		t.Run(name, func(t *testing.T) {
			s := openTemp(t)
			appendN(t, s, "agt_t", 1, 5)
			rewrite(t, s, eventKey("agt_t", 5), damage)
			setHighWater(t, s, "agt_t", 4) // event 5 was never acknowledged
			r, err := s.Load("agt_t")
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if r.LastSeq != 4 {
				t.Fatalf("LastSeq = %d, want 4", r.LastSeq)
			}
			persisttest.CheckTail(t, "agt_t", r.Tail, persisttest.Events("agt_t", 1, 4))
			if got := rawSeqs(t, s, "agt_t"); len(got) != 4 {
				t.Fatalf("torn record not deleted: log = %v", got)
			}
			redo := [][]byte{[]byte("redo-5"), []byte("redo-6")}
			if err := s.Append(persist.Batch{Agent: "agt_t", First: 5, Events: redo}); err != nil {
				t.Fatalf("Append at torn seq: %v", err)
			}
			r, err = s.Load("agt_t")
			if err != nil {
				t.Fatal(err)
			}
			persisttest.CheckTail(t, "agt_t", r.Tail, append(persisttest.Events("agt_t", 1, 4), redo...))
		})
	}
}

func TestTornOnlyTailRecordAfterSnapshot(t *testing.T) {
	s := openTemp(t)
	appendN(t, s, "agt", 1, 4)
	if err := s.SaveSnapshot("agt", 3, persist.Bytes("s3")); err != nil {
		t.Fatal(err)
	}
	rewrite(t, s, eventKey("agt", 4), flipLast)
	setHighWater(t, s, "agt", 3)
	r, err := s.Load("agt")
	if err != nil {
		t.Fatal(err)
	}
	if r.SnapshotSeq != 3 || r.LastSeq != 3 || len(r.Tail) != 0 {
		t.Fatalf("Load = %+v, want snapshot at 3 and empty tail", r)
	}
}

// setHighWater overwrites agent's high-water mark, as if the batch that
// raised it past seq had never been acknowledged.
func setHighWater(t *testing.T, s *Store, agent string, seq uint64) {
	t.Helper()
	if err := s.db.Set(highKey(agent), binary.BigEndian.AppendUint64(nil, seq), pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// setLegacyHighWater writes the mark where stores kept it before highKey.
func setLegacyHighWater(t *testing.T, s *Store, agent string, seq uint64) {
	t.Helper()
	if err := s.db.Set(legacyHighKey(agent), binary.BigEndian.AppendUint64(nil, seq), pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// TestHighWaterMarkFollowsTheNewestEvent: an append writes the mark right
// after the agent's events (e/<agent>0), not in their range and not under
// the older key; Load reads the events without it.
func TestHighWaterMarkFollowsTheNewestEvent(t *testing.T) {
	s := openTemp(t)
	appendN(t, s, "agt", 1, 3)
	appendN(t, s, "agt_b", 1, 2)
	v, closer, err := s.db.Get([]byte("e/agt0"))
	if err != nil {
		t.Fatalf("mark at e/agt0: %v", err)
	}
	if got := binary.BigEndian.Uint64(v); len(v) != seqLen || got != 3 {
		t.Fatalf("mark = %x, want 3", v)
	}
	closer.Close()
	if _, _, err := s.db.Get(legacyHighKey("agt")); !errors.Is(err, pebble.ErrNotFound) {
		t.Fatalf("older mark key: %v, want none written", err)
	}
	r, err := s.Load("agt")
	if err != nil || r.LastSeq != 3 {
		t.Fatalf("Load = %+v, %v; want events 1 to 3", r, err)
	}
	persisttest.CheckTail(t, "agt", r.Tail, persisttest.Events("agt", 1, 3))
}

// TestOlderStoresHighWaterMarkStillCounts: a store written before the mark
// moved keeps it at h/<agent>. The larger of the two marks counts: a log
// behind the older one is refused, and one that an append took past it
// loads.
func TestOlderStoresHighWaterMarkStillCounts(t *testing.T) {
	s := openTemp(t)
	appendN(t, s, "agt", 1, 5)
	setLegacyHighWater(t, s, "agt", 7)
	wantCorrupt(t, s, "agt", "the log ends at event 5, but events to 7 were acknowledged")
	appendN(t, s, "agt", 6, 3)
	if r, err := s.Load("agt"); err != nil || r.LastSeq != 8 {
		t.Fatalf("Load past the older mark = %+v, %v; want events to 8", r, err)
	}
	setLegacyHighWater(t, s, "agt", 2)
	setHighWater(t, s, "agt", 9)
	wantCorrupt(t, s, "agt", "the log ends at event 8, but events to 9 were acknowledged")
}

// TestDamagedAcknowledgedRecordIsCorruption: a bad final record that the
// high-water mark says was acknowledged is not dropped as torn: it is
// corruption.
func TestDamagedAcknowledgedRecordIsCorruption(t *testing.T) {
	s := openTemp(t)
	appendN(t, s, "agt", 1, 5)
	rewrite(t, s, eventKey("agt", 5), flipLast)
	wantCorrupt(t, s, "agt", "event 5: checksum mismatch")
}

// TestLogBehindHighWaterIsCorruption: a log that lost its newest events
// (with or without a snapshot before them) is refused, naming both ends.
func TestLogBehindHighWaterIsCorruption(t *testing.T) {
	for _, snapshot := range []bool{false, true} {
		s := openTemp(t)
		appendN(t, s, "agt", 1, 10)
		if snapshot {
			if err := s.SaveSnapshot("agt", 6, persist.Bytes("s6")); err != nil {
				t.Fatal(err)
			}
		}
		end := append(eventKey("agt", 10), 0)
		if err := s.db.DeleteRange(eventKey("agt", 8), end, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		wantCorrupt(t, s, "agt", "the log ends at event 7, but events to 10 were acknowledged")
	}
}

func wantCorrupt(t *testing.T, s *Store, agent, detail string) {
	t.Helper()
	for range 2 { // corruption is not "repaired" by loading
		_, err := s.Load(agent)
		if !errors.Is(err, persist.ErrCorrupt) {
			t.Fatalf("Load: err = %v, want ErrCorrupt", err)
		}
		if !strings.Contains(err.Error(), agent) || !strings.Contains(err.Error(), detail) {
			t.Fatalf("Load: err = %q, want it to name %q and %q", err, agent, detail)
		}
	}
}

func TestMidLogCorruptionIsError(t *testing.T) {
	s := openTemp(t)
	appendN(t, s, "agt_mid", 1, 5)
	rewrite(t, s, eventKey("agt_mid", 3), flipLast)
	wantCorrupt(t, s, "agt_mid", "event 3")
}

func TestRecordUnderWrongKeyIsError(t *testing.T) {
	s := openTemp(t)
	appendN(t, s, "agt_x", 1, 3)
	appendN(t, s, "agt_y", 1, 3)
	v, closer, err := s.db.Get(eventKey("agt_x", 2))
	if err != nil {
		t.Fatal(err)
	}
	v = bytes.Clone(v)
	closer.Close()
	if err := s.db.Set(eventKey("agt_y", 2), v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, s, "agt_y", "event 2")
}

func TestGapIsError(t *testing.T) {
	for name, tc := range map[string]struct {
		snapAt, del uint64
		detail      string
	}{
		"middle":         {del: 3, detail: "event 4: gap: expected 3"},
		"first":          {del: 1, detail: "event 2: gap: expected 1"},
		"after snapshot": {snapAt: 2, del: 3, detail: "event 4: gap: expected 3"},
	} {
		t.Run(name, func(t *testing.T) {
			s := openTemp(t)
			appendN(t, s, "agt_gap", 1, 5)
			if tc.snapAt > 0 {
				if err := s.SaveSnapshot("agt_gap", tc.snapAt, persist.Bytes("s")); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.db.Delete(eventKey("agt_gap", tc.del), pebble.Sync); err != nil {
				t.Fatal(err)
			}
			wantCorrupt(t, s, "agt_gap", tc.detail)
		})
	}
}

func TestCorruptSnapshotIsError(t *testing.T) {
	for name, damage := range map[string]func([]byte) []byte{
		"flipped state":  flipLast,
		"flipped seq":    func(v []byte) []byte { v[8] ^= 1; return v },
		"unknown format": func(v []byte) []byte { v[0] = 9; return v },
		"truncated":      func(v []byte) []byte { return v[:snapshotHeader-1] },
	} {
		t.Run(name, func(t *testing.T) {
			s := openTemp(t)
			appendN(t, s, "agt_snap", 1, 3)
			if err := s.SaveSnapshot("agt_snap", 2, persist.Bytes(bytes.Repeat([]byte("state"), 100))); err != nil {
				t.Fatal(err)
			}
			rewrite(t, s, snapshotKey("agt_snap"), damage)
			wantCorrupt(t, s, "agt_snap", "snapshot")
		})
	}
}

// TestSnapshotOfEmptyStateWithoutFrameLoads: a zstd encoder may encode an
// empty state as no bytes at all (klauspost's does with WithZeroFrames
// false), so a stored snapshot that is only its header, checksum right,
// loads as an empty state rather than as corruption.
func TestSnapshotOfEmptyStateWithoutFrameLoads(t *testing.T) {
	s := openTemp(t)
	appendN(t, s, "agt", 1, 3)
	enc, err := zstd.NewWriter(nil, zstd.WithZeroFrames(false))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	sk := snapshotKey("agt")
	v := make([]byte, snapshotHeader)
	v[0] = snapshotFormat
	binary.BigEndian.PutUint64(v[1:], 2)
	v = enc.EncodeAll(nil, v)
	binary.BigEndian.PutUint32(v[1+seqLen:], snapshotCRC(sk, v))
	if err := s.db.Set(sk, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	r, err := s.Load("agt")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if r.Snapshot == nil || len(r.Snapshot) != 0 || r.SnapshotSeq != 2 || r.LastSeq != 3 {
		t.Fatalf("Load = %+v, want an empty snapshot at 2, last 3", r)
	}
	persisttest.CheckTail(t, "agt", r.Tail, persisttest.Events("agt", 3, 1))
}

func TestOversizedSnapshotIsError(t *testing.T) {
	s, err := Open(t.TempDir(), Options{MaxSnapshotSize: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SaveSnapshot("agt_big", 0, persist.Bytes(make([]byte, 1<<16))); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, s, "agt_big", "snapshot")
}

// TestOptionsDefaults: a zero (or, for sizes that cannot be zero, negative)
// option takes its default; a set one is kept.
func TestOptionsDefaults(t *testing.T) {
	d := Options{}.withDefaults()
	if d.FS != vfs.Default || d.CacheSize != defaultCacheSize || d.MemTableSize != defaultMemTableSize ||
		d.MaxSnapshotSize != defaultMaxSnapshotSize || d.Logger == nil || d.SpaceInterval != time.Second {
		t.Fatalf("defaults = %+v", d)
	}
	if n := (Options{CacheSize: -1, SpaceInterval: -1}).withDefaults(); n.CacheSize != defaultCacheSize || n.SpaceInterval != time.Second {
		t.Fatalf("negative sizes: %+v", n)
	}
	fs := vfs.NewMem()
	set := Options{FS: fs, CacheSize: 1 << 20, MemTableSize: 2 << 20, MaxSnapshotSize: 3 << 20, SpaceInterval: time.Minute}.withDefaults()
	if set.FS != fs || set.CacheSize != 1<<20 || set.MemTableSize != 2<<20 || set.MaxSnapshotSize != 3<<20 || set.SpaceInterval != time.Minute {
		t.Fatalf("set options = %+v", set)
	}
}

// An unsynced write is read at once, lost in a crash before the next
// synced commit, and as durable as any after it.
func TestAnUnsyncedWriteIsAsDurableAsTheNextSyncedCommit(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	get := func(s *Store, key string) string {
		v, err := s.Get([]byte(key))
		if errors.Is(err, persist.ErrNotFound) {
			return "absent"
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(v)
	}
	for _, kv := range []persist.KV{{Key: []byte("gone"), Value: []byte("x")}, {Key: []byte("kept"), Value: []byte("1")}} {
		if err := s.PutUnsynced(kv); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteRangeUnsynced([]byte("gone"), []byte("gone\x00")); err != nil {
		t.Fatal(err)
	}
	if got := get(s, "kept") + " " + get(s, "gone"); got != "1 absent" {
		t.Fatalf("before any crash: kept, gone = %s, want 1 absent", got)
	}
	lost := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := s.Put(persist.KV{Key: []byte("synced"), Value: []byte("2")}); err != nil {
		t.Fatal(err)
	}
	kept := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	for _, tc := range []struct {
		name string
		fs   vfs.FS
		want string
	}{
		{"crash before the synced commit", lost, "absent absent absent"},
		{"crash after it", kept, "1 absent 2"},
	} {
		r, err := Open("db", Options{FS: tc.fs})
		if err != nil {
			t.Fatal(err)
		}
		if got := get(r, "kept") + " " + get(r, "gone") + " " + get(r, "synced"); got != tc.want {
			t.Errorf("%s: kept, gone, synced = %s, want %s", tc.name, got, tc.want)
		}
		_ = r.Close()
	}
}

// TestAppendIndexInKeyOrderKeepsRepeats: an append's directory entries go
// into the batch in key order, but a key given twice keeps its order (the
// later one wins, a delete included), and the caller's slice is left as
// it was given.
func TestAppendIndexInKeyOrderKeepsRepeats(t *testing.T) {
	s := openTemp(t)
	kv := func(k, v string) persist.KV {
		if v == "" {
			return persist.KV{Key: []byte(k)}
		}
		return persist.KV{Key: []byte(k), Value: []byte(v)}
	}
	index := []persist.KV{kv("run/c", "1"), kv("run/a", "1"), kv("run/c", "2"), kv("run/b", "1"), kv("run/b", ""),
		kv("run/a", "2")}
	given := slices.Clone(index)
	if err := s.Append(persist.Batch{Agent: "agt", First: 1, Events: persisttest.Events("agt", 1, 1), Index: index}); err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(index, given, func(a, b persist.KV) bool {
		return string(a.Key) == string(b.Key) && string(a.Value) == string(b.Value)
	}) {
		t.Fatalf("the index given was reordered: %v", index)
	}
	for key, want := range map[string]string{"run/a": "2", "run/c": "2"} {
		if v, err := s.Get([]byte(key)); err != nil || string(v) != want {
			t.Fatalf("Get(%s) = %q, %v; want %q", key, v, err, want)
		}
	}
	if _, err := s.Get([]byte("run/b")); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("Get(run/b) after its delete: %v; want ErrNotFound", err)
	}
}
