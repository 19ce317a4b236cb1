package pebblelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/plaudit/plaudit/persist"
)

// Load implements persist.Store. It reads through a Pebble snapshot so the
// stored snapshot and the log tail are one consistent view.
func (s *Store) Load(agent string) (persist.Recovered, error) {
	if err := validAgent(agent); err != nil {
		return persist.Recovered{}, fmt.Errorf("load: agent %q: %w", agent, err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return persist.Recovered{}, persist.ErrClosed
	}
	view := s.db.NewSnapshot()
	r, torn, err := s.read(view, agent)
	if cerr := view.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("agent %s: %w", agent, cerr)
	}
	if err != nil {
		return persist.Recovered{}, err
	}
	if torn != nil {
		// Deleting it lets the next Append reuse the sequence; otherwise a
		// later record would sit behind a bad one and read as corruption.
		batch := s.db.NewBatch()
		defer batch.Close()
		if err := batch.Delete(torn, nil); err != nil {
			return persist.Recovered{}, err
		}
		if err := s.commit(commitDirectory, batch, pebble.Sync); err != nil {
			return persist.Recovered{}, fmt.Errorf("agent %s: drop torn record: %w", agent, err)
		}
	}
	return r, nil
}

// highWater reads the agent's high-water mark: the larger of highKey's and
// legacyHighKey's (0 for a log older than both).
func (s *Store) highWater(view *pebble.Snapshot, agent string) (uint64, error) {
	var high uint64
	for _, k := range [][]byte{highKey(agent), legacyHighKey(agent)} {
		v, closer, err := view.Get(k)
		if errors.Is(err, pebble.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("agent %s: high-water mark: %w", agent, storageError(err))
		}
		n := len(v)
		if n == seqLen {
			high = max(high, binary.BigEndian.Uint64(v))
		}
		closer.Close()
		if n != seqLen {
			return 0, fmt.Errorf("agent %s: high-water mark of %d bytes: %w", agent, n, persist.ErrCorrupt)
		}
	}
	return high, nil
}

func corrupt(agent string, seq uint64, why string) error {
	return fmt.Errorf("agent %s: event %d: %s: %w", agent, seq, why, persist.ErrCorrupt)
}

// read returns the agent's recovered state and, if the final record was
// torn, its key (which the caller deletes).
func (s *Store) read(view *pebble.Snapshot, agent string) (r persist.Recovered, torn []byte, err error) {
	sk := snapshotKey(agent)
	v, closer, err := view.Get(sk)
	switch {
	case err == nil:
		state, seq, derr := s.codec.decode(sk, v)
		closer.Close()
		if derr != nil {
			return r, nil, fmt.Errorf("agent %s: snapshot: %v: %w", agent, derr, persist.ErrCorrupt)
		}
		r.Snapshot, r.SnapshotSeq, r.LastSeq = state, seq, seq
	case errors.Is(err, pebble.ErrNotFound):
	default:
		return r, nil, fmt.Errorf("agent %s: snapshot: %w", agent, storageError(err))
	}

	high, err := s.highWater(view, agent)
	if err != nil {
		return r, nil, err
	}
	defer func() {
		// The log must reach the high-water mark: an event below it was
		// acknowledged, and a log that ends short of it went backwards.
		if err == nil && torn == nil && r.LastSeq < high {
			err = fmt.Errorf("agent %s: the log ends at event %d, but events to %d were acknowledged: %w",
				agent, r.LastSeq, high, persist.ErrCorrupt)
		}
	}()

	prefixLen := len(eventPrefix(agent))
	it, err := view.NewIter(&pebble.IterOptions{
		LowerBound: eventKey(agent, r.SnapshotSeq+1),
		UpperBound: eventUpper(agent),
	})
	if err != nil {
		return r, nil, fmt.Errorf("agent %s: %w", agent, storageError(err))
	}
	defer it.Close()
	for valid := it.First(); valid; {
		seq, ok := seqOf(it.Key(), prefixLen)
		if !ok {
			return r, nil, corrupt(agent, r.LastSeq+1, fmt.Sprintf("malformed key %x", it.Key()))
		}
		if seq != r.LastSeq+1 {
			// The first tail event must follow the snapshot (or be 1);
			// the snapshot's DeleteRange removed everything before it.
			return r, nil, corrupt(agent, seq, fmt.Sprintf("gap: expected %d", r.LastSeq+1))
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return r, nil, fmt.Errorf("agent %s: event %d: %w", agent, seq, storageError(err))
		}
		payload, ok := checkRecord(it.Key(), v)
		if ok {
			r.Tail = append(r.Tail, bytes.Clone(payload))
			r.LastSeq = seq
			valid = it.Next()
			continue
		}
		if it.Next() || seq <= high {
			return r, nil, corrupt(agent, seq, "checksum mismatch")
		}
		if err := it.Error(); err != nil {
			return r, nil, fmt.Errorf("agent %s: %w", agent, storageError(err))
		}
		return r, eventKey(agent, seq), nil
	}
	if err := it.Error(); err != nil {
		return r, nil, fmt.Errorf("agent %s: %w", agent, storageError(err))
	}
	return r, nil, nil
}
