package jslog

import (
	"errors"
	"fmt"
	"sync"

	"github.com/plaudit/plaudit/internal/jserr"
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
	err := fn()
	if err != nil && jserr.Unavailable(err) && !errors.Is(err, persist.ErrUnavailable) {
		// JetStream did not answer in time: a request of a caller's, a
		// retry's (503), not a failure of the server's (500).
		err = fmt.Errorf("%w: %w", persist.ErrUnavailable, err)
	}
	return err
}

// Append writes b in three steps: it claims b's unique index keys (a key
// another write holds, on any node, is ErrExists, and nothing is written),
// appends b to its partition's log, then writes the rest of the index and
// confirms the claims. The log is the record of what happened, and the
// directory readers read follows it: an entry there (a run's agent, an
// Idempotency-Key record) never names a write the log lacks. A crash
// after the log append leaves the index to Load; one before it leaves
// claims never confirmed, which their window frees. A batch whose
// partition is not owned here sends nothing to the log, and one fenced off
// by a newer owner, or settled as not stored after its append went
// unanswered (Agents.Append), is not stored: each releases its claims at
// once.
func (s *Store) Append(b persist.Batch) error {
	return s.open(func() error {
		if err := validBatch(b); err != nil {
			return err
		}
		claims, rest, err := s.claim(b.Index, Claimer{Agent: b.Agent, First: b.First})
		if err != nil {
			return fmt.Errorf("agent %s: index: %w", b.Agent, err)
		}
		if len(b.Events) > 0 {
			if err := s.agents.Append(b); err != nil {
				if errors.Is(err, ErrNotOwner) || errors.Is(err, ErrFenced) || errors.Is(err, ErrNotStored) {
					// Nothing was stored: left to their window, the
					// claims kept the keys from the batch's retry on the
					// new owner (a paused node's queued requests), and
					// from the restore of a batch it retried.
					s.release(claims)
				}
				return err
			}
		}
		if err := s.settle(claims, rest); err != nil {
			return fmt.Errorf("agent %s: index: %w", b.Agent, err)
		}
		return nil
	})
}

// SaveSnapshot implements persist.Store.
func (s *Store) SaveSnapshot(agent string, seq uint64, state persist.State) error {
	return s.open(func() error { return s.agents.SaveSnapshot(agent, seq, state) })
}

// Load implements persist.Store. It first writes what the directory lacks
// of the index of the agent's last logged batch: the one batch that can
// have landed without it (its node crashed after the log took it, or the
// log's acknowledgement was lost), since an actor whose append failed
// appends nothing more, and the next one loads first. An entry the
// directory holds is left as it is, and so is a unique key another write
// holds confirmed (see restore).
func (s *Store) Load(agent string) (r persist.Recovered, err error) {
	err = s.open(func() error {
		var last *Stored
		if r, last, err = s.agents.load(agent); err != nil || last == nil {
			return err
		}
		if err := s.restore(last); err != nil {
			return fmt.Errorf("agent %s: index: %w", agent, err)
		}
		return nil
	})
	return r, err
}

// restore writes the entries of a logged batch's index that the directory
// lacks, the unique ones claimed and confirmed (a claim of the very same
// entry does not wait out its window). A unique key another write holds
// confirmed is left to it; one that a write in flight holds fails the
// restore, and nothing is confirmed, so that the next try (the agent's
// next load, or a claim that finds the batch's claims past their window)
// restores the whole index.
func (s *Store) restore(b *Stored) error {
	var (
		rest   []persist.KV
		claims []Claim
	)
	for _, kv := range b.Index {
		if kv.Value == nil {
			continue // a deletion: applying it again could undo a later write
		}
		switch _, err := s.dir.Get(kv.Key); {
		case err == nil:
			continue
		case !errors.Is(err, persist.ErrNotFound):
			return err
		}
		if !kv.Unique {
			rest = append(rest, kv)
			continue
		}
		c, err := s.claimKey(kv, Claimer{Agent: b.Agent, First: b.First})
		var held *heldByLog
		switch {
		case errors.As(err, &held):
			if err := s.restore(&held.batch); err != nil {
				return err
			}
			continue // another logged batch holds it
		case errors.Is(err, errInFlight):
			// Skipped, the entry would never be written: this batch's
			// other keys, confirmed, start no restore when claimed again.
			return fmt.Errorf("jslog: agent %s's logged batch at %d: key %q is held by a write in flight; "+
				"restored once that write lands or its window passes", b.Agent, b.First, kv.Key)
		case errors.Is(err, persist.ErrExists):
			continue // another write took it
		case err != nil:
			return err
		}
		claims = append(claims, c)
	}
	if err := s.dir.Put(rest...); err != nil {
		return err
	}
	return each(len(claims), func(i int) error {
		if err := s.dir.Confirm(claims[i]); !errors.Is(err, persist.ErrExists) {
			return err
		}
		return nil // taken over meanwhile: the key is another write's
	})
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
		claims, rest, err := s.claim(kvs, Claimer{})
		if err != nil {
			return err
		}
		return s.settle(claims, rest)
	})
}

