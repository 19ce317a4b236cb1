package pebblelog

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

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
	// Wait for a measurement of the new room, not merely "not full": the
	// files Pebble deleted meanwhile can flip the store back to writable
	// on the old capacity, with too little room left for the appends below.
	deadline := time.Now().Add(5 * time.Second)
	for c := s.Condition(); c.Full || c.FreeBytes < 32<<20; c = s.Condition() {
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

// TestWritesRefusedBetweenMeasurements: with no measurement due, the bytes
// admitted since the last one count against the free space, so writes are
// refused once MinFree is reached, before Pebble meets a full disk (the
// ballast is still there).
func TestWritesRefusedBetweenMeasurements(t *testing.T) {
	fs := faultfs.NewQuota(vfs.NewMem(), 32<<20)
	s, err := Open("db", Options{FS: fs, MinFree: 24 << 20, BallastSize: 256 << 10, SpaceInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := s.Condition()
	room := c.FreeBytes - c.MinFreeBytes
	last, err := appendUntil(t, s, "a", 0, 1000)
	if !errors.Is(err, persist.ErrStorageFull) {
		t.Fatalf("append past MinFree: %v after %d events, want ErrStorageFull", err, last)
	}
	// Each batch holds a 16 KiB event and less than 1 KiB besides.
	if int64(last)*16<<10 > room || room >= int64(last+1)*17<<10 {
		t.Fatalf("%d events of 16 KiB admitted into %d bytes above MinFree", last, room)
	}
	if got := ballastBytes(t, fs, "db"); got != 256<<10 {
		t.Fatalf("ballast of %d bytes, want it kept (the refusal came before a full disk)", got)
	}
	if c := s.Condition(); !c.Full || c.FreeBytes >= c.MinFreeBytes {
		t.Fatalf("Condition = %+v, want full below MinFree", c)
	}
	checkLoads(t, s, "a", last)
}

// newTestSpace starts a space on fs in dir that measures only when the test
// calls measure.
func newTestSpace(t *testing.T, fs vfs.FS, dir string, o Options) *space {
	t.Helper()
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	o.SpaceInterval = time.Hour
	sp, err := newSpace(fs, dir, o, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sp.close)
	return sp
}

// ballastBytes returns the size of the ballast in dir, or -1 if there is none.
func ballastBytes(t *testing.T, fs vfs.FS, dir string) int64 {
	t.Helper()
	st, err := fs.Stat(fs.PathJoin(dir, ballastName))
	if err != nil {
		return -1
	}
	return st.Size()
}

// checkFree fails t unless the space reports the quota's actual free bytes.
func checkFree(t *testing.T, sp *space, fs *faultfs.Quota, capacity int64) {
	t.Helper()
	if _, free, _ := sp.condition(); free != capacity-fs.Used() {
		t.Fatalf("FreeBytes = %d, want %d (capacity less what the files hold)", free, capacity-fs.Used())
	}
}

// TestSpaceDefaultsFollowTheDiskSize: without MinFree and BallastSize, a
// store keeps 5% of its disk free and a ballast of 1% of it; a disk too
// small for a byte of ballast gets no ballast file.
func TestSpaceDefaultsFollowTheDiskSize(t *testing.T) {
	for _, tc := range []struct {
		total, minFree, ballast int64
	}{
		{total: 8 << 20, minFree: 8 << 20 / 20, ballast: 8 << 20 / 100},
		{total: 99, minFree: 4, ballast: -1},
	} {
		fs := faultfs.NewQuota(vfs.NewMem(), tc.total)
		sp := newTestSpace(t, fs, "db", Options{})
		full, _, minFree := sp.condition()
		if full || minFree != tc.minFree {
			t.Fatalf("disk of %d bytes: full %v, MinFreeBytes %d; want not full, %d", tc.total, full, minFree, tc.minFree)
		}
		if got := ballastBytes(t, fs, "db"); got != tc.ballast {
			t.Fatalf("disk of %d bytes: ballast of %d bytes, want %d (-1: none)", tc.total, got, tc.ballast)
		}
		checkFree(t, sp, fs, tc.total)
	}
}

// TestAdmitRefusesBelowMinFree: a write that leaves exactly MinFree free is
// admitted and lowers the free space by its size; the next byte is refused.
func TestAdmitRefusesBelowMinFree(t *testing.T) {
	const capacity, minFree = 4 << 20, 1 << 20
	fs := faultfs.NewQuota(vfs.NewMem(), capacity)
	sp := newTestSpace(t, fs, "db", Options{MinFree: minFree, BallastSize: -1})
	if err := sp.admit(capacity - minFree); err != nil {
		t.Fatalf("a write leaving exactly MinFree free: %v", err)
	}
	if full, free, _ := sp.condition(); full || free != minFree {
		t.Fatalf("after it: full %v, FreeBytes %d; want not full, %d", full, free, minFree)
	}
	if err := sp.admit(1); !errors.Is(err, persist.ErrStorageFull) {
		t.Fatalf("a write past MinFree: %v, want ErrStorageFull", err)
	}
	if full, _, _ := sp.condition(); !full {
		t.Fatal("not full after a refused write")
	}
}

// TestBallastReturnsOnlyWithRoomForItTwice: the ballast is (re)created
// once a measurement finds MinFree plus twice its size free, not a byte
// sooner; a ballast in place is left as it is.
func TestBallastReturnsOnlyWithRoomForItTwice(t *testing.T) {
	const minFree, ballast = 1 << 20, 256 << 10
	fs := faultfs.NewQuota(vfs.NewMem(), minFree+2*ballast-1)
	sp := newTestSpace(t, fs, "db", Options{MinFree: minFree, BallastSize: ballast})
	if full, _, _ := sp.condition(); full {
		t.Fatal("full above MinFree plus its margin")
	}
	if got := ballastBytes(t, fs, "db"); got != -1 {
		t.Fatalf("ballast of %d bytes created a byte short of room for it twice", got)
	}
	fs.SetCapacity(minFree + 2*ballast)
	for range 2 {
		sp.measure()
		if got := ballastBytes(t, fs, "db"); got != ballast {
			t.Fatalf("ballast of %d bytes, want %d", got, ballast)
		}
		checkFree(t, sp, fs, minFree+2*ballast)
	}
}

// TestBallastResizedToTheOptions: a ballast left by an earlier run with
// another BallastSize is rewritten to this run's size, and the free space
// reported at once is the disk's (the old ballast's room counted back).
func TestBallastResizedToTheOptions(t *testing.T) {
	const capacity = 8 << 20
	fs := faultfs.NewQuota(vfs.NewMem(), capacity)
	for _, size := range []int64{128 << 10, 256 << 10, 64 << 10} {
		sp := newTestSpace(t, fs, "db", Options{MinFree: 1 << 20, BallastSize: size})
		if got := ballastBytes(t, fs, "db"); got != size {
			t.Fatalf("BallastSize %d: ballast of %d bytes", size, got)
		}
		du, err := fs.GetDiskUsage("db")
		if err != nil {
			t.Fatal(err)
		}
		if _, free, _ := sp.condition(); free != int64(du.AvailBytes) {
			t.Fatalf("BallastSize %d: %d bytes reported free, the disk has %d", size, free, du.AvailBytes)
		}
	}
}

// TestBallastCreatedOnEveryFileSystem: the ballast has its size, in zeros,
// whether the file system allocates it at once (fallocate), refuses
// fallocate, or has no descriptors (in memory): the last two get it
// written as zeros.
func TestBallastCreatedOnEveryFileSystem(t *testing.T) {
	const size = 1 << 20
	for _, tc := range []struct {
		name   string
		fs     vfs.FS
		onDisk bool
	}{
		{"os", vfs.Default, true},
		{"fallocate refused", faultfs.NoFallocate{FS: vfs.Default}, true},
		{"in memory", faultfs.NewQuota(vfs.NewMem(), 8<<20), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, dir := tc.fs, "db"
			if tc.onDisk {
				dir = t.TempDir()
			}
			newTestSpace(t, fs, dir, Options{MinFree: 1, BallastSize: size})
			if got := ballastBytes(t, fs, dir); got != size {
				t.Fatalf("ballast of %d bytes, want %d", got, size)
			}
			if !tc.onDisk {
				// Pebble's MemFS scribbles over written buffers in race
				// and invariants builds, so only the size is checked.
				return
			}
			f, err := fs.Open(fs.PathJoin(dir, ballastName))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			buf := make([]byte, size)
			if n, err := f.ReadAt(buf, 0); n != size || !bytes.Equal(buf, make([]byte, size)) {
				t.Fatalf("ballast holds %d bytes (%v), want %d zeros", n, err, size)
			}
		})
	}
}

// TestBallastThatCannotBeSyncedIsRemoved: a ballast whose sync fails is not
// trusted to hold its room: it is removed and not counted.
func TestBallastThatCannotBeSyncedIsRemoved(t *testing.T) {
	const capacity = 8 << 20
	failSync := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSync {
			return errorfs.ErrInjected
		}
		return nil
	})
	fs := faultfs.NewQuota(errorfs.Wrap(vfs.NewMem(), failSync), capacity)
	sp := newTestSpace(t, fs, "db", Options{MinFree: 1 << 20, BallastSize: 256 << 10})
	if got := ballastBytes(t, fs, "db"); got != -1 {
		t.Fatalf("a ballast of %d bytes whose sync failed was kept", got)
	}
	checkFree(t, sp, fs, capacity)
}

