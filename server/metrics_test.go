package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// scrape reads GET /metrics from base over a real socket and parses it with
// the Prometheus text parser.
func scrape(t *testing.T, base string) metricsView {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

type metricsView map[string]*dto.MetricFamily

// value sums the samples of family name whose labels include want ("k=v"
// pairs): a counter's or gauge's value, a histogram's sample count.
func (m metricsView) value(name string, want ...string) float64 {
	f, ok := m[name]
	if !ok {
		return -1
	}
	sum := 0.0
	for _, s := range f.GetMetric() {
		if !hasLabels(s, want) {
			continue
		}
		switch {
		case s.Counter != nil:
			sum += s.GetCounter().GetValue()
		case s.Gauge != nil:
			sum += s.GetGauge().GetValue()
		case s.Histogram != nil:
			sum += float64(s.GetHistogram().GetSampleCount())
		case s.Untyped != nil:
			sum += s.GetUntyped().GetValue()
		}
	}
	return sum
}

func hasLabels(s *dto.Metric, want []string) bool {
	for _, kv := range want {
		k, v, _ := strings.Cut(kv, "=")
		found := false
		for _, l := range s.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// TestMetricsCountBothDoors: requests on the HTTP and the NATS door move
// plaudit_requests_total under their door, operation and status class, and
// the latency histogram under their door and operation; the store, the
// actors, Pebble and the embedded NATS server report their work.
func TestMetricsCountBothDoors(t *testing.T) {
	// IdleTimeout is long enough that the agent stays live until the first
	// checks, short enough to wait for its passivation.
	s := startServer(t, Config{SnapshotEvery: 1, IdleTimeout: 2 * time.Second})
	base := "http://" + s.HTTPAddr()
	c := newClient(t, s, adminKey)
	before := scrape(t, base)

	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "m"}`), "id")
	run := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`), "id")
	for i := range 3 {
		c.must(201, "POST", "/api/v1/agents/"+agent+"/signals", fmt.Sprintf(`{"kind": "k", "value": %d, "run_id": %q}`, i, run))
	}
	c.must(404, "GET", "/api/v1/agents/agt_nope", "")
	if r := c.as("").request("GET", "/api/v1/agents", "", nil); r.status != 401 {
		t.Fatalf("no key: %d", r.status)
	}
	nc, err := nats.Connect(s.NATSURL(), nats.Token(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	subject := "plaudit.v1.default." + agent + ".signal"
	keyed := map[string]string{"Idempotency-Key": "m-1"}
	for _, send := range []struct {
		subject, body string
		hdr           map[string]string
		status        int
	}{
		{subject, `{"kind": "k", "value": 1, "run_id": "` + run + `"}`, nil, 200},
		{subject, `{"kind": "k", "value": 2, "run_id": "` + run + `"}`, keyed, 200},
		{subject, `{"kind": "k", "value": 2, "run_id": "` + run + `"}`, keyed, 200}, // replayed
		{"plaudit.v1.default.agt_nope.signal", `{"kind": "k", "value": 1}`, nil, 404},
	} {
		r, err := natsSend(nc, adminKey, send.subject, send.body, send.hdr)
		if err != nil || r.status != send.status {
			t.Fatalf("%s %s: %d %v, want %d", send.subject, send.body, r.status, err, send.status)
		}
	}
	after := scrape(t, base)

	for _, tc := range []struct {
		name   string
		labels []string
		delta  float64
	}{
		{"plaudit_requests_total", []string{"door=http", "op=create_agent", "code=2xx"}, 1},
		{"plaudit_requests_total", []string{"door=http", "op=record_signal", "code=2xx"}, 3},
		{"plaudit_requests_total", []string{"door=http", "op=get_agent", "code=4xx"}, 1},
		{"plaudit_requests_total", []string{"door=http", "op=none", "code=4xx"}, 1},
		{"plaudit_requests_total", []string{"door=nats", "op=record_signal", "code=2xx"}, 3},
		{"plaudit_requests_total", []string{"door=nats", "op=record_signal", "code=4xx"}, 1},
		{"plaudit_requests_total", []string{"door=nats", "op=create_agent"}, 0},
		{"plaudit_request_duration_seconds", []string{"door=http", "op=record_signal"}, 3},
		{"plaudit_request_duration_seconds", []string{"door=nats", "op=record_signal"}, 4},
		{"plaudit_idempotency_requests_total", []string{"outcome=executed"}, 1},
		{"plaudit_idempotency_requests_total", []string{"outcome=replayed"}, 1},
		{"plaudit_actors_spawned_total", nil, 1},
	} {
		if got := after.value(tc.name, tc.labels...) - max(before.value(tc.name, tc.labels...), 0); got != tc.delta {
			t.Errorf("%s%v moved by %v, want %v", tc.name, tc.labels, got, tc.delta)
		}
	}
	for _, tc := range []struct {
		name   string
		labels []string
	}{
		{"plaudit_wal_commits_total", []string{"kind=append"}},
		{"plaudit_wal_commit_bytes_total", []string{"kind=append"}},
		{"plaudit_wal_commit_duration_seconds", nil},
		{"plaudit_pebble_wal_fsyncs_total", nil},
		{"plaudit_pebble_wal_fsync_duration_seconds", nil},
		{"plaudit_pebble_wal_bytes_written_total", nil},
		{"plaudit_pebble_disk_usage_bytes", nil},
		{"plaudit_actor_append_batch_events", nil},
		{"plaudit_agent_recovery_duration_seconds", nil},
		{"plaudit_nats_in_msgs_total", nil},
		{"plaudit_nats_connections", nil},
		{"plaudit_storage_free_bytes", nil},
		{"plaudit_store_key_filter_bytes", nil}, // the filter of Idempotency-Key records, built at the start
	} {
		if got := after.value(tc.name, tc.labels...); got <= 0 {
			t.Errorf("%s%v = %v, want > 0", tc.name, tc.labels, got)
		}
	}
	if got := after.value("plaudit_actors_live"); got != 1 {
		t.Errorf("plaudit_actors_live = %v, want 1", got)
	}

	// SnapshotEvery 1 snapshots after the writes; IdleTimeout passivates
	// the agent, which a read then recovers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := scrape(t, base)
		if m.value("plaudit_actors_passivated_total") >= 1 && m.value("plaudit_actors_live") == 0 &&
			m.value("plaudit_snapshot_duration_seconds") >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no passivation and snapshot: passivated %v, live %v, snapshots %v", m.value("plaudit_actors_passivated_total"),
				m.value("plaudit_actors_live"), m.value("plaudit_snapshot_duration_seconds"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+run, "")
	if got := scrape(t, base).value("plaudit_agent_recovery_duration_seconds"); got < 2 {
		t.Errorf("recoveries = %v after the passivated agent was read again, want 2", got)
	}
}

// TestMetricsOnTheirOwnAddress: with MetricsAddr, /metrics is served there
// and not on the HTTP door.
func TestMetricsOnTheirOwnAddress(t *testing.T) {
	s := startServer(t, Config{MetricsAddr: "127.0.0.1:0"})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/api/v1/agents", `{"name": "m"}`)
	m := scrape(t, "http://"+s.MetricsAddr())
	if got := m.value("plaudit_requests_total", "door=http", "op=create_agent", "code=2xx"); got != 1 {
		t.Fatalf("create_agent counted %v times, want 1", got)
	}
	if r := c.request("GET", "/metrics", "", nil); r.status != 404 {
		t.Fatalf("GET /metrics on the HTTP door = %d, want 404", r.status)
	}
}
