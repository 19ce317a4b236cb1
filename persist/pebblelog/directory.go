package pebblelog

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/plaudit/plaudit/persist"
)

// Get implements persist.Store.
func (s *Store) Get(key []byte) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, persist.ErrClosed
	}
	if s.filter != nil && s.filter.absentFor(key) {
		return nil, persist.ErrNotFound
	}
	v, closer, err := s.db.Get(dirKey(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, persist.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", key, storageError(err))
	}
	out := bytes.Clone(v)
	closer.Close()
	return out, nil
}

// Put implements persist.Store.
func (s *Store) Put(kvs ...persist.KV) error { return s.put(pebble.Sync, kvs) }

// PutUnsynced is Put without waiting for the disk: for a copy its writer
// rebuilds after a crash (a cluster node's mirror of the directory, which
// writes its position in the same batch). It is as durable as the next
// synced commit.
func (s *Store) PutUnsynced(kvs ...persist.KV) error { return s.put(pebble.NoSync, kvs) }

func (s *Store) put(opts *pebble.WriteOptions, kvs []persist.KV) error {
	size := 12
	for _, kv := range kvs {
		if len(kv.Key) == 0 {
			return fmt.Errorf("put: empty key: %w", persist.ErrInvalid)
		}
		size += 24 + 2 + len(kv.Key) + len(kv.Value)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return persist.ErrClosed
	}
	if len(kvs) == 0 {
		return nil
	}
	if s.filter.coversAny(kvs) {
		s.filter.gate.RLock()
		defer s.filter.gate.RUnlock()
	}
	batch := s.db.NewBatchWithSize(size)
	defer batch.Close()
	if err := s.addKVs(batch, kvs); err != nil {
		return err
	}
	if err := s.commit(commitDirectory, batch, opts); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	return nil
}

// DeleteRange implements persist.Store.
func (s *Store) DeleteRange(start, end []byte) error { return s.deleteRange(pebble.Sync, start, end) }

// DeleteRangeUnsynced is DeleteRange without waiting for the disk, as
// PutUnsynced.
func (s *Store) DeleteRangeUnsynced(start, end []byte) error {
	return s.deleteRange(pebble.NoSync, start, end)
}

func (s *Store) deleteRange(opts *pebble.WriteOptions, start, end []byte) error {
	if len(start) == 0 || bytes.Compare(start, end) >= 0 {
		return fmt.Errorf("delete range [%q, %q): %w", start, end, persist.ErrInvalid)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return persist.ErrClosed
	}
	batch := s.db.NewBatch()
	defer batch.Close()
	if err := batch.DeleteRange(dirKey(start), dirKey(end), nil); err != nil {
		return err
	}
	if err := s.commit(commitDirectory, batch, opts); err != nil {
		return fmt.Errorf("delete range: %w", err)
	}
	return nil
}

// addKVs adds kvs to batch in key order (a key given twice keeps its
// order), and the keys it sets to the key filter (the caller holds its
// gate when coversAny). Pebble's memtable inserts a batch's keys with one
// skiplist inserter, which searches from the top of the skiplist for any
// key but one just after the key before it: in key order, a selection
// batch's run entries (ids of the same few milliseconds) are found next to
// each other. kvs itself is left as it is.
func (s *Store) addKVs(batch *pebble.Batch, kvs []persist.KV) error {
	byKey := func(a, b persist.KV) int { return bytes.Compare(a.Key, b.Key) }
	if !slices.IsSortedFunc(kvs, byKey) {
		kvs = slices.Clone(kvs)
		slices.SortStableFunc(kvs, byKey)
	}
	full := false
	for _, kv := range kvs {
		var err error
		if kv.Value == nil {
			err = batch.Delete(dirKey(kv.Key), nil)
		} else {
			// The key is built in the batch: no allocation an entry.
			op := batch.SetDeferred(2+len(kv.Key), len(kv.Value))
			appendDirKey(op.Key[:0], kv.Key)
			copy(op.Value, kv.Value)
			err = op.Finish()
			if s.filter != nil && s.filter.add(kv.Key) {
				full = true
			}
		}
		if err != nil {
			return err
		}
	}
	if full {
		s.startFilterRebuild()
	}
	return nil
}

// Scan implements persist.Store.
func (s *Store) Scan(prefix []byte, fn func(key, value []byte) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return persist.ErrClosed
	}
	lower := dirKey(prefix)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return fmt.Errorf("scan: %w", storageError(err))
	}
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			break // reported by it.Error below
		}
		if err := fn(it.Key()[2:], v); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil { // Close returns the iterator's error
		return fmt.Errorf("scan: %w", storageError(err))
	}
	return nil
}
