package bench

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"
)

// Options are what `plaudit bench` can be told.
type Options struct {
	// Bin is the plaudit binary whose `serve` and `bench-hello` the
	// harness starts as child processes (`plaudit bench` passes its own).
	Bin string
	// Target, when set, is a running server to measure instead of
	// children: the recovery and memory scenarios, which restart or
	// inspect the server process, are skipped, and so is CPU per op.
	Target *Target
	// Ops is the number of operations of each row (default DefaultOps,
	// QuickOps with Quick). Duration, when set, runs each row for that
	// long instead; Rate > 0 makes every row an open loop at that many
	// operations per second for Duration (default 10 s), with at most
	// the row's concurrency in flight.
	Ops      int
	Duration time.Duration
	Rate     float64
	// Quick runs the whole suite in under a minute: fewer operations and
	// smaller recovery, memory and summary set-ups.
	Quick bool
	// Rounds runs every row that many times and reports the round of
	// median throughput (default 1; rows with profiles run once).
	Rounds int
	// Concurrency lists the concurrencies (default 1 and 64).
	Concurrency []int
	// Dir is where data directories, Redis files and child logs go
	// (default the system's temporary directory); it should be on the
	// disk you mean to measure. A fresh directory is made in it, and
	// removed unless KeepDir.
	Dir     string
	KeepDir bool
	// Only, when set, runs just the rows whose "family/name" it matches.
	Only *regexp.Regexp
	// CPUProfile and MemProfile, when set, are path prefixes: every row
	// measured on the server writes the server's CPU profile
	// (PREFIX-<family>-<row>-c<c>.pprof) or allocation profile
	// (…allocs.pprof, the allocations of that row only) taken over the
	// row; rows then run for Duration (default 5 s). The server's heap
	// profile at the end of each family goes to PREFIX-<family>-heap.pprof.
	CPUProfile, MemProfile string
	// Progress receives a line per row and a line a second while a row
	// runs (nil: none).
	Progress io.Writer
	// Sizes of the set-ups (0: the defaults, or the quick ones).
	RecoveryEvents int // events logged before a recovery (1,000,000)
	MemorySignals  int // signals stored for memory per signal (200,000)
	IdleAgents     int // agents created for memory per idle agent (10,000)
	SummaryRuns    int // runs of the version summary (10,000)
	// RedisServer is redis-server's path ("" looks it up on PATH; the
	// Redis rows are skipped without one).
	RedisServer string
}

// DefaultOps and QuickOps are the operations per row of a default and of
// a quick run.
const (
	DefaultOps = 4000
	QuickOps   = 300
)

