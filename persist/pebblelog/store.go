package pebblelog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/plaudit/plaudit/persist"
)

// Store is a persist.Store on one Pebble DB.
type Store struct {
	// mu is read-held by every operation and write-held by Close, because
	// Pebble panics on use after Close. Read-locking does not serialise
	// writers: concurrent commits still meet in Pebble's commit pipeline and
	// share an fsync.
	mu     sync.RWMutex
	closed bool
	db     *pebble.DB
	dir    string
	fs     vfs.FS // the unwrapped file system
	codec  *codec
	space  *space
	logger *slog.Logger
	// failed holds the error that fenced writes after Pebble's commit
	// pipeline broke (see commit); nil while healthy.
	failed atomic.Pointer[error]

	// snapMu stripes SaveSnapshot by agent so that its read of the stored
	// snapshot seq and its write are atomic. Appends never take it.
	snapMu   [64]sync.Mutex
	snapSeed maphash.Seed

	metrics *metrics
	filter  *keyFilter // nil without Options.FilterPrefixes
	// beforeCommit, when set (by tests, before any write), runs at the
	// start of every commit.
	beforeCommit func()

	checkpoints atomic.Uint64 // names Checkpoint's directories

	group appendQueue // appends waiting for their group's commit (group.go)
}

var _ persist.Store = (*Store)(nil)

// RestoreMarker is the file a restore keeps in a data directory until it
// has finished (see backup.Restore); Open refuses a directory holding it.
const RestoreMarker = "plaudit.restoring"

// ErrUnfinishedRestore is Open's error for a directory holding
// RestoreMarker.
var ErrUnfinishedRestore = errors.New("the directory holds a restore that did not finish")

// Open opens (creating if needed) a Store in dir on opts.FS.
func Open(dir string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	c, err := newCodec(opts.MaxSnapshotSize)
	if err != nil {
		return nil, fmt.Errorf("pebblelog: %w", err)
	}
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		c.close()
		return nil, fmt.Errorf("pebblelog: %w", err)
	}
	// Before anything is written: a directory a restore did not finish
	// would otherwise start as a new, empty store.
	if _, err := opts.FS.Stat(opts.FS.PathJoin(dir, RestoreMarker)); err == nil {
		c.close()
		return nil, fmt.Errorf("pebblelog: %s: %w: empty it and restore again", dir, ErrUnfinishedRestore)
	}
	if err := removeCheckpoints(opts.FS, dir); err != nil {
		c.close()
		return nil, err
	}
	sp, err := newSpace(opts.FS, dir, opts, opts.Logger)
	if err != nil {
		c.close()
		return nil, err
	}
	fs := opts.FS
	opts.FS = vfs.OnDiskFull(opts.FS, sp.onDiskFull)
	db, err := openDB(dir, opts)
	if err != nil {
		sp.close()
		c.close()
		return nil, err
	}
	s := &Store{db: db, dir: dir, fs: fs, codec: c, space: sp, logger: opts.Logger, snapSeed: maphash.MakeSeed(),
		metrics: newMetrics(), filter: newKeyFilter(opts)}
	if s.filter != nil {
		s.startFilterRebuild()
	}
	return s, nil
}

// commit commits b with opts (pebble.Sync but for PutUnsynced's). It refuses the write while the disk is full or
// after Pebble's commit pipeline has broken: Pebble reports a failed WAL
// write through Logger.Fatalf (or a bare panic when rotating its WAL), and
// can take no further commits. That panic is caught here and becomes the
// error of this write and of every later one, so the process and its reads
// live on, and no caller is told a failed write succeeded.
func (s *Store) commit(kind commitKind, b *pebble.Batch, opts *pebble.WriteOptions) (err error) {
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	if f := s.failed.Load(); f != nil {
		return *f
	}
	if err := s.space.admit(int64(b.Len())); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: pebble commit: %v", persist.ErrFailed, r)
			if s.failed.CompareAndSwap(nil, &err) {
				s.logger.Error("store failed: writes refused until restart", "component", "pebblelog", "err", err)
			}
		}
	}()
	start := time.Now()
	err = storageError(b.Commit(opts))
	s.metrics.observe(kind, b.Len(), time.Since(start), opts.Sync)
	return err
}

