package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/plaudit/plaudit/bench"
)

// smokeOptions are tiny sizes: enough for every scenario to run end to
// end, not to measure anything.
func smokeOptions(t *testing.T, bin string) bench.Options {
	return bench.Options{Bin: bin, Ops: 20, Concurrency: []int{1, 4}, Dir: t.TempDir(),
		RecoveryEvents: 400, MemorySignals: 400, IdleAgents: 50, SummaryRuns: 30}
}

// TestBenchSmoke runs the whole out-of-process suite with tiny op counts
// against child servers: every scenario must produce its row at every
// concurrency it runs at, with every operation answered as expected, and
// the recovery and memory scenarios their figures. Redis rows run where
// redis-server is installed and are skipped, with the install hint,
// where it is not.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts servers; skipped with -short")
	}
	start := time.Now()
	bin := buildPlaudit(t)
	opts := smokeOptions(t, bin)
	rep, err := bench.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Failed(); err != nil {
		t.Fatal(err)
	}
	got := map[string]bench.Row{}
	for _, r := range rep.Rows {
		got[r.Family+"/"+r.Name+"/"+strconv.Itoa(r.C)] = r
	}
	want := []string{
		"select/nats-echo/1", "select/nats-select/1", "select/http-hello/1", "select/http-select/1", "select/beta-draws/1",
		"select/nats-echo/4", "select/nats-select/4", "select/http-hello/4", "select/http-select/4",
		"ingest/raw-pebble/1", "ingest/http-pebble/1", "ingest/nats-pebble/1", "ingest/http-signal/1", "ingest/nats-signal/1",
		"ingest/raw-pebble/4", "ingest/http-pebble/4", "ingest/nats-pebble/4", "ingest/http-signal/4", "ingest/nats-signal/4",
		"ingest/http-signal-agents/4",
		"feedback/http-feedback/1", "feedback/http-report-idem/1", "feedback/http-feedback/4", "feedback/http-report-idem/4",
		"reads/reward-read-10/1", "reads/reward-read-100/1", "reads/reward-read-1000/1", "reads/version-summary/1",
		"reads/reward-read-10/4", "reads/reward-read-1000/4", "reads/version-summary/4",
		"judged/reward-inproc/1", "judged/http-reward/1", "judged/http-reward-judge/1", "judged/http-reward/4",
	}
	if bench.RedisServerPath() != "" {
		want = append(want, "select/redis-select/1", "select/redis-select/4",
			"feedback/redis-feedback/1", "feedback/redis-feedback-aof/4")
	} else if !strings.Contains(strings.Join(rep.Skipped, "\n"), "apt-get install -y redis-server") {
		t.Errorf("redis-server is not installed and the report does not say how to: %q", rep.Skipped)
	}
	for _, name := range want {
		r, ok := got[name]
		if !ok {
			t.Errorf("no row %s", name)
			continue
		}
		ops := opts.Ops
		if strings.Contains(name, "version-summary") {
			ops /= 10 // a summary costs a hundred signals' reads; the suite runs a tenth
		}
		if r.Ops != ops || r.Errors != 0 || r.P50 <= 0 || r.P50 > r.P99 || r.P99 > r.Max {
			t.Errorf("%s: %v, want %d ops, no errors, ordered percentiles", name, r.Result, ops)
		}
		if r.Process == "server" && r.CPU <= 0 {
			t.Errorf("%s: no server CPU measured", name)
		}
	}
	for _, name := range []string{"select/nats-select/1", "ingest/http-signal/4", "reads/reward-read-10/1"} {
		if r := got[name]; r.Base == "" || r.P50Ratio <= 0 || r.OpsRatio <= 0 {
			t.Errorf("%s: no ratio to its baseline: %+v", name, r)
		}
	}
	for _, name := range []string{"ingest/http-signal/1", "ingest/nats-signal/4"} {
		if r := got[name]; r.Vs == "" || r.VsOpsRatio <= 0 {
			t.Errorf("%s: no ratio to the durable floor: %+v", name, r)
		}
	}
	if len(rep.Recovery) != 2 {
		t.Errorf("%d recovery results, want 2", len(rep.Recovery))
	}
	for _, r := range rep.Recovery {
		if r.Events != opts.RecoveryEvents || r.Healthz <= 0 || r.AllAgents < r.Healthz || r.RSS <= 0 || r.RSSEmpty <= 0 {
			t.Errorf("recovery %+v", r)
		}
	}
	if len(rep.Memory) != 2 {
		t.Errorf("%d memory results, want 2", len(rep.Memory))
	}
	for _, m := range rep.Memory {
		// A smoke test's few hundred items are within the collector's
		// noise, so growth is not asked for: only real readings.
		if m.RSSBefore <= 0 || m.RSSAfter <= 0 || m.HeapBefore <= 0 || m.HeapAfter <= 0 {
			t.Errorf("memory %+v: want RSS and heap read before and after", m)
		}
	}
	var tables, js bytes.Buffer
	if err := rep.WriteTables(&tables); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"| select", "| ingest", "| reads", "| recovery", "| memory", "ops/s ÷ base"} {
		if !strings.Contains(tables.String(), s) {
			t.Errorf("tables lack %q:\n%s", s, tables.String())
		}
	}
	if err := rep.WriteJSON(&js); err != nil || !json.Valid(js.Bytes()) {
		t.Errorf("JSON report: %v\n%s", err, js.String())
	}
	t.Logf("suite ran in %v (with the build)", time.Since(start).Round(time.Millisecond))
}

