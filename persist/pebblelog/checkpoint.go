package pebblelog

import (
	"fmt"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/plaudit/plaudit/persist"
)

// CheckpointsDir is the directory, inside the data directory, that holds
// the checkpoints Checkpoint makes. Open empties it: a checkpoint found
// there at start belonged to a backup a crash interrupted.
const CheckpointsDir = "plaudit-checkpoints"

// Checkpoint makes a consistent copy of the whole store (every agent's log
// and snapshot, the high-water marks, the directory) in a new directory
// under <data>/plaudit-checkpoints, and returns its path and a func that
// removes it. The caller must call remove once it has read the copy: until
// then the copy's tables keep disk space that compactions would free.
//
// The copy is what a crash at one instant would have left, so every write
// is in it wholly or not at all (each is one Pebble batch, one WAL record):
//
//   - A write acknowledged before Checkpoint was called is in it: it was
//     synced to the WAL (or flushed to a table) before the checkpoint
//     listed them.
//   - A write that commits while Checkpoint runs is in it wholly or absent:
//     the tables are the version current when the checkpoint began, the
//     WAL is copied after a sync, and a record the copy cut short fails its
//     checksum and is dropped on open, as after a crash.
//
// Tables are hard-linked (copied only if the file system cannot link);
// the WAL is copied. The Pebble format of the copy is Format's.
func (s *Store) Checkpoint() (dir string, remove func() error, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return "", nil, persist.ErrClosed
	}
	root := s.fs.PathJoin(s.dir, CheckpointsDir)
	if err := s.fs.MkdirAll(root, 0o755); err != nil {
		return "", nil, fmt.Errorf("checkpoint: %w", err)
	}
	dir = s.fs.PathJoin(root, strconv.FormatUint(s.checkpoints.Add(1), 10))
	// A directory of that name can only be left from a crash before Open
	// emptied root, which it always does; remove it to be sure.
	if err := s.fs.RemoveAll(dir); err != nil {
		return "", nil, fmt.Errorf("checkpoint: %w", err)
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return "", nil, fmt.Errorf("checkpoint: %w", storageError(err))
	}
	return dir, func() error { return s.fs.RemoveAll(dir) }, nil
}

// Format is the Pebble format major version of the store's files.
func (s *Store) Format() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ""
	}
	return s.db.FormatMajorVersion().String()
}

// Flush writes the memtable to a table. Tests use it to have a table on
// disk; the store never needs it (the WAL makes every write durable).
func (s *Store) Flush() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return persist.ErrClosed
	}
	return s.db.Flush()
}

func removeCheckpoints(fs vfs.FS, dir string) error {
	if err := fs.RemoveAll(fs.PathJoin(dir, CheckpointsDir)); err != nil {
		return fmt.Errorf("pebblelog: removing stale checkpoints: %w", err)
	}
	return nil
}
