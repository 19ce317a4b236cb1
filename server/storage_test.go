package server

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/common/expfmt"

	"github.com/plaudit/plaudit/internal/logtest"
	"github.com/plaudit/plaudit/persist/faultfs"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// TestFullDiskRefusesWritesOnBothDoors fills the data directory's disk
// under a running server: writes are refused with 503 storage_full and a
// Retry-After on HTTP and NATS, reads and /healthz ("degraded") go on,
// every acknowledged signal is kept, and writes resume by themselves once
// the disk has room again.
func TestFullDiskRefusesWritesOnBothDoors(t *testing.T) {
	fs := faultfs.NewQuota(vfs.NewMem(), 64<<20)
	s := startServer(t, Config{DataDir: "data", FS: fs, MinFreeBytes: 2 << 20, BallastBytes: 1 << 20})
	c := newClient(t, s, adminKey)
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "disk"}`), "id")
	run := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`), "id")
	signal := func(i int) response {
		return c.request("POST", "/api/v1/agents/"+agent+"/signals",
			fmt.Sprintf(`{"kind": "step", "value": %d, "run_id": %q}`, i, run), nil)
	}
	if r := c.request("GET", "/healthz", "", nil); r.status != 200 || string(r.body) != `{"status":"ok"}` {
		t.Fatalf("healthz = %d %s", r.status, r.body)
	}
	if full := gaugeValue(t, s, "plaudit_storage_full"); full != 0 {
		t.Fatalf("plaudit_storage_full = %v on an empty disk", full)
	}

	fs.SetCapacity(fs.Used() + 256<<10) // another process took the rest
	acked := 0
	var refused response
	for i := range 50000 {
		r := signal(i)
		if r.status == 201 {
			acked++
			continue
		}
		refused = r
		break
	}
	if refused.status != 503 || str(t, refused.json(t), "error", "code") != "storage_full" || refused.header.Get("Retry-After") == "" {
		t.Fatalf("after %d signals: %d %s (Retry-After %q), want 503 storage_full", acked, refused.status, refused.body, refused.header.Get("Retry-After"))
	}
	if acked == 0 {
		t.Fatal("no signal fitted before the disk counted as full")
	}

	nc := newNATSClient(t, s, adminKey)
	msg := natsRequest(t, nc.nc, "plaudit.v1.default."+agent+".signal",
		fmt.Sprintf(`{"kind": "step", "value": 1, "run_id": %q}`, run), map[string]string{"Authorization": "Bearer " + adminKey})
	if msg.code != "503" || msg.msg.Header.Get("Retry-After") == "" || str(t, msg.fields, "error", "code") != "storage_full" {
		t.Fatalf("NATS signal on a full disk: code %q, Retry-After %q, %s", msg.code, msg.msg.Header.Get("Retry-After"), msg.msg.Data)
	}
	if r := c.request("GET", "/healthz", "", nil); r.status != 200 || str(t, r.json(t), "status") != "degraded" {
		t.Fatalf("healthz on a full disk = %d %s", r.status, r.body)
	}
	if full := gaugeValue(t, s, "plaudit_storage_full"); full != 1 {
		t.Fatalf("plaudit_storage_full = %v on a full disk", full)
	}
	signals := list(t, c.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+run+"/signals", ""), "items")
	if len(signals) != acked {
		t.Fatalf("run has %d signals, want the %d acknowledged", len(signals), acked)
	}

	fs.SetCapacity(64 << 20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := signal(-1)
		if r.status == 201 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes did not resume once the disk had room: %d %s", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := c.request("GET", "/healthz", "", nil); string(r.body) != `{"status":"ok"}` {
		t.Fatalf("healthz once the disk had room = %d %s", r.status, r.body)
	}
	if full := gaugeValue(t, s, "plaudit_storage_full"); full != 0 {
		t.Fatalf("plaudit_storage_full = %v once the disk had room", full)
	}
}

