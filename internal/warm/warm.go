// Package warm runs functions on long-lived goroutines, whose stacks have
// already grown to what the work needs. A goroutine started per task
// begins with an 8 KiB stack and copies it to grow (runtime.copystack)
// every time the task goes deep: in Plaudit's profiles, a third of an
// engine command's time and the cost of hashing an API key. A task finds
// an idle worker, or, when every worker is busy, a fresh goroutine, so a
// task that blocks never holds up another.
package warm

import "runtime"

// Pool is a set of idle workers. The zero value is not usable; call New.
type Pool struct {
	work chan func()
	stop chan struct{}
}

// New starts perCPU workers for each CPU Go may use.
func New(perCPU int) *Pool {
	p := &Pool{work: make(chan func()), stop: make(chan struct{})}
	for range perCPU * runtime.GOMAXPROCS(0) {
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

// Go runs fn on an idle worker, or on a new goroutine if none is idle.
func (p *Pool) Go(fn func()) {
	select {
	case p.work <- fn:
	default:
		go fn()
	}
}

// Close stops the idle workers; busy ones stop once their task returns.
// Go still runs tasks after Close, each on a new goroutine.
func (p *Pool) Close() { close(p.stop) }
