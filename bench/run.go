package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/plaudit/plaudit/server"
)

// Options are what `plaudit bench` can be told.
type Options struct {
	// Ops is the number of operations of each workload at each
	// concurrency (default DefaultOps).
	Ops int
	// Dir is where the Pebble directories go (default the system's
	// temporary directory); pass a directory on the disk you mean to
	// measure. Run makes a fresh directory inside it and removes it.
	Dir string
	// Concurrency lists the worker counts to run (default 1 and 64).
	Concurrency []int
}

// DefaultOps keeps a default Run, both tables, under 40 s on a disk that
// syncs in about a millisecond, even on a busy two-core machine.
const DefaultOps = 4000

// workload is one row family of one of Run's tables.
type workload struct {
	name string
	// base names the workload this one is divided by; "" for a baseline.
	base string
	// minC skips the workload below that concurrency, where it would
	// measure the same thing as another row; maxC (0: none) above it.
	minC, maxC int
	run        func(dir string, c, n int) (Result, error)
}

// workloads is the ingest table.
var workloads = []workload{
	{name: "raw-pebble", run: RawPebbleAppend},
	{name: "fasthttp-hello", run: func(_ string, c, n int) (Result, error) { return FasthttpHello(c, n) }},
	{name: "http-signal", base: "raw-pebble", run: withServer(HTTPSignalIngest)},
	{name: "http-signal-agents", base: "raw-pebble", minC: 2, run: withServer(HTTPSignalIngestAgents)},
}

// selection is the second table: a run created through each door, divided
// by the bare round trip of the same transport.
var selection = []workload{
	{name: "nats-echo", run: func(_ string, c, n int) (Result, error) { return NATSEcho(c, n) }},
	{name: "nats-select", base: "nats-echo", run: withSelectAgent(natsDoor, NATSSelect)},
	{name: "http-select", base: "fasthttp-hello", run: withSelectAgent(httpDoor, HTTPSelect)},
}

// judged is the third table: seed 003's judged rewards over HTTP, divided
// by fasthttp-hello (built-in checks only) or by the same task's
// built-in-only reward (one model judge), beside the engine's own scoring
// in process and the bare NATS hop of a judge request.
var judged = []workload{
	{name: "reward-inproc", run: func(_ string, c, n int) (Result, error) { return InProcessReward(c, n) }},
	{name: "http-reward", base: "fasthttp-hello", run: withServer(HTTPJudgedReward)},
	{name: "nats-judge-echo", maxC: 1, run: func(_ string, c, n int) (Result, error) { return NATSJudgeEcho(c, n) }},
	{name: "http-reward-judge", base: "http-reward", maxC: 1, run: withServerNATS(HTTPModelJudgeReward)},
}

// withServer runs an HTTP workload against a fresh server over dir.
func withServer(f func(baseURL, key string, c, n int) (Result, error)) func(string, int, int) (Result, error) {
	return func(dir string, c, n int) (Result, error) {
		return onServer(dir, func(s *server.Server) (Result, error) { return f(httpDoor(s), Key, c, n) })
	}
}

// withServerNATS is withServer for a workload that also connects to the
// server's embedded NATS.
func withServerNATS(f func(baseURL, natsURL, key string, c, n int) (Result, error)) func(string, int, int) (Result, error) {
	return func(dir string, c, n int) (Result, error) {
		return onServer(dir, func(s *server.Server) (Result, error) { return f(httpDoor(s), natsDoor(s), Key, c, n) })
	}
}

// withSelectAgent runs a selection workload through one door of a fresh
// server over dir, on an agent made by NewSelectAgent (setup not measured).
func withSelectAgent(door func(*server.Server) string, f func(url, key, agentID string, c, n int) (Result, error)) func(string, int, int) (Result, error) {
	return func(dir string, c, n int) (Result, error) {
		return onServer(dir, func(s *server.Server) (Result, error) {
			agent, err := NewSelectAgent(httpDoor(s), Key)
			if err != nil {
				return Result{}, err
			}
			return f(door(s), Key, agent, c, n)
		})
	}
}