// Condition implements persist.Store.
func (s *Store) Condition() persist.Condition {
	full, free, minFree := s.space.condition()
	c := persist.Condition{Full: full, FreeBytes: free, MinFreeBytes: minFree}
	if f := s.failed.Load(); f != nil {
		c.Failed = *f
	}
	return c
}

// Append implements persist.Store.
func (s *Store) Append(b persist.Batch) error {
	if err := validAgent(b.Agent); err != nil {
		return fmt.Errorf("append: agent %q: %w", b.Agent, err)
	}
	n := uint64(len(b.Events))
	if b.First == 0 || n > 0 && b.First > math.MaxUint64-(n-1) {
		return fmt.Errorf("append: agent %s: first seq %d: %w", b.Agent, b.First, persist.ErrInvalid)
	}
	size := 12 + 24 + 2 + len(b.Agent) + seqLen
	for _, ev := range b.Events {
		size += 24 + eventKeyLen(b.Agent) + crcLen + len(ev)
	}
	for _, kv := range b.Index {
		if len(kv.Key) == 0 {
			return fmt.Errorf("append: agent %s: empty index key: %w", b.Agent, persist.ErrInvalid)
		}
		size += 24 + 2 + len(kv.Key) + len(kv.Value)
	}
	if n == 0 && len(b.Index) == 0 {
		return nil
	}

	if err := s.appendInGroup(b, size); err != nil {
		return fmt.Errorf("append: agent %s: %w", b.Agent, err)
	}
	return nil
}

// addAppend writes b's events, its agent's high-water mark and its
// directory entries into batch.
func (s *Store) addAppend(batch *pebble.Batch, b persist.Batch) error {
	kl := eventKeyLen(b.Agent)
	for i, ev := range b.Events {
		seq := b.First + uint64(i)
		op := batch.SetDeferred(kl, crcLen+len(ev))
		appendEventKey(op.Key[:0], b.Agent, seq)
		putRecord(op.Value, op.Key, ev)
		if err := op.Finish(); err != nil {
			return err
		}
	}
	if n := uint64(len(b.Events)); n > 0 { // right after the events, next to them in the memtable (see highKey)
		hk := highKey(b.Agent)
		op := batch.SetDeferred(len(hk), seqLen)
		copy(op.Key, hk)
		binary.BigEndian.PutUint64(op.Value, b.First+n-1)
		if err := op.Finish(); err != nil {
			return err
		}
	}
	return s.addKVs(batch, b.Index)
}

// SaveSnapshot implements persist.Store.
func (s *Store) SaveSnapshot(agent string, seq uint64, state persist.State) error {
	if err := validAgent(agent); err != nil {
		return fmt.Errorf("snapshot: agent %q: %w", agent, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return persist.ErrClosed
	}
	sk := snapshotKey(agent)
	v, err := s.codec.encode(sk, seq, state) // CPU-heavy: before the stripe lock
	if err != nil {
		return fmt.Errorf("snapshot: agent %s: state: %w", agent, err)
	}

	mu := &s.snapMu[maphash.String(s.snapSeed, agent)%uint64(len(s.snapMu))]
	mu.Lock()
	defer mu.Unlock()
	if old, closer, err := s.db.Get(sk); err == nil {
		oldSeq, ok := snapshotSeq(old)
		closer.Close()
		if ok && oldSeq > seq {
			// A newer snapshot already trimmed events this one would need.
			return nil
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("snapshot: agent %s: %w", agent, storageError(err))
	}
	batch := s.db.NewBatchWithSize(len(sk) + len(v) + 2*eventKeyLen(agent) + 64)
	defer batch.Close()
	if err := batch.Set(sk, v, nil); err != nil {
		return err
	}
	// The end key is the seq's key plus a zero byte: the smallest key after
	// it, so seq itself is trimmed without computing seq+1 (which may wrap).
	end := append(eventKey(agent, seq), 0)
	if err := batch.DeleteRange(eventPrefix(agent), end, nil); err != nil {
		return err
	}
	if err := s.commit(commitSnapshot, batch, pebble.Sync); err != nil {
		return fmt.Errorf("snapshot: agent %s: %w", agent, err)
	}
	return nil
}

// Close implements persist.Store. In-flight operations finish first.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return persist.ErrClosed
	}
	s.closed = true
	err := s.db.Close()
	s.space.close()
	s.codec.close()
	return err
}
