package actors

import "github.com/plaudit/plaudit/internal/warm"

// warmDispatcher runs the mailbox runs its senders hand over (see mailbox)
// on a warm.Pool instead of a goroutine started for every run (protoactor's
// default), whose stack would regrow to hold an engine command each time.
type warmDispatcher struct {
	pool       *warm.Pool
	throughput int // protoactor's Dispatcher asks for it; the mailbox does not yield (see mailbox)
}

// Schedule implements actor.Dispatcher.
func (d warmDispatcher) Schedule(fn func()) { d.pool.Go(fn) }

// Throughput implements actor.Dispatcher.
func (d warmDispatcher) Throughput() int { return d.throughput }
