// Package faultfs holds file systems that fail the way disks do, for
// fault-injection tests of the store and the server above it.
package faultfs

import (
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Quota is a vfs.FS of limited capacity over another: writes that would
// take it past its capacity fail with ENOSPC, as on a full disk, and
// GetDiskUsage reports its capacity and what its files hold. The capacity
// can be changed at any time, as another process filling or freeing the
// disk would.
type Quota struct {
	vfs.FS
	mu       sync.Mutex
	capacity int64
	used     int64
	sizes    map[string]int64
}

// NewQuota returns fs limited to capacity bytes. Files already in fs are
// not counted.
func NewQuota(fs vfs.FS, capacity int64) *Quota {
	return &Quota{FS: fs, capacity: capacity, sizes: map[string]int64{}}
}

// SetCapacity changes the capacity.
func (q *Quota) SetCapacity(n int64) {
	q.mu.Lock()
	q.capacity = n
	q.mu.Unlock()
}

// Used returns the bytes the files hold.
func (q *Quota) Used() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.used
}

// grow accounts n more bytes to name, or fails with ENOSPC.
func (q *Quota) grow(name string, n int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if n > 0 && q.used+n > q.capacity {
		return &os.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
	}
	q.used += n
	q.sizes[name] += n
	return nil
}

func (q *Quota) forget(name string) {
	q.mu.Lock()
	q.used -= q.sizes[name]
	delete(q.sizes, name)
	q.mu.Unlock()
}

func (q *Quota) move(from, to string) {
	q.mu.Lock()
	q.used -= q.sizes[to]
	q.sizes[to] = q.sizes[from]
	delete(q.sizes, from)
	q.mu.Unlock()
}

func (q *Quota) wrap(name string, f vfs.File) vfs.File {
	return &quotaFile{File: f, q: q, name: name}
}

// Create implements vfs.FS.
func (q *Quota) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := q.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	q.forget(name) // truncated
	return q.wrap(name, f), nil
}

// OpenReadWrite implements vfs.FS.
func (q *Quota) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := q.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return q.wrap(name, f), nil
}

// ReuseForWrite implements vfs.FS.
func (q *Quota) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := q.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return nil, err
	}
	q.move(oldname, newname)
	return q.wrap(newname, f), nil
}

// Rename implements vfs.FS.
func (q *Quota) Rename(oldname, newname string) error {
	if err := q.FS.Rename(oldname, newname); err != nil {
		return err
	}
	q.move(oldname, newname)
	return nil
}

// Remove implements vfs.FS.
func (q *Quota) Remove(name string) error {
	if err := q.FS.Remove(name); err != nil {
		return err
	}
	q.forget(name)
	return nil
}

// RemoveAll implements vfs.FS.
func (q *Quota) RemoveAll(dir string) error {
	if err := q.FS.RemoveAll(dir); err != nil {
		return err
	}
	q.mu.Lock()
	for name, n := range q.sizes {
		if name == dir || strings.HasPrefix(name, dir+string(os.PathSeparator)) {
			q.used -= n
			delete(q.sizes, name)
		}
	}
	q.mu.Unlock()
	return nil
}

// GetDiskUsage implements vfs.FS.
func (q *Quota) GetDiskUsage(string) (vfs.DiskUsage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	avail := max(q.capacity-q.used, 0)
	return vfs.DiskUsage{AvailBytes: uint64(avail), TotalBytes: uint64(q.capacity), UsedBytes: uint64(q.used)}, nil
}

// Unwrap implements vfs.FS.
func (q *Quota) Unwrap() vfs.FS { return q.FS }

type quotaFile struct {
	vfs.File
	q    *Quota
	name string
}

func (f *quotaFile) Write(p []byte) (int, error) {
	if err := f.q.grow(f.name, int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.Write(p)
}

func (f *quotaFile) WriteAt(p []byte, off int64) (int, error) {
	st, err := f.File.Stat()
	if err != nil {
		return 0, err
	}
	if err := f.q.grow(f.name, max(off+int64(len(p))-st.Size(), 0)); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}
