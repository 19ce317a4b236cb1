package main

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
)

// runArgs runs the command line in process, as main would, and returns
// its exit code and what it printed.
func runArgs(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// unsetenv unsets an environment variable for the test (kong reads a
// variable set to "" as a value).
func unsetenv(t *testing.T, name string) {
	t.Helper()
	t.Setenv(name, "") // restored when the test ends
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
}

// commandPaths is every command of the tree, hidden ones included, as the
// words that name it ("keys list").
func commandPaths(t *testing.T) [][]string {
	t.Helper()
	var c cli
	parser := newParser(&c, &bytes.Buffer{}, &bytes.Buffer{})
	var paths [][]string
	var walk func(n *kong.Node, path []string)
	walk = func(n *kong.Node, path []string) {
		for _, child := range n.Children {
			p := append(slices.Clone(path), child.Name)
			paths = append(paths, p)
			walk(child, p)
		}
	}
	walk(parser.Model.Node, nil)
	return paths
}

// TestHelpExitsZeroAtEveryLevel: -h and --help on the root and on every
// command of the tree (those added later too) print help and exit 0.
func TestHelpExitsZeroAtEveryLevel(t *testing.T) {
	cases := [][]string{{"--help"}, {"-h"}}
	for _, p := range commandPaths(t) {
		cases = append(cases, append(slices.Clone(p), "--help"), append(slices.Clone(p), "-h"))
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runArgs(args...)
			if code != 0 {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
			}
			if !strings.Contains(stdout+stderr, "Usage") {
				t.Fatalf("no usage printed\nstdout: %s\nstderr: %s", stdout, stderr)
			}
		})
	}
}

func TestBadCommandLinesExitOne(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, `expected one of "serve"`},
		{[]string{"nope"}, "unexpected argument nope"},
		{[]string{"serve", "--nope"}, "unknown flag --nope"},
		{[]string{"serve", "--log-level", "loud"}, "--log-level"},
		{[]string{"serve", "--max-body", "lots"}, "--max-body"},
		{[]string{"bench", "-c", "0"}, "positive integers"},
		{[]string{"keys", "list"}, "missing flags: --key"},
		{[]string{"serve", "--cluster", "c1"}, "--cluster needs --node"},
		{[]string{"serve", "--cluster", "c1", "--node", "a"}, "--cluster needs --nats-cluster-listen"},
		{[]string{"serve", "--cluster", "c1", "--node", "a", "--nats-url", "nats://127.0.0.1:4222", "--nats-routes", "127.0.0.1:6222"}, "drop --nats-cluster-listen and --nats-routes"},
		{[]string{"serve", "--cluster", "c1", "--node", "a", "--nats-url", "nats://127.0.0.1:4222", "--replicas", "7"}, "--replicas: 1 to 5"},
		{[]string{"serve", "--replicas", "3"}, "need --cluster"},
		{[]string{"serve", "--cluster", "c1", "--node", "a", "--nats-cluster-listen", "127.0.0.1:6222"}, "--cluster needs --nats-routes"},
		{[]string{"serve", "--node", "a"}, "need --cluster"},
		{[]string{"serve", "--partitions", "8"}, "need --cluster"},
		{[]string{"serve", "--lease-ttl", "3s"}, "need --cluster"},
		{[]string{"serve", "--http", ""}, "--http: an address is needed"},
		{[]string{"serve", "--data", " "}, "--data: a directory is needed"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			unsetenv(t, "PLAUDIT_KEY") // the caller's must not satisfy --key
			code, _, stderr := runArgs(c.args...)
			if code != 1 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr, c.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	if code, stdout, _ := runArgs("version"); code != 0 || stdout != "plaudit "+version+"\n" {
		t.Fatalf("exit %d, %q", code, stdout)
	}
}

// serveFlags are the names `plaudit serve` has always had: none may go.
var serveFlags = []string{"data", "http", "nats-listen", "nats-url", "nats-creds", "nats-nkey", "max-body",
	"body-budget", "body-timeout", "snapshot-every", "snapshot-interval", "idle-timeout", "mailbox-limit",
	"idempotency-ttl", "judge-deadline", "request-deadline", "min-free-bytes", "ballast-bytes",
	"durable-select", "log-level", "log-format", "access-log", "metrics", "pprof", "pprof-mutex-fraction", "pprof-block-rate",
	"cluster", "node", "nats-cluster-listen", "nats-routes", "partitions", "lease-ttl", "replicas", "claim-window"}

// TestEveryServeFlagHasItsEnvironmentVariable: --nats-listen reads
// $PLAUDIT_NATS_LISTEN, and so on for every flag.
func TestEveryServeFlagHasItsEnvironmentVariable(t *testing.T) {
	var c cli
	parser := newParser(&c, &bytes.Buffer{}, &bytes.Buffer{})
	var names []string
	for _, n := range parser.Model.Children {
		if n.Name != "serve" {
			continue
		}
		for _, f := range n.Flags {
			if f.Name == "help" {
				continue
			}
			names = append(names, f.Name)
			want := "PLAUDIT_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			if !slices.Equal(f.Envs, []string{want}) {
				t.Errorf("--%s reads %v, want %s", f.Name, f.Envs, want)
			}
		}
	}
	slices.Sort(names)
	want := slices.Sorted(slices.Values(serveFlags))
	if !slices.Equal(names, want) {
		t.Errorf("serve's flags are %v, want %v", names, want)
	}
}

