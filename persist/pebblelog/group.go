package pebblelog

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/plaudit/plaudit/persist"
)

// Group commit.
//
// Appends made while another group's commit is out wait for it, then go
// together as the next group: one Pebble batch, one synced commit, led by
// the first waiting append's caller. Pebble shares an fsync between
// concurrent commits as well, but each commit still takes its own pass
// through the commit pipeline, and many small commits sync more often
// than a few large ones: 64 agents each waiting on a one-event append took
// a tenth more CPU a write that way (BENCHMARKS.md, "2026-12-05, evening").
//
// A group is atomic as a batch is: every append in it is stored, or none,
// and each gets the commit's error. An append alone (nothing else out) is
// committed at once by its own caller, as before.

const (
	maxGroup      = 256     // appends in one group
	maxGroupBytes = 8 << 20 // their batches' sizes, past the first one's
)

// appendQueue holds the appends waiting for a group.
type appendQueue struct {
	mu      sync.Mutex
	queue   []*queuedAppend
	leading bool // a group is being committed; queue is then waited on
}

// queuedAppend is one validated append waiting for its group.
type queuedAppend struct {
	b    persist.Batch
	size int // its records' size in a Pebble batch
	err  error
	// turn is sent true once the append's group is committed (err is
	// then set), false when its caller is to lead the next group.
	turn chan bool
}

// appendInGroup commits b, of size bytes in a batch, in the next group.
func (s *Store) appendInGroup(b persist.Batch, size int) error {
	w := &queuedAppend{b: b, size: size, turn: make(chan bool, 1)}
	q := &s.group
	q.mu.Lock()
	q.queue = append(q.queue, w)
	if q.leading {
		q.mu.Unlock()
		if <-w.turn {
			return w.err
		}
		q.mu.Lock()
	}
	// w leads: it is the first append in the queue.
	q.leading = true
	n, total := 1, w.size
	for n < len(q.queue) && n < maxGroup && total-w.size+q.queue[n].size <= maxGroupBytes {
		total += q.queue[n].size
		n++
	}
	group := q.queue[:n:n]
	if q.queue = q.queue[n:]; len(q.queue) == 0 {
		q.queue = nil
	}
	q.mu.Unlock()

	err := s.commitGroup(group, total)
	// The group's callers are woken before the next group is begun: the
	// appends they make meanwhile join it. (Begun first, the next group
	// was smaller, and the CPU a write took nearer to that of no groups.)
	for _, g := range group {
		if g.err = err; g != w {
			g.turn <- true
		}
	}

	q.mu.Lock()
	if len(q.queue) > 0 {
		q.queue[0].turn <- false
	} else {
		q.leading = false
	}
	q.mu.Unlock()
	return err
}

// commitGroup writes group's appends, of size bytes, as one synced batch.
func (s *Store) commitGroup(group []*queuedAppend, size int) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return persist.ErrClosed
	}
	for _, g := range group {
		if s.filter.coversAny(g.b.Index) {
			s.filter.gate.RLock() // once: a second read lock can deadlock behind a rebuild
			defer s.filter.gate.RUnlock()
			break
		}
	}
	batch := s.db.NewBatchWithSize(size)
	defer batch.Close()
	for _, g := range group {
		if err := s.addAppend(batch, g.b); err != nil {
			return err
		}
	}
	return s.commit(commitAppend, batch, pebble.Sync)
}
