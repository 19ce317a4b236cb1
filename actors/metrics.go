package actors

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the registry's instruments. Each is touched at most once per
// append, snapshot, recovery, spawn or read step, never per request: the live and
// in-flight gauges are counted when scraped.
type metrics struct {
	spawned, passivated, overloaded prometheus.Counter
	batchEvents, batchRequests      prometheus.Histogram
	snapshot                        prometheus.Histogram
	snapshotFailed                  prometheus.Counter
	recovery                        prometheus.Histogram
	recoveryFailed                  prometheus.Counter
	step                            prometheus.Histogram
	live, inflight                  prometheus.GaugeFunc
}

// durationBuckets cover a small agent's recovery (tens of microseconds) to
// a large snapshot's write (seconds).
var durationBuckets = prometheus.ExponentialBuckets(0.0001, 4, 10) // 100µs … 26s

func newMetrics(r *Registry) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	histogram := func(name, help string, buckets []float64) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	}
	sizes := prometheus.ExponentialBuckets(1, 2, 12) // 1 … 2048
	return &metrics{
		spawned:    counter("plaudit_actors_spawned_total", "Agent actors started (each recovers its agent from the store)."),
		passivated: counter("plaudit_actors_passivated_total", "Agent actors stopped after IdleTimeout without a request."),
		overloaded: counter("plaudit_actors_overloaded_total", "Requests refused because their agent had MailboxLimit requests in flight."),
		batchEvents: histogram("plaudit_actor_append_batch_events",
			"Events per append: the writes an agent pipelined into one synced batch while the previous one synced.", sizes),
		batchRequests: histogram("plaudit_actor_append_batch_requests",
			"Requests answered by one append's commit (the agent-level group commit).", sizes),
		snapshot: histogram("plaudit_snapshot_duration_seconds",
			"Time to encode and write an agent snapshot (its count is the snapshots written).", durationBuckets),
		snapshotFailed: counter("plaudit_snapshot_failures_total", "Agent snapshots that failed to write (the log still holds every event)."),
		recovery: histogram("plaudit_agent_recovery_duration_seconds",
			"Time to load an agent from its snapshot and log tail when its actor starts.", durationBuckets),
		recoveryFailed: counter("plaudit_agent_recovery_failures_total", "Agent recoveries that failed (the agent answers 500 or 503)."),
		step: histogram("plaudit_actor_read_step_seconds",
			"Time an agent's actor spends on one step of a read in steps (an objective preview): the longest it holds other requests back.",
			prometheus.ExponentialBuckets(0.0001, 2, 12)), // 100µs … 205ms
		live: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "plaudit_actors_live",
			Help: "Agent actors in memory."}, func() float64 { n, _ := r.census(); return float64(n) }),
		inflight: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "plaudit_actors_inflight_requests",
			Help: "Requests admitted to agent actors and not yet answered (queued in mailboxes or waiting for their fsync)."},
			func() float64 { _, n := r.census(); return float64(n) }),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.spawned, m.passivated, m.overloaded, m.batchEvents, m.batchRequests,
		m.snapshot, m.snapshotFailed, m.recovery, m.recoveryFailed, m.step, m.live, m.inflight}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// Collector returns the registry's metrics: actors live, spawned and
// passivated, requests in flight and refused, append batch sizes,
// snapshots and recoveries.
func (r *Registry) Collector() prometheus.Collector { return r.metrics }

// census counts the live actors and their requests in flight.
func (r *Registry) census() (live, inflight int) {
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		live += len(sh.agents)
		for _, e := range sh.agents {
			inflight += int(e.inflight.Load())
		}
		sh.mu.Unlock()
	}
	return live, inflight
}

func since(t time.Time) float64 { return time.Since(t).Seconds() }
