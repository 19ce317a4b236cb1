package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Op is one operation of one worker; nil means it succeeded. An Op is called
// from one goroutine only, so it may reuse its buffers.
type Op func() error

// Workload makes the Op of each worker. It is called for every worker before
// the clock starts, so per-worker setup (an agent, a connection) is not
// measured.
type Workload func(worker int) (Op, error)

// Loop is how operations are issued.
//
// Closed loop (Rate 0): each of C workers issues its next operation when
// the previous one has answered, N operations in all, or for D. Latency is
// from the operation's start, so a slow answer delays the next request and
// is seen once: this is the view of C callers that each wait.
//
// Open loop (Rate > 0): operation i is due at start + i/Rate, for D; at most
// C are in flight. Latency is from the due time, not the actual send, so an
// operation that had to wait for a free worker, or for a server that fell
// behind, is charged that wait (no coordinated omission, as in wrk2). The
// harness's own wake-up lateness (tens of µs for a sleeping goroutine) is
// charged too: on a VM whose timers fire late (a sleeping goroutine wakes
// about 0.8 ms late on the 2-core machine of BENCHMARKS.md) that is the
// floor of every open-loop latency, so Result.LateP50/LateP99 report how
// late the harness itself sent, beside the latencies.
type Loop struct {
	C    int
	N    int
	D    time.Duration
	Rate float64
	// CPU reads the user+system CPU clock of the process under test (the
	// child server); nil reads this process's.
	CPU func() time.Duration
	// Progress, when not nil, gets a line a second while the loop runs,
	// prefixed by Label.
	Progress io.Writer
	Label    string
	// Started, when not nil, is called once every worker's Op is made,
	// just before the clock starts (to start a profile over the run).
	Started func()
	// Warm is how many operations each worker runs, all at once and
	// untimed, before the clock starts: the connections a worker's first
	// operation opens (64 at once at 64 in flight) are not in the
	// figures. Their failures are not counted either.
	Warm int
}

