package pebblelog

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/plaudit/plaudit/persist"
)

// ballastName is the file that reserves room for Pebble in the data
// directory. It is plain zeros; deleting it by hand is always safe.
const ballastName = "plaudit.ballast"

// space keeps a Store from running its disk out of room, in the manner of
// CockroachDB's ballast:
//
//   - Writes are refused with persist.ErrStorageFull while the free space,
//     measured every interval and lowered by every batch admitted since,
//     is below minFree. Reads go on. Writes resume once a measurement finds
//     minFree plus a margin free again.
//   - A ballast file of ballastSize bytes is kept while there is room for
//     it. Should Pebble still meet ENOSPC (the disk filled faster than the
//     measurements, or by another process), vfs.OnDiskFull deletes the
//     ballast and Pebble retries the write once into the room it freed,
//     so an in-flight write completes rather than failing Pebble's commit
//     pipeline. The ballast comes back when the room does.
type space struct {
	fs          vfs.FS // the unwrapped file system: the ballast lives outside Pebble
	dir         string
	ballast     string
	ballastSize int64
	minFree     int64
	logger      *slog.Logger

	unmeasured bool         // the file system cannot tell its free space: nothing is refused
	avail      atomic.Int64 // last measured free bytes, less what was admitted since
	full       atomic.Bool

	mu   sync.Mutex // serialises measure and the ballast's creation and removal
	stop chan struct{}
	done chan struct{}
}

// newSpace measures dir, creates the ballast if there is room for it, and
// starts measuring every interval. On a file system that cannot report its
// free space (an in-memory one) nothing is measured or refused.
func newSpace(fs vfs.FS, dir string, o Options, logger *slog.Logger) (*space, error) {
	sp := &space{
		fs: fs, dir: dir, ballast: fs.PathJoin(dir, ballastName),
		ballastSize: o.BallastSize, minFree: o.MinFree, logger: logger,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	du, err := fs.GetDiskUsage(dir)
	if errors.Is(err, vfs.ErrUnsupported) {
		sp.unmeasured = true
		close(sp.done)
		return sp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pebblelog: disk usage of %s: %w", dir, err)
	}
	total := int64(du.TotalBytes)
	if sp.ballastSize == 0 {
		sp.ballastSize = min(total/100, 256<<20)
	}
	if sp.minFree == 0 {
		sp.minFree = min(total/20, 256<<20)
	}
	sp.measure()
	go sp.run(o.SpaceInterval)
	return sp, nil
}

func (sp *space) run(interval time.Duration) {
	defer close(sp.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-sp.stop:
			return
		case <-t.C:
			sp.measure()
		}
	}
}

func (sp *space) close() {
	if sp.unmeasured {
		return
	}
	close(sp.stop)
	<-sp.done
}

// admit reserves n bytes for a write, or refuses it when the disk is full.
func (sp *space) admit(n int64) error {
	if sp.unmeasured {
		return nil
	}
	if sp.full.Load() {
		return persist.ErrStorageFull
	}
	if free := sp.avail.Add(-n); free < sp.minFree {
		sp.markFull(free)
		return persist.ErrStorageFull
	}
	return nil
}

// markFull refuses writes from now on, saying so once.
func (sp *space) markFull(free int64) {
	if sp.full.CompareAndSwap(false, true) {
		sp.logger.Warn("storage full: writes refused", "component", "pebblelog", "dir", sp.dir,
			"free_bytes", max(free, 0), "min_free_bytes", sp.minFree)
	}
}

// measure reads the free space, flips full, and keeps the ballast.
func (sp *space) measure() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	du, err := sp.fs.GetDiskUsage(sp.dir)
	if err != nil {
		sp.logger.Warn("disk usage unreadable", "component", "pebblelog", "dir", sp.dir, "err", err)
		return
	}
	free := int64(du.AvailBytes)
	sp.avail.Store(free)
	switch {
	case free < sp.minFree:
		sp.markFull(free)
	case free >= sp.minFree+sp.minFree/4:
		// The margin keeps writes from flapping on and off at the line.
		// The ballast comes back first: writes resumed before it was, a
		// disk filled again meanwhile met Pebble with nothing to release,
		// and the store failed.
		if free >= sp.minFree+2*sp.ballastSize {
			sp.keepBallast()
		}
		if sp.full.CompareAndSwap(true, false) {
			sp.logger.Info("storage has room again: writes resumed", "component", "pebblelog",
				"dir", sp.dir, "free_bytes", free)
		}
	}
}

// keepBallast creates the ballast if it is missing. Called with mu held.
func (sp *space) keepBallast() {
	if sp.ballastSize <= 0 {
		return
	}
	var old int64 // a ballast of another size, left by an earlier run
	if st, err := sp.fs.Stat(sp.ballast); err == nil {
		if st.Size() == sp.ballastSize {
			return
		}
		old = st.Size()
	}
	// The new ballast replaces the old one: the free space changes by the
	// difference.
	if err := writeBallast(sp.fs, sp.ballast, sp.ballastSize); err != nil {
		sp.logger.Warn("ballast not created", "component", "pebblelog", "path", sp.ballast, "err", err)
		_ = sp.fs.Remove(sp.ballast)
		sp.avail.Add(old)
		return
	}
	sp.avail.Add(old - sp.ballastSize)
}

// onDiskFull runs inside Pebble's write path when the disk returns ENOSPC:
// it refuses new writes and frees the ballast for the write to retry into.
// Pebble blocks new file writes while it runs, so it does no more.
func (sp *space) onDiskFull() {
	sp.full.Store(true)
	sp.avail.Store(0)
	err := sp.fs.Remove(sp.ballast)
	sp.logger.Error("disk full: ballast released, writes refused", "component", "pebblelog",
		"dir", sp.dir, "ballast_bytes", sp.ballastSize, "ballast_err", err)
}

// condition reports the measured state.
func (sp *space) condition() (full bool, free, minFree int64) {
	return sp.full.Load(), max(sp.avail.Load(), 0), sp.minFree
}

// writeBallast creates path holding size bytes: allocated in one call where
// the file system can (fallocate), written as zeros where it cannot.
func writeBallast(fs vfs.FS, path string, size int64) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if fd := f.Fd(); fd == vfs.InvalidFd || allocate(fd, size) != nil {
		buf := make([]byte, 64<<10)
		for left := size; left > 0; {
			n := min(left, int64(len(buf)))
			if _, err := f.Write(buf[:n]); err != nil {
				f.Close()
				return err
			}
			left -= n
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