// TestServeReadsTheEnvironment: the environment sets what the command line
// does not; the command line wins; unset, the defaults hold.
func TestServeReadsTheEnvironment(t *testing.T) {
	for _, name := range serveFlags {
		unsetenv(t, "PLAUDIT_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
	}
	unsetenv(t, "PLAUDIT_BOOTSTRAP_KEY")
	parse := func(t *testing.T, env map[string]string, args ...string) serveCmd {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		var c cli
		if _, err := newParser(&c, &bytes.Buffer{}, &bytes.Buffer{}).Parse(append([]string{"serve"}, args...)); err != nil {
			t.Fatal(err)
		}
		return c.Serve
	}
	t.Run("defaults", func(t *testing.T) {
		got := parse(t, nil).config()
		if got.DataDir != "./data" || got.HTTPAddr != ":8080" || got.NATSListen != "127.0.0.1:4222" ||
			got.MaxBody != 1<<20 || got.BodyBudget != 64<<20 || got.BodyTimeout != 10*time.Second ||
			got.SnapshotEvery != 10000 || got.SnapshotInterval != time.Minute || got.IdleTimeout != 5*time.Minute ||
			got.MailboxLimit != 1024 || got.IdempotencyTTL != 24*time.Hour || got.JudgeDeadline != 30*time.Second ||
			got.RequestDeadline != 5*time.Second || got.MinFreeBytes != 0 || got.BallastBytes != 0 || got.DurableSelect {
			t.Fatalf("defaults: %+v", got)
		}
	})
	t.Run("environment", func(t *testing.T) {
		got := parse(t, map[string]string{
			"PLAUDIT_HTTP": "127.0.0.1:9090", "PLAUDIT_NATS_LISTEN": "127.0.0.1:4333", "PLAUDIT_DATA": "/srv/plaudit",
			"PLAUDIT_MAX_BODY": "2048", "PLAUDIT_BODY_TIMEOUT": "3s", "PLAUDIT_DURABLE_SELECT": "true",
			"PLAUDIT_BALLAST_BYTES": "-1", "PLAUDIT_NATS_URL": "nats://x:4222", "PLAUDIT_LOG_LEVEL": "debug",
			"PLAUDIT_BOOTSTRAP_KEY": "boot-key-0123456789",
		})
		cfg := got.config()
		if cfg.HTTPAddr != "127.0.0.1:9090" || cfg.NATSListen != "127.0.0.1:4333" || cfg.DataDir != "/srv/plaudit" ||
			cfg.MaxBody != 2048 || cfg.BodyTimeout != 3*time.Second || !cfg.DurableSelect || cfg.BallastBytes != -1 ||
			cfg.NATSURL != "nats://x:4222" || got.LogLevel != "debug" || cfg.BootstrapKey != "boot-key-0123456789" {
			t.Fatalf("from the environment: %+v", cfg)
		}
	})
	t.Run("a negative value after a space", func(t *testing.T) {
		if got := parse(t, nil, "--ballast-bytes", "-1").config(); got.BallastBytes != -1 {
			t.Fatalf("--ballast-bytes -1: %d", got.BallastBytes)
		}
	})
	t.Run("the command line wins", func(t *testing.T) {
		got := parse(t, map[string]string{"PLAUDIT_HTTP": "127.0.0.1:9090"}, "--http", "127.0.0.1:7070").config()
		if got.HTTPAddr != "127.0.0.1:7070" {
			t.Fatalf("--http with $PLAUDIT_HTTP set: %q", got.HTTPAddr)
		}
	})
	t.Run("a bad value names its variable", func(t *testing.T) {
		t.Setenv("PLAUDIT_MAX_BODY", "lots")
		code, _, stderr := runArgs("serve")
		if code != 1 || !strings.Contains(stderr, "PLAUDIT_MAX_BODY") {
			t.Fatalf("exit %d, %q", code, stderr)
		}
	})
}

// TestAShortBootstrapKeyIsRefused: keys are random, 128 bits or more; a
// chosen admin key too short to be one is refused before anything starts.
func TestAShortBootstrapKeyIsRefused(t *testing.T) {
	t.Setenv("PLAUDIT_BOOTSTRAP_KEY", "x")
	code, _, stderr := runArgs("serve", "--data", t.TempDir())
	if code != 1 || !strings.Contains(stderr, "PLAUDIT_BOOTSTRAP_KEY: at least 16 characters") {
		t.Fatalf("exit %d, stderr %q; want 1 naming PLAUDIT_BOOTSTRAP_KEY", code, stderr)
	}
}