// Result is what one run measured. Latencies are of successful operations
// only; failed ones are counted in Errors.
type Result struct {
	Ops       int           `json:"ops"`    // operations that succeeded
	Errors    int           `json:"errors"` // operations that failed
	FirstErr  error         `json:"-"`      // one of the failures, for the report
	Elapsed   time.Duration `json:"elapsed_ns"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	P999      time.Duration `json:"p999_ns"`
	Max       time.Duration `json:"max_ns"`
	OpsPerSec float64       `json:"ops_per_sec"` // Ops / Elapsed
	// CPU is the user and system time the process under test used
	// during the run (Loop.CPU). Unlike Elapsed it does not grow when
	// other programs take the machine's cores, so CPUPerOp is the steadier
	// figure on a busy host.
	CPU time.Duration `json:"cpu_ns"`
	// Hist holds every successful latency, in nanoseconds.
	Hist *hdrhistogram.Histogram `json:"-"`
	// LateP50 and LateP99 are, in an open loop, how late after its due
	// time the harness sent an operation (its own timer lateness, and
	// waiting for a free worker); zero in a closed loop.
	LateP50 time.Duration `json:"late_p50_ns,omitempty"`
	LateP99 time.Duration `json:"late_p99_ns,omitempty"`
	// Unsent is, in an open loop, how many operations fell due during the
	// run and were not sent by its end: the rate asked for was not
	// reached, and the latencies are of those sent only.
	Unsent int `json:"unsent,omitempty"`
}

// CPUPerOp is CPU over the successful operations; zero when not measured.
func (r Result) CPUPerOp() time.Duration {
	if r.Ops == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Ops)
}

func (r Result) String() string {
	s := fmt.Sprintf("%d ops in %v (%.0f ops/s), p50 %v, p99 %v, p99.9 %v, max %v, cpu/op %v",
		r.Ops, r.Elapsed.Round(time.Millisecond), r.OpsPerSec, r.P50, r.P99, r.P999, r.Max, r.CPUPerOp())
	if r.LateP50 > 0 {
		s += fmt.Sprintf(", sent late p50 %v, p99 %v", r.LateP50, r.LateP99)
	}
	if r.Unsent > 0 {
		s += fmt.Sprintf(", %d due and not sent by the end (the rate was not reached)", r.Unsent)
	}
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d errors (%v)", r.Errors, r.FirstErr)
	}
	return s
}

// RunOps runs n operations in total over c workers, closed loop.
func RunOps(c, n int, mk Workload) (Result, error) { return Loop{C: c, N: n}.Run(mk) }

// RunFor runs operations over c workers until d has passed, closed loop;
// operations in flight at the deadline finish and are counted.
func RunFor(c int, d time.Duration, mk Workload) (Result, error) { return Loop{C: c, D: d}.Run(mk) }

// The histograms record nanoseconds, from 1 ns to ten minutes, with three
// significant digits: a value is read back within 0.1 % (a 30 µs answer is
// told from a 30.1 µs one; from a lowest value of 1 µs the unit was 512
// ns, 2.4 % at 21 µs), and an open loop's backlog of minutes is still
// recorded (clamped at ten minutes), at ~250 KB per worker.
const (
	histLowest  = 1
	histHighest = int64(10 * time.Minute)
	histDigits  = 3
)

// worker is one goroutine's record; each worker writes only its own.
type worker struct {
	hist     *hdrhistogram.Histogram
	late     *hdrhistogram.Histogram // open loop: send time less due time
	errors   int
	firstErr error
}

func (w *worker) record(d time.Duration, err error) {
	if err != nil {
		if w.errors == 0 {
			w.firstErr = err
		}
		w.errors++
		return
	}
	_ = w.hist.RecordValue(min(max(int64(d), histLowest), histHighest))
}

// Run makes every worker's Op, then runs them as l says.
func (l Loop) Run(mk Workload) (Result, error) {
	if l.C < 1 {
		return Result{}, errors.New("bench: concurrency must be at least 1")
	}
	switch {
	case l.Rate < 0:
		return Result{}, errors.New("bench: rate must not be negative")
	case l.Rate > 0 && l.D <= 0:
		return Result{}, errors.New("bench: an open loop needs a duration")
	case l.Rate == 0 && l.N < 1 && l.D <= 0:
		return Result{}, errors.New("bench: a closed loop needs an op count or a duration")
	}
	ops := make([]Op, l.C)
	for i := range ops {
		op, err := mk(i)
		if err != nil {
			return Result{}, fmt.Errorf("bench: worker %d: %w", i, err)
		}
		ops[i] = op
	}
	cpu := l.CPU
	if cpu == nil {
		cpu = processCPU
	}
	workers := make([]worker, l.C)
	for i := range workers {
		workers[i].hist = hdrhistogram.New(histLowest, histHighest, histDigits)
		if l.Rate > 0 {
			workers[i].late = hdrhistogram.New(histLowest, histHighest, histDigits)
		}
	}
	var (
		wg    sync.WaitGroup
		next  atomic.Int64 // operations claimed
		done  atomic.Int64 // operations answered, for progress
		start time.Time    // set before the workers are released
		gate  = make(chan struct{})
	)
	var warmed sync.WaitGroup
	// body is one worker's loop: warm up, then claim the next operation
	// while there is one, and run it.
	body := func(w *worker, op Op) {
		defer wg.Done()
		for range l.Warm {
			_ = op()
		}
		warmed.Done()
		<-gate
		for !interrupted.Load() {
			i := next.Add(1) - 1
			var t0 time.Time
			switch {
			case l.Rate > 0:
				t0 = start.Add(time.Duration(float64(i) / l.Rate * float64(time.Second)))
				if t0.Sub(start) >= l.D || time.Since(start) >= l.D {
					// The run is over: what was due and not yet sent
					// is counted as such (Result.Unsent), not sent
					// after it.
					return
				}
				time.Sleep(time.Until(t0))
				_ = w.late.RecordValue(min(max(int64(time.Since(t0)), histLowest), histHighest))
			case l.N > 0:
				if i >= int64(l.N) {
					return
				}
				t0 = time.Now()
			default:
				t0 = time.Now()
				if t0.Sub(start) >= l.D {
					return
				}
			}
			err := op()
			w.record(time.Since(t0), err)
			done.Add(1)
		}
	}
	for i := range workers {
		wg.Add(1)
		warmed.Add(1)
		go body(&workers[i], ops[i])
	}
	warmed.Wait()
	if l.Started != nil {
		l.Started()
	}
	stopProgress := l.progress(&done)
	cpu0 := cpu()
	start = time.Now()
	close(gate)
	wg.Wait()
	elapsed := time.Since(start)
	cpuUsed := cpu() - cpu0
	stopProgress()
	r := summarise(workers, elapsed)
	r.CPU = cpuUsed
	if l.Rate > 0 {
		due := int(math.Ceil(l.D.Seconds() * l.Rate)) // i/Rate < D
		r.Unsent = max(0, due-r.Ops-r.Errors)
	}
	return r, nil
}

// progress prints done's rate once a second until the returned func is
// called; it does nothing without l.Progress.
func (l Loop) progress(done *atomic.Int64) (stop func()) {
	if l.Progress == nil {
		return func() {}
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last, lastT := int64(0), time.Now()
		for {
			select {
			case <-quit:
				return
			case now := <-t.C:
				n := done.Load()
				fmt.Fprintf(l.Progress, "  %s: %d ops, %.0f ops/s\n", l.Label, n, float64(n-last)/now.Sub(lastT).Seconds())
				last, lastT = n, now
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

func summarise(workers []worker, elapsed time.Duration) Result {
	r := Result{Elapsed: elapsed, Hist: hdrhistogram.New(histLowest, histHighest, histDigits)}
	late := hdrhistogram.New(histLowest, histHighest, histDigits)
	for _, w := range workers {
		r.Hist.Merge(w.hist)
		if w.late != nil {
			late.Merge(w.late)
		}
		r.Errors += w.errors
		if r.FirstErr == nil {
			r.FirstErr = w.firstErr
		}
	}
	r.Ops = int(r.Hist.TotalCount())
	if r.Ops > 0 {
		r.P50 = time.Duration(r.Hist.ValueAtQuantile(50))
		r.P99 = time.Duration(r.Hist.ValueAtQuantile(99))
		r.P999 = time.Duration(r.Hist.ValueAtQuantile(99.9))
		r.Max = time.Duration(r.Hist.Max())
	}
	if late.TotalCount() > 0 {
		r.LateP50 = time.Duration(late.ValueAtQuantile(50))
		r.LateP99 = time.Duration(late.ValueAtQuantile(99))
	}
	if elapsed > 0 {
		r.OpsPerSec = float64(r.Ops) / elapsed.Seconds()
	}
	return r
}
