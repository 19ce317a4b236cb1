// Command plaudit is the Plaudit reward engine.
//
//	plaudit serve [flags]   run the server
//	plaudit bench [flags]   run the benchmark harness, with ratios to raw baselines
//	                        (BENCHMARKS.md; `plaudit bench -h` lists the flags)
//	plaudit backup [flags]  copy a running server's (or a stopped) data directory
//	plaudit restore [flags] make a new data directory from a backup
//	plaudit inspect [flags] list and verify a stopped data directory
//	plaudit version         print the version
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/plaudit/plaudit/server"
)

const version = "0.1.0"

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "plaudit:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: plaudit serve|bench|backup|restore|inspect|version [flags]")
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "bench":
		return benchCmd(args[1:], stdout, stderr)
	case "bench-hello":
		return benchHello(args[1:], stderr)
	case "backup":
		return backupCmd(args[1:], stdout, stderr)
	case "restore":
		return restoreCmd(args[1:], stdout, stderr)
	case "inspect":
		return inspectCmd(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "plaudit", version)
		return nil
	}
	return fmt.Errorf("unknown command %q (want serve, bench, backup, restore, inspect or version)", args[0])
}

func serve(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg server.Config
	fs.StringVar(&cfg.DataDir, "data", "./data", "data directory (Pebble)")
	fs.StringVar(&cfg.HTTPAddr, "http", ":8080", "HTTP listen address")
	fs.StringVar(&cfg.NATSListen, "nats-listen", "127.0.0.1:4222", "address of the embedded NATS server")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "connect to this NATS server instead of embedding one")
	fs.StringVar(&cfg.NATSCreds, "nats-creds", "", "credentials file (JWT and nkey seed) of Plaudit's connection to --nats-url")
	fs.StringVar(&cfg.NATSNkey, "nats-nkey", "", "nkey seed file of Plaudit's connection to --nats-url")
	fs.IntVar(&cfg.MaxBody, "max-body", 1<<20, "largest accepted request body, in bytes")
	fs.IntVar(&cfg.BodyBudget, "body-budget", 64<<20, "bytes of HTTP request bodies read at once, across all connections, before 503")
	fs.DurationVar(&cfg.BodyTimeout, "body-timeout", 10*time.Second, "how long an HTTP request body may take to arrive after its headers")
	fs.IntVar(&cfg.SnapshotEvery, "snapshot-every", 10000, "snapshot an agent after this many events")
	fs.DurationVar(&cfg.SnapshotInterval, "snapshot-interval", time.Minute, "snapshot an agent this long after its first unsnapshotted event")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 5*time.Minute, "passivate an agent actor idle this long")
	fs.IntVar(&cfg.MailboxLimit, "mailbox-limit", 1024, "requests in flight per agent before 503")
	fs.DurationVar(&cfg.IdempotencyTTL, "idempotency-ttl", 24*time.Hour, "keep Idempotency-Key records this long")
	fs.DurationVar(&cfg.JudgeDeadline, "judge-deadline", 30*time.Second, "ask a judged reward's model judges this long before it fails")
	fs.DurationVar(&cfg.RequestDeadline, "request-deadline", 5*time.Second, "drop a request still waiting for its agent this long after admission (503 overloaded, Retry-After)")
	fs.Int64Var(&cfg.MinFreeBytes, "min-free-bytes", 0, "refuse writes (503 storage_full) below this much free disk (0: 5% of the disk, at most 256 MiB)")
	fs.Int64Var(&cfg.BallastBytes, "ballast-bytes", 0, "size of the ballast file kept in the data directory (0: 1% of the disk, at most 256 MiB; negative: none)")
	fs.BoolVar(&cfg.DurableSelect, "durable-select", false, "answer run creation only after its fsync, like every other write")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	pprofAddr := fs.String("pprof", "", "serve net/http/pprof on this loopback address (e.g. 127.0.0.1:6060); off when empty")
	mutexFraction := fs.Int("pprof-mutex-fraction", 0, "with --pprof: runtime.SetMutexProfileFraction (0: mutex profile off)")
	blockRate := fs.Int("pprof-block-rate", 0, "with --pprof: runtime.SetBlockProfileRate in ns (0: block profile off)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	cfg.Logger = logger
	cfg.BootstrapKey = os.Getenv("PLAUDIT_BOOTSTRAP_KEY")
	cfg.Version = version
	if *pprofAddr != "" {
		closePprof, err := servePprof(*pprofAddr, *mutexFraction, *blockRate, logger)
		if err != nil {
			return err
		}
		defer closePprof()
	}

	srv, err := server.Start(cfg)
	if err != nil {
		return err
	}
	if srv.AdminKey != "" {
		fmt.Fprintf(stdout, "admin key (shown once, keep it): %s\n", srv.AdminKey)
	}
	logger.Info("plaudit ready", "http", srv.HTTPAddr(), "nats", srv.NATSURL(), "data", cfg.DataDir,
		"account", srv.AccountID())

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	sig := <-sigs
	logger.Info("draining", "signal", sig.String())
	if err := srv.Close(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}
