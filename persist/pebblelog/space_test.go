package pebblelog

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/faultfs"
)

// appendUntil appends 16 KiB events to agent until an Append fails, and
// returns the last acknowledged seq and the error.
func appendUntil(t *testing.T, s *Store, agent string, from uint64, limit int) (uint64, error) {
	t.Helper()
	ev := bytes.Repeat([]byte{'x'}, 16<<10)
	seq := from
	for range limit {
		if err := s.Append(persist.Batch{Agent: agent, First: seq + 1, Events: [][]byte{ev}}); err != nil {
			return seq, err
		}
		seq++
	}
	return seq, nil
}

func checkLoads(t *testing.T, s *Store, agent string, last uint64) {
	t.Helper()
	r, err := s.Load(agent)
	if err != nil {
		t.Fatalf("Load(%s): %v", agent, err)
	}
	if r.LastSeq != last {
		t.Fatalf("Load(%s).LastSeq = %d, want %d (every acknowledged event)", agent, r.LastSeq, last)
	}
}

// TestStorageFullRefusesWritesAndResumes fills a small disk: writes are
// refused with ErrStorageFull before Pebble meets ENOSPC, reads go on, and
// writes resume by themselves when room returns.
func TestStorageFullRefusesWritesAndResumes(t *testing.T) {
	fs := faultfs.NewQuota(vfs.NewMem(), 8<<20)
	s, err := Open("db", Options{FS: fs, MinFree: 1 << 20, BallastSize: 256 << 10, SpaceInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := fs.Stat("db/" + ballastName); err != nil || st.Size() != 256<<10 {
		t.Fatalf("ballast: %v, %v", st, err)
	}
	last, err := appendUntil(t, s, "a", 0, 1000)
	if !errors.Is(err, persist.ErrStorageFull) {
		t.Fatalf("append on a full disk: %v after %d events, want ErrStorageFull", err, last)
	}
	if last < 100 {
		t.Fatalf("only %d events fit before the disk counted as full", last)
	}
	if c := s.Condition(); !c.Full || c.Failed != nil {
		t.Fatalf("Condition = %+v, want full and not failed", c)
	}
	if err := s.Put(persist.KV{Key: []byte("k"), Value: []byte("v")}); !errors.Is(err, persist.ErrStorageFull) {
		t.Fatalf("Put on a full disk: %v", err)
	}
	checkLoads(t, s, "a", last)

	fs.SetCapacity(64 << 20)
	deadline := time.Now().Add(5 * time.Second)
	for s.Condition().Full {
		if time.Now().After(deadline) {
			t.Fatal("writes did not resume after the disk got room")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if last, err = appendUntil(t, s, "a", last, 10); err != nil {
		t.Fatalf("append after room returned: %v", err)
	}
	checkLoads(t, s, "a", last)
}

// TestDiskFilledBehindTheStoreBackUsesTheBallast shrinks the disk under a
// store that has not measured it: the write that meets ENOSPC is retried
// into the room the released ballast leaves and succeeds; later writes are
// refused, and nothing acknowledged is lost.
func TestDiskFilledBehindTheStoreBackUsesTheBallast(t *testing.T) {
	mem := vfs.NewMem()
	fs := faultfs.NewQuota(mem, 64<<20)
	s, err := Open("db", Options{FS: fs, MinFree: 1 << 20, BallastSize: 4 << 20, SpaceInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	last, err := appendUntil(t, s, "a", 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	fs.SetCapacity(fs.Used() + 64<<10) // another process took the rest
	last, err = appendUntil(t, s, "a", last, 1000)
	if !errors.Is(err, persist.ErrStorageFull) {
		t.Fatalf("append on a full disk: %v, want ErrStorageFull", err)
	}
	if _, err := fs.Stat("db/" + ballastName); err == nil {
		t.Fatal("the ballast is still there")
	}
	if c := s.Condition(); !c.Full || c.Failed != nil {
		t.Fatalf("Condition = %+v, want full and not failed", c)
	}
	checkLoads(t, s, "a", last)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open("db", Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkLoads(t, s, "a", last)
}

// TestFailedCommitFencesWrites takes the disk away with no ballast left to
// release: Pebble's commit fails, and instead of the process dying the
// write gets an error, later writes are refused, reads go on, and nothing
// acknowledged is lost.
func TestFailedCommitFencesWrites(t *testing.T) {
	mem := vfs.NewMem()
	fs := faultfs.NewQuota(mem, 64<<20)
	s, err := Open("db", Options{FS: fs, MinFree: 1, BallastSize: -1, SpaceInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	last, err := appendUntil(t, s, "a", 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	fs.SetCapacity(fs.Used())
	var failed error
	for i := range 3 {
		_, err := appendUntil(t, s, "b", uint64(i), 1)
		if !errors.Is(err, persist.ErrFailed) {
			t.Fatalf("append %d on a vanished disk: %v, want ErrFailed", i, err)
		}
		failed = err
	}
	if c := s.Condition(); !errors.Is(c.Failed, persist.ErrFailed) {
		t.Fatalf("Condition = %+v, want failed", c)
	}
	t.Log(failed)
	checkLoads(t, s, "a", last)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		t.Logf("Close: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs after a failed commit")
	}
}
