// Package warm runs functions on long-lived goroutines, whose stacks have
// already grown to what the work needs. A goroutine started per task
// begins with an 8 KiB stack and copies it to grow (runtime.copystack)
// every time the task goes deep: in Plaudit's profiles, a third of an
// engine command's time and the cost of hashing an API key. A task finds
// an idle worker, or, when every worker is busy, a fresh goroutine, so a
// task that blocks never holds up another.
package warm

import (
	"runtime"
	"sync/atomic"
)

// Pool is a set of workers that grows with demand up to a bound. The zero
// value is not usable; call New.
type Pool struct {
	work    chan func()
	stop    chan struct{}
	workers atomic.Int64 // started, up to max
	max     int64
}

// New starts perCPU workers for each CPU Go may use, and lets the pool grow
// to 16 times that: a task that finds no idle worker starts one while
// there are fewer (many agents each blocked in an fsync take many).
func New(perCPU int) *Pool {
	n := perCPU * runtime.GOMAXPROCS(0)
	p := &Pool{work: make(chan func()), stop: make(chan struct{}), max: int64(16 * n)}
	p.workers.Store(int64(n))
	for range n {
		go p.worker()
	}
	return p
}

func (p *Pool) worker() {
	for {
		select {
		case fn := <-p.work:
			fn()
		case <-p.stop:
			return
		}
	}
}

// Go runs fn on an idle worker, or on a new goroutine if none is idle; the
// new goroutine stays on as a worker while the pool is below its bound.
func (p *Pool) Go(fn func()) {
	select {
	case p.work <- fn:
		return
	default:
	}
	if p.workers.Add(1) <= p.max {
		go func() {
			fn()
			p.worker()
		}()
		return
	}
	p.workers.Add(-1)
	go fn()
}

// Close stops the idle workers; busy ones stop once their task returns.
// Go still runs tasks after Close, each on a new goroutine.
func (p *Pool) Close() { close(p.stop) }
