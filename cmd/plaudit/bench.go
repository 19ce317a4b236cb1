package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/plaudit/plaudit/bench"
)

// benchCmd is `plaudit bench`: the harness of BENCHMARKS.md. By default it
// starts `plaudit serve` (this binary) as a child process per family and
// loads it from this process; with --http it loads a running server.
//
// Its arguments pass through kong untouched to the flag set below, which
// BENCHMARKS.md documents (single-dash flags such as -c included).
type benchCmd struct {
	Args []string `arg:"" optional:"" help:"bench's own flags; --help lists them."`
}

func (c *benchCmd) Run(con *console) error { return helpOK(runBench(c.Args, con.Out, con.Err)) }

// benchHelloCmd is `plaudit bench-hello`, started by the harness.
type benchHelloCmd struct {
	Args []string `arg:"" optional:""`
}

func (c *benchHelloCmd) Run(con *console) error { return helpOK(benchHello(c.Args, con.Err)) }

// helpOK makes a flag set's -h/--help, which has printed the flags, a
// success.
func helpOK(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func runBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plaudit bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts bench.Options
	httpURL := fs.String("http", "", "measure the running server at this base URL (http://host:port) instead of starting one")
	natsURL := fs.String("nats", "", "with --http: the running server's NATS URL (nats://host:port); the NATS rows are skipped without it")
	key := fs.String("key", os.Getenv("PLAUDIT_KEY"), "with --http: an admin API key of the running server (default $PLAUDIT_KEY)")
	pprofAddr := fs.String("pprof", "", "with --http: the running server's --pprof address, for --cpuprofile/--memprofile")
	fs.IntVar(&opts.Ops, "ops", 0, fmt.Sprintf("operations per row (default %d, %d with --quick)", bench.DefaultOps, bench.QuickOps))
	fs.DurationVar(&opts.Duration, "duration", 0, "run each row for this long instead of --ops")
	fs.Float64Var(&opts.Rate, "rate", 0, "open loop: operations per second, latency measured from each one's due time (runs --duration, default 10s; -c is the most in flight)")
	fs.BoolVar(&opts.Quick, "quick", false, "the whole suite in under a minute: fewer operations, smaller set-ups")
	fs.IntVar(&opts.Rounds, "rounds", 1, "run every row this many times and report the round of median ops/s")
	conc := fs.String("c", "1,64", "concurrencies, comma-separated")
	fs.StringVar(&opts.Dir, "dir", "", "directory on the disk to measure (default: the system temp dir)")
	fs.BoolVar(&opts.KeepDir, "keep", false, "keep the data directories and child logs")
	only := fs.String("run", "", "run only the rows whose family/name matches this regexp (with the rows they are divided by)")
	asJSON := fs.Bool("json", false, "write the report as JSON instead of tables")
	fs.StringVar(&opts.CPUProfile, "cpuprofile", "", "write the SERVER's CPU profile of each server row to PREFIX-<family>-<row>-c<c>.pprof (rows then run --duration, default 5s)")
	fs.StringVar(&opts.MemProfile, "memprofile", "", "write the SERVER's allocations of each server row to PREFIX-…allocs.pprof, and its heap after each family and memory scenario to PREFIX-…heap.pprof")
	fs.IntVar(&opts.RecoveryEvents, "recovery-events", 0, "events logged before each recovery (default 1000000, 20000 with --quick)")
	fs.IntVar(&opts.MemorySignals, "memory-signals", 0, "signals stored for memory per signal (default 200000, 20000 with --quick)")
	fs.IntVar(&opts.IdleAgents, "idle-agents", 0, "agents created for memory per idle agent (default 10000, 2000 with --quick)")
	fs.IntVar(&opts.SummaryRuns, "summary-runs", 0, "runs of the version summary (default 10000, 1000 with --quick)")
	fs.StringVar(&opts.RedisServer, "redis-server", "", "redis-server binary for the Redis rows (default: found on PATH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if opts.Rounds < 1 {
		return errors.New("bench: --rounds must be at least 1")
	}
	if fs.NArg() > 0 { // flag stops at it: the flags after it would be ignored
		return fmt.Errorf("bench: unexpected argument %q (bench takes flags only)", fs.Arg(0))
	}
	for _, f := range strings.Split(*conc, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			return fmt.Errorf("bench: -c %q: want positive integers", *conc)
		}
		opts.Concurrency = append(opts.Concurrency, c)
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			return fmt.Errorf("bench: --run: %w", err)
		}
		opts.Only = re
	}
	if *httpURL != "" {
		if *key == "" {
			return errors.New("bench: --http needs --key (or $PLAUDIT_KEY)")
		}
		opts.Target = &bench.Target{HTTP: strings.TrimRight(*httpURL, "/"), NATS: *natsURL, Key: *key, Pprof: *pprofAddr}
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench: own binary: %w", err)
	}
	opts.Bin = bin
	opts.Progress = stderr

	// Interrupting the harness stops its children rather than orphaning
	// them: the first SIGINT/SIGTERM stops the run (bench.Interrupt) and
	// the rows measured so far are still printed; a second one exits at
	// once. A reader that goes away (bench … | head) is an interruption
	// too: caught, SIGPIPE no longer kills the harness at its next write
	// (which now fails instead), and it is never the second signal, since
	// every later write raises it again.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGPIPE)
	defer signal.Stop(sigs)
	go func() {
		interrupted := false
		for sig := range sigs {
			switch {
			case !interrupted:
				interrupted = true
				fmt.Fprintln(stderr, "bench: interrupted; stopping child processes (again to exit at once)")
				bench.Interrupt()
			case sig != syscall.SIGPIPE:
				os.Exit(130)
			}
		}
	}()

	rep, runErr := bench.Run(opts)
	if rep != nil {
		var werr error
		if *asJSON {
			werr = rep.WriteJSON(stdout)
		} else {
			werr = rep.WriteTables(stdout)
		}
		if runErr == nil {
			runErr = werr
		}
		if runErr == nil {
			runErr = rep.Failed()
		}
	}
	return runErr
}

// benchHello is `plaudit bench-hello`, started by the harness: the HTTP
// and NATS floors (bench.ServeHello) in a process of their own, with
// $PLAUDIT_BOOTSTRAP_KEY as the NATS token. Not for users.
func benchHello(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("plaudit bench-hello", flag.ContinueOnError)
	fs.SetOutput(stderr)
	httpAddr := fs.String("http", "127.0.0.1:0", "fixed-body HTTP listen address")
	natsAddr := fs.String("nats", "127.0.0.1:0", "echo NATS listen address")
	dataDir := fs.String("data", "", "directory of the durable floor's Pebble (none without it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	key := os.Getenv("PLAUDIT_BOOTSTRAP_KEY")
	if key == "" {
		return errors.New("bench-hello: PLAUDIT_BOOTSTRAP_KEY must name the NATS token")
	}
	stop := make(chan struct{})
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		close(stop)
	}()
	return bench.ServeHello(*httpAddr, *natsAddr, *dataDir, key, stop)
}
