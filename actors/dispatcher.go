package actors

import "runtime"

// warmDispatcher runs actor mailboxes on long-lived goroutines. protoactor's
// default dispatcher starts a goroutine for every run of a mailbox, whose
// 8 KiB stack then grows (runtime.copystack) to hold an engine command: in
// profiles of selection under load that growth was a third of the engine's
// time. A run goes to an idle worker, or, when every worker is busy, to a
// fresh goroutine as before, so an actor that blocks never delays another.
type warmDispatcher struct {
	work       chan func()
	stop       chan struct{}
	throughput int
}

// newWarmDispatcher starts workers for 4 runs per CPU.
func newWarmDispatcher(throughput int) *warmDispatcher {
	d := &warmDispatcher{work: make(chan func()), stop: make(chan struct{}), throughput: throughput}
	for range 4 * runtime.GOMAXPROCS(0) {
		go d.worker()
	}
	return d
}

func (d *warmDispatcher) worker() {
	for {
		select {
		case fn := <-d.work:
			fn()
		case <-d.stop:
			return
		}
	}
}

// Schedule implements actor.Dispatcher.
func (d *warmDispatcher) Schedule(fn func()) {
	select {
	case d.work <- fn: // an idle worker took it
	default:
		go fn()
	}
}

// Throughput implements actor.Dispatcher: messages a run handles before it
// yields the processor.
func (d *warmDispatcher) Throughput() int { return d.throughput }

// close stops the idle workers; busy ones stop after their run.
func (d *warmDispatcher) close() { close(d.stop) }
