// Command plaudit is the Plaudit reward engine.
//
//	plaudit serve [flags]          run the server; every flag also reads
//	                               $PLAUDIT_<FLAG> (--nats-listen: $PLAUDIT_NATS_LISTEN)
//	plaudit keys list|create|revoke  manage a running server's API keys over HTTP
//	plaudit backup --to DIR        copy a running server's (or a stopped) data directory
//	plaudit restore --from DIR --data NEWDIR  make a data directory from a backup
//	plaudit inspect --data DIR     list and verify a stopped data directory
//	plaudit bench [flags]          run the benchmark harness, with ratios to raw
//	                               baselines (BENCHMARKS.md)
//	plaudit version                print the version
//
// `--help` at any level lists the commands and flags and exits 0. The first
// start prints the admin key on stdout (or takes $PLAUDIT_BOOTSTRAP_KEY).
//
// The command tree is the cli struct (github.com/alecthomas/kong): a
// command is one field there and one file holding its type, whose
// Run(*console) error does the work. Flags are that type's fields, each
// tagged with its default and its environment variable.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kong"
)

const version = "0.1.0"

// cli is plaudit's command tree.
type cli struct {
	Serve      serveCmd      `cmd:"" help:"Run the server."`
	Keys       keysCmd       `cmd:"" help:"List, create and revoke the API keys of a running server (over its HTTP API)."`
	Backup     backupCmd     `cmd:"" help:"Copy a running server's data (over HTTP, with an admin key) or a stopped data directory, verified."`
	Restore    restoreCmd    `cmd:"" help:"Make a new data directory from a backup, verified."`
	Inspect    inspectCmd    `cmd:"" help:"List the agents, events, snapshots and sizes of a stopped data directory and verify every checksum."`
	Bench      benchCmd      `cmd:"" passthrough:"" help:"Run the benchmark harness (BENCHMARKS.md); 'plaudit bench --help' lists its flags."`
	BenchHello benchHelloCmd `cmd:"" name:"bench-hello" passthrough:"" hidden:"" help:"The doors' floors, started by plaudit bench."`
	Version    versionCmd    `cmd:"" help:"Print the version."`
}

// console is what every command's Run is given: where to write.
type console struct {
	Out, Err io.Writer
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// exitCode carries a code out of kong's Exit hook (called after --help)
// to run, which returns it rather than exiting, so tests can call run.
type exitCode int

// run parses args and runs the command they name; it returns the exit
// code: 0, or 1 after printing the error.
func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			c, ok := r.(exitCode)
			if !ok {
				panic(r)
			}
			code = int(c)
		}
	}()
	var c cli
	parser := newParser(&c, stdout, stderr)
	ctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintln(stderr, "plaudit:", err)
		var perr *kong.ParseError
		if errors.As(err, &perr) && perr.Context != nil {
			parser.Stdout = stderr // the usage reminder belongs with the error
			_ = perr.Context.PrintUsage(true)
		}
		return 1
	}
	if err := ctx.Run(&console{Out: stdout, Err: stderr}); err != nil {
		fmt.Fprintln(stderr, "plaudit:", err)
		return 1
	}
	return 0
}

// newParser is the parser of the command tree into c. After --help it
// calls Exit(0), which panics with exitCode for run to recover.
func newParser(c *cli, stdout, stderr io.Writer) *kong.Kong {
	parser, err := kong.New(c, kong.Name("plaudit"),
		kong.Description("Plaudit, a self-hosted reward engine for AI agents."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitCode(code)) }),
		// A flag's value may start with "-" (--ballast-bytes -1), as with
		// the flag package before.
		kong.WithHyphenPrefixedParameters(true),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}))
	if err != nil {
		panic(err) // the cli struct's tags are wrong: a bug, caught by every test
	}
	return parser
}

type versionCmd struct{}

func (versionCmd) Run(con *console) error {
	_, err := fmt.Fprintln(con.Out, "plaudit", version)
	return err
}
