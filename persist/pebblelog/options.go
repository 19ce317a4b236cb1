package pebblelog

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options tunes a Store. The zero value is ready to use.
type Options struct {
	// FS is the file system; nil means vfs.Default. Tests pass
	// vfs.NewCrashableMem() to simulate crashes.
	FS vfs.FS
	// CacheSize is the block cache size in bytes (default 64 MiB).
	CacheSize int64
	// MemTableSize is the memtable size in bytes (default 64 MiB). Pebble
	// starts with a small memtable and grows to this size.
	MemTableSize uint64
	// MaxSnapshotSize caps a decompressed snapshot (default 1 GiB); a
	// snapshot that would decode larger is reported as corrupt.
	MaxSnapshotSize uint64
	// Logger receives Pebble's log and events (corruption, background
	// errors, write stalls) and the store's own (disk full); nil discards.
	Logger *slog.Logger
	// MinFree is the free space below which writes are refused with
	// persist.ErrStorageFull (default 5% of the disk, at most 256 MiB).
	MinFree int64
	// BallastSize is the size of the ballast file kept in the directory
	// for Pebble to write into should the disk fill regardless (default 1%
	// of the disk, at most 256 MiB; negative means none).
	BallastSize int64
	// SpaceInterval is how often free space is measured (default 1 s).
	SpaceInterval time.Duration
	// FilterPrefixes are directory key prefixes whose keys are also kept
	// in an in-memory Bloom filter, so that a Get of a key never stored
	// there is answered without reading Pebble (about 2.5 bytes of memory
	// a stored key; see keyFilter). For key spaces read mostly for
	// absence, such as Idempotency-Key records.
	FilterPrefixes [][]byte

	filterMinKeys int64 // the smallest key filter built (tests make it small)
}

const (
	defaultCacheSize       = 64 << 20
	defaultMemTableSize    = 64 << 20
	defaultMaxSnapshotSize = 1 << 30
)

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.CacheSize <= 0 {
		o.CacheSize = defaultCacheSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = defaultMemTableSize
	}
	if o.MaxSnapshotSize == 0 {
		o.MaxSnapshotSize = defaultMaxSnapshotSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SpaceInterval <= 0 {
		o.SpaceInterval = time.Second
	}
	return o
}

// openDB opens Pebble with the options both Open and OpenRaw use, so that
// benchmarks against a raw DB compare like with like.
func openDB(dir string, o Options) (*pebble.DB, error) {
	cache := pebble.NewCache(o.CacheSize)
	defer cache.Unref() // the DB holds its own reference
	popts := &pebble.Options{
		FS:                 o.FS,
		Cache:              cache,
		MemTableSize:       o.MemTableSize,
		Logger:             slogLogger{o.Logger},
		EventListener:      eventListener(o.Logger),
		FormatMajorVersion: pebble.FormatNewest,
	}
	db, err := pebble.Open(dir, popts)
	if err != nil {
		if lockHeld(err) {
			err = fmt.Errorf("%w (%w)", ErrLocked, err)
		}
		return nil, fmt.Errorf("pebblelog: open %s: %w", dir, err)
	}
	return db, nil
}

// ErrLocked is Open's error for a directory another store holds open: a
// server running on it, in this process or another.
var ErrLocked = errors.New("the directory is locked by a store holding it open")

// lockHeld reports whether err is Pebble's failure to take the
// directory's lock: fcntl's EAGAIN, the lock held by another process, or
// Pebble's own refusal of a lock this process holds. (EACCES, which some
// systems answer too, is left out: on Linux it is a permission error.)
func lockHeld(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || strings.Contains(err.Error(), "lock held by current process")
}

// OpenRaw opens a bare Pebble DB at dir with the Store's default options.
// It exists for benchmark baselines (a synced pebble Set per write).
func OpenRaw(dir string) (*pebble.DB, error) {
	return openDB(dir, Options{}.withDefaults())
}
