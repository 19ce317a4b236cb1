package actors

import "github.com/plaudit/plaudit/internal/warm"

// warmDispatcher runs actor mailboxes on a warm.Pool instead of a goroutine
// started for every run of a mailbox (protoactor's default), whose stack
// would regrow to hold an engine command each time.
type warmDispatcher struct {
	pool       *warm.Pool
	throughput int // messages a run handles before it yields (protoactor's default: 300)
}

// Schedule implements actor.Dispatcher.
func (d warmDispatcher) Schedule(fn func()) { d.pool.Go(fn) }

// Throughput implements actor.Dispatcher.
func (d warmDispatcher) Throughput() int { return d.throughput }