// TestBenchTargetsARunningServer: with a Target, the harness loads that
// server and starts none of its own (the baselines' bench-hello child
// aside), and skips what needs the server process.
func TestBenchTargetsARunningServer(t *testing.T) {
	bin, srv := targetServer(t)
	opts := smokeOptions(t, bin)
	opts.Target = &bench.Target{HTTP: srv.base, NATS: srv.nats, Key: killTestKey}
	opts.Only = regexp.MustCompile(`^(select/nats-select|ingest/http-signal)$`)
	rep, err := bench.Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Failed(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rep.Rows {
		if r.Process != "redis" { // redis-select runs too where Redis is installed
			names = append(names, r.Name+"/"+strconv.Itoa(r.C))
		}
	}
	if got, want := strings.Join(names, " "), "nats-echo/1 nats-select/1 nats-echo/4 nats-select/4 raw-pebble/1 http-pebble/1 http-signal/1 raw-pebble/4 http-pebble/4 http-signal/4"; got != want {
		t.Errorf("rows %q, want %q", got, want)
	}
	if len(rep.Recovery)+len(rep.Memory) != 0 {
		t.Errorf("recovery or memory ran against a server the harness did not start")
	}
}

// TestBenchRowFailingInItsSetUpEndsWhileProfiling: a row that fails
// before its load starts (here its agent cannot be made: the key is
// refused) is reported as failed, even with profiles asked for, which it
// never started.
func TestBenchRowFailingInItsSetUpEndsWhileProfiling(t *testing.T) {
	bin, srv := targetServer(t)
	opts := smokeOptions(t, bin)
	opts.Concurrency = []int{1}
	// Never reached: the profiles start with the load.
	opts.Target = &bench.Target{HTTP: srv.base, Key: "pl_refused", Pprof: "127.0.0.1:1"}
	opts.CPUProfile = filepath.Join(t.TempDir(), "cpu")
	opts.Only = regexp.MustCompile(`^select/http-select$`)
	done := make(chan error, 1)
	go func() { _, err := bench.Run(opts); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("bench.Run: %v, want the row's 401", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("bench.Run still waiting for profiles its failed row never started")
	}
}

// targetServer builds the binary and starts a server of its own, for the
// harness to target as a running server.
func targetServer(t *testing.T) (bin string, srv *plaudit) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary and starts a server; skipped with -short")
	}
	bin = buildPlaudit(t)
	return bin, startPlaudit(t, bin, t.TempDir(), "target")
}

// TestBenchRefusesStrayArguments: flag parsing stops at the first
// argument that is not a flag, so the flags after it would be dropped
// without a word; bench refuses it instead, before running anything.
func TestBenchRefusesStrayArguments(t *testing.T) {
	var out, errs bytes.Buffer
	err := runBench([]string{"--ops", "1", "extra", "-run", "nomatch"}, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), `"extra"`) || out.Len() != 0 {
		t.Fatalf("runBench with a stray argument: %v, output %q", err, out.String())
	}
}

// TestBenchStopsItsChildrenWhenItsReaderGoes: `plaudit bench | head` ends
// with the harness's next write to the closed pipe; that stops the child
// servers and removes their data, as an interrupt does, instead of the
// harness dying of SIGPIPE and leaving them running.
func TestBenchStopsItsChildrenWhenItsReaderGoes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts servers; skipped with -short")
	}
	bin, dir := buildPlaudit(t), t.TempDir()
	cmd := exec.Command(bin, "bench", "--run", "select/http-select$", "-c", "1", "--duration", "60s", "--dir", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	// Once a child server runs, the readers go away.
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("no progress line: %v", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no child data in %s 30 s after %q", dir, line)
		}
	}
	stdout.Close()
	stderr.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		t.Fatal("bench still running 90 s after its readers went away")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bench left %d entries in its --dir: its children's data", len(entries))
	}
	if out, _ := exec.Command("pgrep", "-f", dir).Output(); len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("processes still running with %s: %s", dir, out)
	}
}
