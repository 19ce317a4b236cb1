package api

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Door names the door a request came through, for the metrics and the
// access log.
type Door uint8

// The doors. A request of DoorNone (the zero value) is answered but not
// counted: the NATS door's stand-in 500 for a reply too large to send is
// the same request answered twice.
const (
	DoorNone Door = iota
	DoorHTTP
	DoorNATS
	DoorConsole // the web console (transport/console)
	numDoors
)

func (d Door) String() string {
	switch d {
	case DoorHTTP:
		return "http"
	case DoorNATS:
		return "nats"
	case DoorConsole:
		return "console"
	}
	return "none"
}

// opNone labels the requests refused before their operation was known (no
// route, failed authentication, overload at the door).
const opNone = "none"

// LatencyBuckets are the request latency histogram's buckets, in seconds:
// a cached read takes tens of microseconds, a write an fsync (about a
// millisecond on a good disk), a Prefer: wait answer up to two minutes.
var LatencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 120}

// requestMetrics counts the service's answers. The hot path costs one map
// lookup on the Op (no string built), an atomic load, a counter add and a
// histogram observation: the labelled children of a door and operation are
// resolved once, on the first request of that pair, so series appear only
// for the operations used.
type requestMetrics struct {
	requests *prometheus.CounterVec   // door, op, code (2xx, 4xx, 5xx)
	latency  *prometheus.HistogramVec // door, op
	idem     *prometheus.CounterVec   // outcome

	idemReplayed, idemExecuted prometheus.Counter

	opIndex map[Op]int // index into slots; opNone is 0
	ops     []string   // label of each index
	slots   [numDoors][]atomic.Pointer[opSlot]
	mu      sync.Mutex // resolving a slot
}

type opSlot struct {
	codes   [3]prometheus.Counter // 2xx, 4xx, 5xx
	latency prometheus.Observer
}

func newRequestMetrics() *requestMetrics {
	m := &requestMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "plaudit_requests_total",
			Help: "Requests answered, by door, operation and status class."}, []string{"door", "op", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "plaudit_request_duration_seconds",
			Help: "Time from a request's admission by its door to its answer, by door and operation.", Buckets: LatencyBuckets},
			[]string{"door", "op"}),
		idem: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "plaudit_idempotency_requests_total",
			Help: "Writes with an Idempotency-Key: replayed from a record, or executed."}, []string{"outcome"}),
		opIndex: map[Op]int{},
		ops:     []string{opNone},
	}
	m.idemReplayed = m.idem.WithLabelValues("replayed")
	m.idemExecuted = m.idem.WithLabelValues("executed")
	ops := make([]string, 0, len(handlers))
	for op := range handlers {
		ops = append(ops, string(op))
	}
	sort.Strings(ops)
	for _, op := range ops {
		m.opIndex[Op(op)] = len(m.ops)
		m.ops = append(m.ops, op)
	}
	for d := range m.slots {
		m.slots[d] = make([]atomic.Pointer[opSlot], len(m.ops))
	}
	return m
}

// observe counts one answer.
func (m *requestMetrics) observe(door Door, op Op, status int, took time.Duration) {
	if door == DoorNone || door >= numDoors {
		return
	}
	i := m.opIndex[op] // 0, opNone, for an unknown or empty op
	slot := m.slots[door][i].Load()
	if slot == nil {
		slot = m.resolve(door, i)
	}
	class := 0
	switch {
	case status >= 500:
		class = 2
	case status >= 300:
		class = 1
	}
	slot.codes[class].Inc()
	slot.latency.Observe(took.Seconds())
}

func (m *requestMetrics) resolve(door Door, i int) *opSlot {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.slots[door][i].Load(); s != nil {
		return s
	}
	d, op := door.String(), m.ops[i]
	s := &opSlot{latency: m.latency.WithLabelValues(d, op)}
	for c, code := range [...]string{"2xx", "4xx", "5xx"} {
		s.codes[c] = m.requests.WithLabelValues(d, op, code)
	}
	m.slots[door][i].Store(s)
	return s
}

// Describe implements prometheus.Collector.
func (m *requestMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.requests.Describe(ch)
	m.latency.Describe(ch)
	m.idem.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *requestMetrics) Collect(ch chan<- prometheus.Metric) {
	m.requests.Collect(ch)
	m.latency.Collect(ch)
	m.idem.Collect(ch)
}

// Collector returns the service's metrics: requests by door, operation
// and status class, their latency, and Idempotency-Key outcomes.
func (s *Service) Collector() prometheus.Collector { return s.metrics }

// finish counts and, with Config.AccessLog, logs an answered request.
func (s *Service) finish(req *Request, resp Response) Response {
	took := time.Since(req.Arrived)
	s.metrics.observe(req.Door, req.Op, resp.Status, took)
	if s.cfg.AccessLog && req.Door != DoorNone {
		ws := req.Workspace
		if ws == "" {
			ws = req.Principal.Home
		}
		op := string(req.Op)
		if op == "" {
			op = opNone
		}
		id := resp.RequestID // a replay's is the first answer's, as the client sees it
		if id == "" {
			id = req.RequestID
		}
		s.cfg.Logger.LogAttrs(context.Background(), slog.LevelInfo, "request", slog.String("request_id", id),
			slog.String("workspace", ws), slog.String("door", req.Door.String()), slog.String("op", op),
			slog.Int("status", resp.Status), slog.Duration("duration", took))
	}
	return resp
}