// TestADiskFilledAgainAsWritesResumeDoesNotFailTheStore fills the disk,
// makes room, and fills it again the moment writes resume, many times.
// The ballast must be back before writes resume: when it came back after,
// the disk filled again while it was being written, Pebble met ENOSPC with
// no ballast to release, and the store failed ("fatal commit error").
func TestADiskFilledAgainAsWritesResumeDoesNotFailTheStore(t *testing.T) {
	fs := faultfs.NewQuota(vfs.NewMem(), 64<<20)
	s, err := Open("db", Options{FS: fs, MinFree: 2 << 20, BallastSize: 1 << 20, SpaceInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ev := bytes.Repeat([]byte{'x'}, 200)
	var last [8]uint64
	for cycle := range 40 {
		fs.SetCapacity(fs.Used() + 256<<10) // another process takes the disk
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			other []error
		)
		for w := range len(last) {
			wg.Go(func() {
				for {
					err := s.Append(persist.Batch{Agent: fmt.Sprintf("a%d", w), First: last[w] + 1, Events: [][]byte{ev}})
					if errors.Is(err, persist.ErrStorageFull) {
						return
					}
					if err != nil {
						mu.Lock()
						other = append(other, err)
						mu.Unlock()
						return
					}
					last[w]++
				}
			})
		}
		wg.Wait()
		if len(other) > 0 {
			t.Fatalf("cycle %d: %v", cycle, other[0])
		}
		fs.SetCapacity(64 << 20) // and gives it back
		for deadline := time.Now().Add(5 * time.Second); s.Condition().Full; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: writes did not resume after the disk got room", cycle)
			}
		}
	}
	for w, n := range last {
		checkLoads(t, s, fmt.Sprintf("a%d", w), n)
	}
}