// gaugeValue scrapes /metrics, unauthenticated, parses it as Prometheus
// text and returns the gauge's value.
func gaugeValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	f := families[name]
	if f == nil || len(f.GetMetric()) != 1 || f.GetMetric()[0].GetGauge() == nil {
		t.Fatalf("/metrics has no gauge %s", name)
	}
	return f.GetMetric()[0].GetGauge().GetValue()
}

// flushAndCorrupt flushes the stopped server's data into tables and flips a
// byte of the table holding needle, after it.
func flushAndCorrupt(t *testing.T, dir string, needle []byte, after int) string {
	t.Helper()
	tables := flushTables(t, dir)
	for _, table := range tables {
		data, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		if i := bytes.Index(data, needle); i >= 0 {
			data[i+len(needle)+after] ^= 0xff
			if err := os.WriteFile(table, data, 0o644); err != nil {
				t.Fatal(err)
			}
			return filepath.Base(table)
		}
	}
	t.Fatalf("no table holds %q", needle)
	return ""
}

// flushTables flushes the store in dir into tables and returns their paths.
func flushTables(t *testing.T, dir string) []string {
	t.Helper()
	db, err := pebblelog.OpenRaw(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	return tables
}

// corruptOnly flushes the store in dir, then flips a byte of a table inside
// a data block that holds keys with prefix and no others: reading those
// keys fails, and every other key reads as before. The first copy of the
// prefix in a table's bytes is not always such a block: it may share its
// block with the next keys, or, where compression left no literal copy in
// the data, lie in the table's index, which every read of the table goes
// through (then every agent failed). It returns the table's name.
func corruptOnly(t *testing.T, dir string, prefix []byte) string {
	t.Helper()
	for _, table := range flushTables(t, dir) {
		data, err := os.ReadFile(table)
		if err != nil {
			t.Fatal(err)
		}
		for from := 0; ; {
			i := bytes.Index(data[from:], prefix)
			if i < 0 {
				break
			}
			at := from + i + len(prefix) + 20
			from += i + 1
			if at >= len(data) {
				continue
			}
			data[at] ^= 0xff
			if err := os.WriteFile(table, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if onlyPrefixUnreadable(t, dir, prefix) {
				return filepath.Base(table)
			}
			data[at] ^= 0xff
			if err := os.WriteFile(table, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Fatalf("no table byte spoils the keys %q alone", prefix)
	return ""
}

// onlyPrefixUnreadable reports whether the store in dir fails to read the
// keys with prefix and reads every other key.
func onlyPrefixUnreadable(t *testing.T, dir string, prefix []byte) bool {
	t.Helper()
	db, err := pebblelog.OpenRaw(dir)
	if err != nil {
		return false
	}
	defer func() { _ = db.Close() }()
	readable := func(lower, upper []byte) error {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return err
		}
		var verr error
		for it.First(); it.Valid() && verr == nil; it.Next() {
			_, verr = it.ValueAndErr()
		}
		return errors.Join(verr, it.Error(), it.Close())
	}
	end := append(bytes.Clone(prefix[:len(prefix)-1]), prefix[len(prefix)-1]+1)
	return readable(prefix, end) != nil && readable(nil, prefix) == nil && readable(end, nil) == nil
}

// TestCorruptAgentIsFencedAndNamed: a damaged table block holding one
// agent's events makes that agent answer at once with 500 data_corrupt
// naming it and the file, logged at ERROR once; another agent is served,
// and the server shuts down cleanly.
func TestCorruptAgentIsFencedAndNamed(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, Config{DataDir: dir})
	c := newClient(t, s, adminKey)
	agents, runs := make([]string, 2), make([]string, 2)
	for i := range agents {
		agents[i] = str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "a"}`), "id")
		runs[i] = str(t, c.must(201, "POST", "/api/v1/agents/"+agents[i]+"/runs", `{}`), "id")
		// Enough events for blocks that hold this agent's alone.
		for j := range 300 {
			c.must(201, "POST", "/api/v1/agents/"+agents[i]+"/signals", fmt.Sprintf(`{"kind": "step", "value": %d, "run_id": %q}`, j, runs[i]))
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	table := corruptOnly(t, dir, []byte("e/"+agents[0]+"/"))

	log := &logtest.Recorder{Min: slog.LevelError}
	s = startServer(t, Config{DataDir: dir, Logger: slog.New(log)})
	c = newClient(t, s, adminKey)
	for range 3 {
		r := c.request("GET", "/api/v1/agents/"+agents[0]+"/runs/"+runs[0]+"/signals", "", nil)
		msg := str(t, r.json(t), "error", "message")
		if r.status != 500 || str(t, r.json(t), "error", "code") != "data_corrupt" ||
			!strings.Contains(msg, "agent "+agents[0]) || !strings.Contains(msg, "on-disk corruption in "+table) {
			t.Fatalf("read of the damaged agent = %d %s", r.status, r.body)
		}
		// The 5xx's log line names its request id, as the client got it.
		if n := log.Count("ERROR request failed request_id=" + r.header.Get("X-Request-Id") + " "); n != 1 {
			t.Fatalf("the 500 %s is in %d log lines, want 1:\n%s", r.header.Get("X-Request-Id"), n, log)
		}
	}
	if n := log.Count("agent recovery failed"); n != 1 {
		t.Fatalf("recovery failure logged %d times, want once:\n%s", n, log)
	}
	if got := list(t, c.must(200, "GET", "/api/v1/agents/"+agents[1]+"/runs/"+runs[1]+"/signals", ""), "items"); len(got) != 300 {
		t.Fatalf("the other agent has %d signals, want 300", len(got))
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// TestCorruptDirectoryRefusesToStart: damage in the directory (keys,
// workspaces, indexes: every tenant's) stops the server from starting, with
// an error naming the file, rather than serving some tenants wrongly.
func TestCorruptDirectoryRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, Config{DataDir: dir})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	table := flushAndCorrupt(t, dir, []byte("d/"), 4)
	_, err := Start(Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", BootstrapKey: adminKey})
	if err == nil || !strings.Contains(err.Error(), "on-disk corruption in "+table) {
		t.Fatalf("Start = %v, want an error naming %s", err, table)
	}
}

// TestEmbeddedNATSLogsIntoSlog: the embedded nats-server's log, from its
// first line, goes to the server's logger.
func TestEmbeddedNATSLogsIntoSlog(t *testing.T) {
	log := &logtest.Recorder{Min: slog.LevelDebug}
	startServer(t, Config{Logger: slog.New(log)})
	if n := log.Count("component=nats-server"); n == 0 || log.Count("Starting nats-server") == 0 {
		t.Fatalf("%d nats-server lines, none of them its start:\n%s", n, log)
	}
}

// TestAServerStartsOnAFullDisk: a restart on a disk that has no room left
// starts (its start writes nothing it needs), serves reads, says degraded,
// and refuses writes with 503 storage_full, as the running server did.
func TestAServerStartsOnAFullDisk(t *testing.T) {
	fs := faultfs.NewQuota(vfs.NewMem(), 64<<20)
	cfg := Config{DataDir: "data", FS: fs, MinFreeBytes: 2 << 20, BallastBytes: 1 << 20, BootstrapKey: adminKey}
	s := startServer(t, cfg)
	c := newClient(t, s, adminKey)
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "disk"}`), "id")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fs.SetCapacity(fs.Used() + 256<<10) // another process took the rest
	s = startServer(t, cfg)
	c = newClient(t, s, adminKey)
	c.must(200, "GET", "/api/v1/agents/"+agent, "")
	if r := c.request("GET", "/healthz", "", nil); r.status != 200 || str(t, r.json(t), "status") != "degraded" {
		t.Fatalf("healthz on a full disk = %d %s", r.status, r.body)
	}
	if r := c.request("POST", "/api/v1/agents", `{"name": "more"}`, nil); r.status != 503 || str(t, r.json(t), "error", "code") != "storage_full" {
		t.Fatalf("a write on a full disk: %d %s, want 503 storage_full", r.status, r.body)
	}
}
