package jslog

import (
	"errors"
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

// Append writes b's index entries to the directory, its unique keys
// claimed first (a key held by another write, on any node, is ErrExists,
// and nothing more is written), then b to its partition's log, then
// confirms the claims. A crash between leaves index entries naming a write
// that never happened, which readers must treat as absent (a run id
// pointing at an agent that does not know the run); its claims were never
// confirmed, so their window frees their keys.
func (s *Store) Append(b persist.Batch) error {
	return s.open(func() error {
		if err := validBatch(b); err != nil {
			return err
		}
		claims, err := s.put(b.Index) // no entries: no write
		if err != nil {
			return fmt.Errorf("agent %s: index: %w", b.Agent, err)
		}
		if len(b.Events) > 0 {
			if err := s.agents.Append(b); err != nil {
				return err
			}
		}
		if err := s.confirm(claims); err != nil {
			return fmt.Errorf("agent %s: index: %w", b.Agent, err)
		}
		return nil
	})
}

// SaveSnapshot implements persist.Store.
func (s *Store) SaveSnapshot(agent string, seq uint64, state []byte) error {
	return s.open(func() error { return s.agents.SaveSnapshot(agent, seq, state) })
}

// Load implements persist.Store. It first confirms the unique keys of the
// agent's logged batches that are not confirmed yet: a batch can land
// without its confirmations (its node crashed after the log took it, or
// the log's acknowledgement was lost), and the log, not the directory, is
// what happened. A key another write holds is left to it.
func (s *Store) Load(agent string) (r persist.Recovered, err error) {
	err = s.open(func() error {
		var unique []persist.KV
		if r, unique, err = s.agents.load(agent); err != nil {
			return err
		}
		for _, kv := range unique {
			if err := s.confirmLogged(kv); err != nil {
				return fmt.Errorf("agent %s: index: %w", agent, err)
			}
		}
		return nil
	})
	return r, err
}

// confirmLogged makes kv, the unique index entry of a logged batch, what
// its key holds, unless the key holds it already or another write holds it.
func (s *Store) confirmLogged(kv persist.KV) error {
	_, err := s.dir.Get(kv.Key)
	if !errors.Is(err, persist.ErrNotFound) {
		return err
	}
	c, err := s.dir.Claim(kv)
	switch {
	case errors.Is(err, persist.ErrExists):
		return nil
	case err != nil:
		return err
	}
	if err := s.dir.Confirm(c); !errors.Is(err, persist.ErrExists) {
		return err
	}
	return nil
}

// Get implements persist.Store.
func (s *Store) Get(key []byte) (v []byte, err error) {
	err = s.open(func() error { v, err = s.dir.Get(key); return err })
	return v, err
}

// Put implements persist.Store: the unique keys claimed first and
// confirmed last, as in Append.
func (s *Store) Put(kvs ...persist.KV) error {
	return s.open(func() error {
		claims, err := s.put(kvs)
		if err != nil {
			return err
		}
		return s.confirm(claims)
	})
}

// put writes kvs to the directory, claiming its unique keys first: one
// another write holds is ErrExists, and nothing more is written. The
// claims it returns are the caller's to confirm once its write has landed.
func (s *Store) put(kvs []persist.KV) ([]Claim, error) {
	var (
		rest   []persist.KV
		claims []Claim
	)
	for _, kv := range kvs {
		if !kv.Unique {
			rest = append(rest, kv)
			continue
		}
		c, err := s.dir.Claim(kv)
		if err != nil {
			return nil, err
		}
		claims = append(claims, c)
	}
	return claims, s.dir.Put(rest...)
}

// confirm confirms claims, in order.
func (s *Store) confirm(claims []Claim) error {
	for _, c := range claims {
		if err := s.dir.Confirm(c); err != nil {
			return err
		}
	}
	return nil
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
