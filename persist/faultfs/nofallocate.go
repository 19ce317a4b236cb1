package faultfs

import (
	"errors"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// NoFallocate is the OS file system (vfs.Default, or one over it) as it
// behaves where fallocate is not supported (ext3, many FUSE and network
// file systems): a created file's Fd is a read-only descriptor of the same
// file, on which fallocate fails (EBADF). Writes go to the file as usual.
type NoFallocate struct{ vfs.FS }

// Create implements vfs.FS.
func (n NoFallocate) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := n.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	ro, err := os.Open(name)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return &noFallocateFile{File: f, ro: ro}, nil
}

// Unwrap implements vfs.FS.
func (n NoFallocate) Unwrap() vfs.FS { return n.FS }

type noFallocateFile struct {
	vfs.File
	ro *os.File
}

func (f *noFallocateFile) Fd() uintptr { return f.ro.Fd() }

func (f *noFallocateFile) Close() error { return errors.Join(f.File.Close(), f.ro.Close()) }
