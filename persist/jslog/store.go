package jslog

import (
	"fmt"
	"sync"

	"github.com/plaudit/plaudit/persist"
)

// Store is persist.Store for a cluster node: the agents of the partitions
// it owns (Agents), the cluster's directory (Directory), and the node's own
// store beneath the directory's mirror, whose Condition (its disk) is the
// node's.
type Store struct {
	agents *Agents
	dir    *Directory
	local  persist.Store

	mu     sync.RWMutex
	closed bool
}

// NewStore assembles a node's Store; Close closes dir and local.
func NewStore(agents *Agents, dir *Directory, local persist.Store) *Store {
	return &Store{agents: agents, dir: dir, local: local}
}

// open runs fn unless the store is closed.
func (s *Store) open(fn func() error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return persist.ErrClosed
	}
	return fn()
}

// Append writes b's index entries to the directory, its unique keys first
// (each claimed: a key another node wrote first is ErrExists, and nothing
// more is written), then b to its partition's log. A crash between leaves
// index entries naming a write that never happened, which readers must
// treat as absent (a run id pointing at an agent that does not know the
// run).
func (s *Store) Append(b persist.Batch) error {
	return s.open(func() error {
		if err := validBatch(b); err != nil {
			return err
		}
		if err := s.put(b.Index); err != nil { // no entries: no write
			return fmt.Errorf("agent %s: index: %w", b.Agent, err)
		}
		if len(b.Events) == 0 {
			return nil // index only: the log is left as it is
		}
		return s.agents.Append(b)
	})
}

// SaveSnapshot implements persist.Store.
func (s *Store) SaveSnapshot(agent string, seq uint64, state []byte) error {
	return s.open(func() error { return s.agents.SaveSnapshot(agent, seq, state) })
}

// Load implements persist.Store.
func (s *Store) Load(agent string) (r persist.Recovered, err error) {
	err = s.open(func() error { r, err = s.agents.Load(agent); return err })
	return r, err
}

// Get implements persist.Store.
func (s *Store) Get(key []byte) (v []byte, err error) {
	err = s.open(func() error { v, err = s.dir.Get(key); return err })
	return v, err
}

// Put implements persist.Store: the unique keys claimed first, as in
// Append.
func (s *Store) Put(kvs ...persist.KV) error {
	return s.open(func() error { return s.put(kvs) })
}

// put writes kvs to the directory, claiming its unique keys first: one
// another node wrote first is ErrExists, and nothing more is written.
func (s *Store) put(kvs []persist.KV) error {
	var rest []persist.KV
	for _, kv := range kvs {
		if !kv.Unique {
			rest = append(rest, kv)
		} else if err := s.dir.Claim(kv); err != nil {
			return err
		}
	}
	return s.dir.Put(rest...)
}

// DeleteRange implements persist.Store.
func (s *Store) DeleteRange(start, end []byte) error {
	return s.open(func() error { return s.dir.DeleteRange(start, end) })
}

// Scan implements persist.Store.
func (s *Store) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return s.open(func() error { return s.dir.Scan(prefix, fn) })
}

// Condition is the node's own store's.
func (s *Store) Condition() persist.Condition { return s.local.Condition() }

// Close stops the directory's mirror and closes the node's own store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return persist.ErrClosed
	}
	s.closed = true
	s.dir.Close()
	return s.local.Close()
}
