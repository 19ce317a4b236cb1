package bench

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Op is one operation of one worker; nil means it succeeded. An Op is called
// from one goroutine only, so it may reuse its buffers.
type Op func() error

// Workload makes the Op of each worker. It is called for every worker before
// the clock starts, so per-worker setup (an agent, a connection) is not
// measured.
type Workload func(worker int) (Op, error)

// Result is what one closed-loop run measured. Latencies are of successful
// operations only; failed ones are counted in Errors.
type Result struct {
	Ops       int           // operations that succeeded
	Errors    int           // operations that failed
	FirstErr  error         // one of the failures, for the report
	Elapsed   time.Duration // wall time from the first start to the last answer
	P50       time.Duration
	P99       time.Duration
	Max       time.Duration
	OpsPerSec float64 // Ops / Elapsed
	// CPU is the user and system time the whole process (client and
	// server alike) used during the run; zero where it is not measured.
	// Unlike Elapsed it does not grow when other programs take the
	// machine's cores, so CPUPerOp is the steadier figure on a busy host.
	CPU time.Duration
}

// CPUPerOp is CPU over the successful operations; zero when not measured.
func (r Result) CPUPerOp() time.Duration {
	if r.Ops == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Ops)
}

func (r Result) String() string {
	s := fmt.Sprintf("%d ops in %v (%.0f ops/s), p50 %v, p99 %v, max %v, cpu/op %v",
		r.Ops, r.Elapsed.Round(time.Millisecond), r.OpsPerSec, r.P50, r.P99, r.Max, r.CPUPerOp())
	if r.Errors > 0 {
		s += fmt.Sprintf(", %d errors (%v)", r.Errors, r.FirstErr)
	}
	return s
}

// RunOps runs n operations in total over c workers and returns when all have
// answered.
func RunOps(c, n int, mk Workload) (Result, error) {
	if n < 1 {
		return Result{}, errors.New("bench: op count must be at least 1")
	}
	var next atomic.Int64
	return run(c, n/c+1, mk, nil, func() bool { return next.Add(1) <= int64(n) })
}

// RunFor runs operations over c workers until d has passed; operations
// in flight at the deadline finish and are counted.
func RunFor(c int, d time.Duration, mk Workload) (Result, error) {
	var deadline time.Time // set by begin, before the workers are released
	begin := func() { deadline = time.Now().Add(d) }
	return run(c, 1024, mk, begin, func() bool { return time.Now().Before(deadline) })
}

// worker is one goroutine's record; each worker writes only its own.
type worker struct {
	lat      []time.Duration
	errors   int
	firstErr error
}

// run is the closed loop shared by RunOps and RunFor: begin (if not nil)
// runs just before the workers are released; more says whether a worker
// should start another operation.
func run(c, capHint int, mk Workload, begin func(), more func() bool) (Result, error) {
	if c < 1 {
		return Result{}, errors.New("bench: concurrency must be at least 1")
	}
	ops := make([]Op, c)
	for i := range ops {
		op, err := mk(i)
		if err != nil {
			return Result{}, fmt.Errorf("bench: worker %d: %w", i, err)
		}
		ops[i] = op
	}
	workers := make([]worker, c)
	for i := range workers {
		// Sized for an even share plus slack, so that appending does not
		// allocate inside the measured loop in the common case.
		workers[i].lat = make([]time.Duration, 0, capHint+capHint/2+16)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range workers {
		wg.Add(1)
		go func(w *worker, op Op) {
			defer wg.Done()
			<-start
			for more() {
				t0 := time.Now()
				err := op()
				d := time.Since(t0)
				if err != nil {
					if w.errors == 0 {
						w.firstErr = err
					}
					w.errors++
					continue
				}
				w.lat = append(w.lat, d)
			}
		}(&workers[i], ops[i])
	}
	if begin != nil {
		begin()
	}
	cpu0, t0 := processCPU(), time.Now()
	close(start)
	wg.Wait()
	r := summarise(workers, time.Since(t0))
	r.CPU = processCPU() - cpu0
	return r, nil
}

func summarise(workers []worker, elapsed time.Duration) Result {
	r := Result{Elapsed: elapsed}
	n := 0
	for _, w := range workers {
		n += len(w.lat)
	}
	all := make([]time.Duration, 0, n)
	for _, w := range workers {
		all = append(all, w.lat...)
		r.Errors += w.errors
		if r.FirstErr == nil {
			r.FirstErr = w.firstErr
		}
	}
	slices.Sort(all)
	r.Ops = len(all)
	if r.Ops > 0 {
		r.P50, r.P99, r.Max = quantile(all, 0.50), quantile(all, 0.99), all[len(all)-1]
	}
	if elapsed > 0 {
		r.OpsPerSec = float64(r.Ops) / elapsed.Seconds()
	}
	return r
}

// quantile is the nearest-rank q-quantile of sorted, which is not empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted)) + 0.999999)
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}