func (o *Options) defaults() {
	if len(o.Concurrency) == 0 {
		o.Concurrency = []int{1, 64}
	}
	if o.Ops <= 0 {
		o.Ops = DefaultOps
		if o.Quick {
			o.Ops = QuickOps
		}
	}
	if (o.CPUProfile != "" || o.MemProfile != "") && o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.Rate > 0 && o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	size := func(v *int, full, quick int) {
		if *v <= 0 {
			*v = full
			if o.Quick {
				*v = quick
			}
		}
	}
	size(&o.RecoveryEvents, 1_000_000, 20_000)
	size(&o.MemorySignals, 200_000, 20_000)
	size(&o.IdleAgents, 10_000, 2_000)
	size(&o.SummaryRuns, 10_000, 1_000)
	if o.RedisServer == "" {
		o.RedisServer = RedisServerPath()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// Report is everything one run measured.
type Report struct {
	Date     time.Time     `json:"date"`
	Machine  Machine       `json:"machine"`
	Mode     string        `json:"mode"` // "closed" or "open loop at N/s"
	Rows     []Row         `json:"rows"`
	Recovery []Recovery    `json:"recovery,omitempty"`
	Memory   []Memory      `json:"memory,omitempty"`
	Skipped  []string      `json:"skipped,omitempty"`
	Notes    []string      `json:"notes,omitempty"` // what to keep in mind reading the rows
	Elapsed  time.Duration `json:"elapsed_ns"`
}

// Row is one row of a family's table: one workload at one concurrency,
// with its ratios to its baseline (Base) and, where there is one, to the
// same workload built another way (Vs): on Redis, or on the bare libraries
// Plaudit is built on (the durable floor, see ServeHello).
type Row struct {
	Family string `json:"family"`
	Name   string `json:"name"`
	C      int    `json:"c"`
	// Process is whose CPU is in CPU: server, hello, redis or bench.
	Process string `json:"process"`
	Result
	Base       string  `json:"base,omitempty"`
	P50Ratio   float64 `json:"p50_ratio,omitempty"`
	P99Ratio   float64 `json:"p99_ratio,omitempty"`
	OpsRatio   float64 `json:"ops_ratio,omitempty"`
	CPURatio   float64 `json:"cpu_ratio,omitempty"`
	Vs         string  `json:"vs,omitempty"`
	VsOpsRatio float64 `json:"vs_ops_ratio,omitempty"`
	Error      string  `json:"first_error,omitempty"`
}

// Failed reports the rows with failed operations and the scenarios that
// could not run, as one error.
func (r *Report) Failed() error {
	var errs []error
	for _, row := range r.Rows {
		if row.Errors > 0 {
			errs = append(errs, fmt.Errorf("%s/%s c=%d: %d of %d ops failed, e.g. %s",
				row.Family, row.Name, row.C, row.Errors, row.Errors+row.Ops, row.Error))
		}
	}
	return errors.Join(errs...)
}

// Run runs the suite and returns its report; the error is for a scenario
// that could not be set up or run, after which the report holds what was
// measured before it. Failed operations are in the rows (Report.Failed).
func Run(opts Options) (*Report, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts.defaults()
	if opts.Bin == "" && opts.Target == nil {
		return nil, errors.New("bench: no plaudit binary to start and no running server")
	}
	root, err := os.MkdirTemp(opts.Dir, "plaudit-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if !opts.KeepDir {
		defer os.RemoveAll(root)
	}
	s := &suite{opts: opts, root: root, logs: filepath.Join(root, "logs"),
		rep: &Report{Date: time.Now().UTC(), Machine: ThisMachine(), Mode: "closed loop"}}
	if opts.Rate > 0 {
		s.rep.Mode = fmt.Sprintf("open loop at %.0f/s", opts.Rate)
	}
	if opts.Rounds > 1 {
		s.rep.Mode += fmt.Sprintf(", each row the median of %d rounds by ops/s", opts.Rounds)
	}
	start := time.Now()
	defer func() { s.rep.Elapsed = time.Since(start) }()
	defer s.close()
	if err := s.run(); err != nil {
		return s.rep, err
	}
	if opts.Only != nil && len(s.rep.Rows) == 0 && len(s.rep.Recovery) == 0 && len(s.rep.Memory) == 0 {
		return s.rep, fmt.Errorf("bench: --run %q matches no row that could run here", opts.Only)
	}
	return s.rep, nil
}

// check refuses options that cannot mean what they say, before anything
// starts: a count, duration or rate below zero (zero is the default), a
// profile of a running server whose --pprof is not given, a base URL that
// is not http://host:port, a redis-server that is not there.
func (o *Options) check() error {
	for _, v := range []struct {
		name string
		n    float64
	}{
		{"--ops", float64(o.Ops)}, {"--duration", float64(o.Duration)}, {"--rate", o.Rate},
		{"--rounds", float64(o.Rounds)}, {"--recovery-events", float64(o.RecoveryEvents)},
		{"--memory-signals", float64(o.MemorySignals)}, {"--idle-agents", float64(o.IdleAgents)},
		{"--summary-runs", float64(o.SummaryRuns)},
	} {
		if v.n < 0 {
			return fmt.Errorf("bench: %s must not be negative", v.name)
		}
	}
	if t := o.Target; t != nil {
		if u, err := url.Parse(t.HTTP); err != nil || u.Scheme != "http" || u.Host == "" || u.Port() == "" {
			return fmt.Errorf("bench: --http %q: want http://host:port", t.HTTP)
		}
		if (o.CPUProfile != "" || o.MemProfile != "") && t.Pprof == "" {
			return errors.New("bench: --cpuprofile and --memprofile of a running server need its --pprof address")
		}
	}
	if o.RedisServer != "" {
		if _, err := exec.LookPath(o.RedisServer); err != nil {
			return fmt.Errorf("bench: --redis-server: %w", err)
		}
	}
	return nil
}