// claim claims the unique keys of kvs for by's batch, all at once, and
// returns the claims and the other entries. A key another write holds is
// ErrExists. On any failure the keys claimed meanwhile are released, since
// the batch will not be written. Left to their windows, they would refuse
// the batch's retry, whose entries differ (a run made again has another
// id); and a retry that took each key as its window passed, while another
// key's had not, would hold them in turn, never all at once.
func (s *Store) claim(kvs []persist.KV, by Claimer) ([]Claim, []persist.KV, error) {
	var rest, unique []persist.KV
	for _, kv := range kvs {
		if kv.Unique {
			unique = append(unique, kv)
		} else {
			rest = append(rest, kv)
		}
	}
	var (
		claims = make([]Claim, len(unique))
		heldMu sync.Mutex
		held   []*heldByLog
	)
	err := each(len(unique), func(i int) (err error) {
		claims[i], err = s.claimKey(unique[i], by)
		if h := (*heldByLog)(nil); errors.As(err, &h) {
			heldMu.Lock()
			held = append(held, h)
			heldMu.Unlock()
		}
		return err
	})
	if err != nil {
		s.release(claims)
		// The logged batches found holding keys are restored once this
		// batch's own claims are released: a restore would find them in
		// its way, and this batch, whose claims come back each retry,
		// would keep one of their keys from them for good.
		for _, h := range held {
			if err := s.restore(&h.batch); err != nil {
				return nil, nil, err
			}
		}
		return nil, nil, err
	}
	return claims, rest, nil
}

// release releases the claims made of claims (all at once), for a batch
// that will not be written.
func (s *Store) release(claims []Claim) {
	_ = each(len(claims), func(i int) error {
		if claims[i].seq != 0 { // claimed
			s.dir.Release(claims[i])
		}
		return nil
	})
}

// heldByLog is claimKey's refusal of a key that an agent's logged batch
// holds with a claim its node never confirmed: the batch's index is
// restored (Store.claim).
type heldByLog struct {
	batch Stored
	key   []byte
}

func (e *heldByLog) Error() string {
	return fmt.Sprintf("jslog: directory key %q: agent %s's logged batch at %d holds it", e.key, e.batch.Agent, e.batch.First)
}

func (e *heldByLog) Unwrap() error { return persist.ErrExists }

// each runs fn(0), …, fn(n-1) at once (each claim or confirmation is a
// replicated write: one after the other, a batch of n keyed requests would
// wait for 2n of them), and returns the first error of the lowest i once
// all have returned.
func each(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// claimKey claims kv's key for by's batch. A key held by another batch's
// claim past its window goes to that batch if it reached its log (its
// node stopped before confirming: *heldByLog, whose index is for the
// caller to restore), and is taken over if it did not.
func (s *Store) claimKey(kv persist.KV, by Claimer) (Claim, error) {
	c, err := s.dir.Claim(kv, by)
	var stale *StaleClaim
	if !errors.As(err, &stale) {
		return c, err
	}
	logged, ok, err := s.agents.logged(stale.Agent, stale.First, stale.Entry)
	switch {
	case err != nil:
		return Claim{}, err
	case !ok:
		return s.dir.TakeOver(kv, by, stale.seq)
	}
	return Claim{}, &heldByLog{batch: logged, key: kv.Key}
}

// settle writes rest, then confirms claims: a reader that finds a
// confirmed key finds the entries written with it (a run's external id,
// then its agent).
func (s *Store) settle(claims []Claim, rest []persist.KV) error {
	if err := s.dir.Put(rest...); err != nil {
		return err
	}
	return each(len(claims), func(i int) error { return s.dir.Confirm(claims[i]) })
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