func httpDoor(s *server.Server) string { return "http://" + s.HTTPAddr() }
func natsDoor(s *server.Server) string { return s.NATSURL() }

// onServer starts a server over dir, runs f on it and closes it.
func onServer(dir string, f func(*server.Server) (Result, error)) (res Result, err error) {
	s, err := StartServer(dir)
	if err != nil {
		return Result{}, err
	}
	defer func() {
		if cerr := s.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("bench: close server: %w", cerr)
		}
	}()
	return f(s)
}

// Run runs every workload at every concurrency, one after the other on a
// fresh directory each, and writes two tables to w.
//
// In the ingest table each HTTP signal row is divided by the raw Pebble row
// of the same concurrency (how much of the synced-write rate survives the
// whole server), and its p50 and CPU per operation by those of
// fasthttp-hello (how far above the HTTP floor it answers, and what it
// spends beyond it).
//
// In the selection table each select row is divided by the bare round trip
// of its transport at the same concurrency: nats-select by nats-echo,
// http-select by the fasthttp-hello of the ingest table. Selection answers
// before its fsync, so these ratios are the cost of the door, the actor and
// the Thompson draw, not the wait for the disk; the run's append still goes
// on alongside, and its CPU is in cpu/op.
//
// In the judged table http-reward (built-in checks only) is divided by
// fasthttp-hello, and http-reward-judge (the same task plus one model
// judge) by http-reward, at the same concurrency; cpu ÷ in-process divides
// by the CPU of reward-inproc, the engine's scoring alone. The line below
// it is the p50 the model judge adds (http-reward-judge less http-reward,
// at c=1) over the p50 of nats-judge-echo, the bare NATS hop of one judge
// request: what a judge round trip costs beyond the network.
//
// Op failures are shown in the tables and make Run return an error after
// writing them.
func Run(w io.Writer, opts Options) (err error) {
	if opts.Ops <= 0 {
		opts.Ops = DefaultOps
	}
	if len(opts.Concurrency) == 0 {
		opts.Concurrency = []int{1, 64}
	}
	root, err := os.MkdirTemp(opts.Dir, "plaudit-bench-")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer func() {
		if rerr := os.RemoveAll(root); err == nil && rerr != nil {
			err = fmt.Errorf("bench: %w", rerr)
		}
	}()

	type key struct {
		name string
		c    int
	}
	results := map[key]Result{}
	var failed []error
	// rows calls row with each workload's result at each concurrency.
	rows := func(wls []workload, row func(wl workload, c int, res Result)) error {
		for _, c := range opts.Concurrency {
			for _, wl := range wls {
				if c < wl.minC || (wl.maxC > 0 && c > wl.maxC) {
					continue
				}
				dir := filepath.Join(root, fmt.Sprintf("%s-c%d", wl.name, c))
				res, err := wl.run(dir, c, opts.Ops)
				if err != nil {
					return fmt.Errorf("bench: %s c=%d: %w", wl.name, c, err)
				}
				results[key{wl.name, c}] = res
				if res.Errors > 0 {
					failed = append(failed, fmt.Errorf("%s c=%d: %d of %d ops failed, e.g. %w",
						wl.name, c, res.Errors, res.Errors+res.Ops, res.FirstErr))
				}
				row(wl, c, res)
			}
		}
		return nil
	}
	start := time.Now()

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "workload\tc\t%s\tops/s ÷ raw-pebble\tp50 ÷ raw-pebble\tp50 ÷ hello\tcpu ÷ hello\t\n", measuredHeader)
	err = rows(workloads, func(wl workload, c int, res Result) {
		var tput, p50, helloP50, helloCPU string
		if b, ok := results[key{wl.base, c}]; ok && wl.base != "" {
			tput = ratio(res.OpsPerSec, b.OpsPerSec)
			p50 = ratio(float64(res.P50), float64(b.P50))
			if h, ok := results[key{"fasthttp-hello", c}]; ok {
				helloP50 = ratio(float64(res.P50), float64(h.P50))
				helloCPU = ratio(float64(res.CPUPerOp()), float64(h.CPUPerOp()))
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", wl.name, c, measured(res), tput, p50, helloP50, helloCPU)
	})
	if err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "selection\tc\t%s\tbase\tp50 ÷ base\tp99 ÷ base\tops/s ÷ base\tcpu ÷ base\t\n", measuredHeader)
	err = rows(selection, func(wl workload, c int, res Result) {
		var base, p50, p99, tput, cpu string
		if b, ok := results[key{wl.base, c}]; ok && wl.base != "" {
			base = wl.base
			p50 = ratio(float64(res.P50), float64(b.P50))
			p99 = ratio(float64(res.P99), float64(b.P99))
			tput = ratio(res.OpsPerSec, b.OpsPerSec)
			cpu = ratio(float64(res.CPUPerOp()), float64(b.CPUPerOp()))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", wl.name, c, measured(res), base, p50, p99, tput, cpu)
	})
	if err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "judged\tc\t%s\tbase\tp50 ÷ base\tp99 ÷ base\tops/s ÷ base\tcpu ÷ base\tcpu ÷ in-process\t\n", measuredHeader)
	err = rows(judged, func(wl workload, c int, res Result) {
		var base, p50, p99, tput, cpu, inproc string
		if b, ok := results[key{wl.base, c}]; ok && wl.base != "" {
			base = wl.base
			p50 = ratio(float64(res.P50), float64(b.P50))
			p99 = ratio(float64(res.P99), float64(b.P99))
			tput = ratio(res.OpsPerSec, b.OpsPerSec)
			cpu = ratio(float64(res.CPUPerOp()), float64(b.CPUPerOp()))
		}
		if f, ok := results[key{"reward-inproc", 1}]; ok && wl.name != "reward-inproc" && wl.name != "nats-judge-echo" {
			inproc = ratio(float64(res.CPUPerOp()), float64(f.CPUPerOp()))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", wl.name, c, measured(res), base, p50, p99, tput, cpu, inproc)
	})
	if err != nil {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	withJudge, ok1 := results[key{"http-reward-judge", 1}]
	builtin, ok2 := results[key{"http-reward", 1}]
	echo, ok3 := results[key{"nats-judge-echo", 1}]
	if ok1 && ok2 && ok3 && withJudge.Ops > 0 && builtin.Ops > 0 {
		added := withJudge.P50 - builtin.P50
		fmt.Fprintf(w, "judge round trip (c=1): p50 %s - %s = %s added by one model judge; %s the nats-judge-echo p50 (%s)\n",
			micros(withJudge.P50), micros(builtin.P50), micros(added),
			ratio(float64(added), float64(echo.P50)), micros(echo.P50))
		if raw, ok := results[key{"raw-pebble", 1}]; ok {
			// The judged reward writes its judge's outcome and then its
			// final state, each synced, on top of the built-in one's write.
			fmt.Fprintf(w, "  (that includes 2 more synced writes; raw-pebble p50 at c=1 is %s)\n", micros(raw.P50))
		}
	}
	fmt.Fprintf(w, "%d ops per row; ratios are within this run; %v in all.\n", opts.Ops, time.Since(start).Round(100*time.Millisecond))
	if len(failed) > 0 {
		return fmt.Errorf("bench: failed ops: %w", errors.Join(failed...))
	}
	return nil
}

// measuredHeader heads the columns measured writes.
const measuredHeader = "ops/s\tp50\tp99\tmax\tcpu/op\terrors"

// measured is a row's own figures, tab-separated.
func measured(res Result) string {
	return fmt.Sprintf("%.0f\t%s\t%s\t%s\t%s\t%d", res.OpsPerSec,
		micros(res.P50), micros(res.P99), micros(res.Max), micros(res.CPUPerOp()), res.Errors)
}

func ratio(a, b float64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// micros formats d in microseconds, the unit of every latency here.
func micros(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	if us < 100 {
		return fmt.Sprintf("%.1fµs", us)
	}
	return fmt.Sprintf("%.0fµs", us)
}
