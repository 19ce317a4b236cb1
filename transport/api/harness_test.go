package api_test

// The in-process harness: the service over a real Pebble store, the
// tenancy and the agent actors, driven by requests spelled as the HTTP door
// receives them (method, path with query, headers, body) and turned into an
// api.Request the way transport/httpdoor does it, without a socket. What
// only a socket shows (framing, limits, media types, status lines) is
// tested in transport/httpdoor.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/pebblelog"
	"github.com/plaudit/plaudit/transport/api"
	"github.com/plaudit/plaudit/transport/httpdoor"
	"github.com/plaudit/plaudit/transport/judging"
	"github.com/plaudit/plaudit/transport/tenancy"

	"github.com/plaudit/plaudit/internal/jsontest"
)

// adminKey is the bootstrap key of every harness.
const adminKey = "pl_test_admin_key_0123456789abcdef"

// actorSeed is the actors' Seed: selection draws the same numbers on every
// run, so the selection tests are deterministic.
const actorSeed = 0x5eed

// clock is a settable time source for Config.Now, so rewards (matured,
// late signals, matures_at) are computed at instants the test chooses.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// config is what a test tunes; zero fields take the server's defaults.
type config struct {
	SnapshotEvery    int
	SnapshotInterval time.Duration
	IdleTimeout      time.Duration
	IdempotencyTTL   time.Duration
	Judge            judging.JudgeFunc // seed 003's model judges; nil fails every judge request
	JudgeDeadline    time.Duration
	JudgeMaxRequest  int
	RequestTimeout   time.Duration // the actors' RequestTimeout
	SelectSyncWindow time.Duration // the actors' SelectSyncWindow
	// ActorStore, when set, wraps the store the agent actors write through
	// (a faultStore), so a test decides when and whether appends land.
	ActorStore func(persist.Store) persist.Store
	// Router, when set, makes the harness a cluster node (api.Config.Router).
	Router api.Router
}

// harness is one Plaudit without doors: store, tenancy, actors and service
// on a data directory of the test's, on the harness clock.
type harness struct {
	t   *testing.T
	dir string
	cfg config
	clk *clock

	store *pebblelog.Store
	ten   *tenancy.Tenancy
	reg   *actors.Registry
	svc   *api.Service

	seen *sync.Map // request ids already returned, across restarts
}

// newHarness opens a harness on a fresh t.TempDir(); it is closed when the
// test ends.
func newHarness(t *testing.T, cfg config) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), cfg: cfg, clk: newClock(), seen: &sync.Map{}}
	h.open()
	t.Cleanup(func() {
		if err := h.close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return h
}

// open opens the store, the tenancy (bootstrap key adminKey), the actors
// and the service, as server.Start does, and marks the service ready.
func (h *harness) open() {
	h.t.Helper()
	store, err := pebblelog.Open(h.dir, pebblelog.Options{})
	if err != nil {
		h.t.Fatalf("pebblelog.Open(%s): %v", h.dir, err)
	}
	ten, _, err := tenancy.Open(store, adminKey, h.clk.Now)
	if err != nil {
		_ = store.Close()
		h.t.Fatalf("tenancy.Open: %v", err)
	}
	var actorStore persist.Store = store
	if h.cfg.ActorStore != nil {
		actorStore = h.cfg.ActorStore(store)
	}
	reg := actors.New(actors.Config{Store: actorStore, RequestTimeout: h.cfg.RequestTimeout, SnapshotEvery: h.cfg.SnapshotEvery,
		SnapshotInterval: h.cfg.SnapshotInterval, IdleTimeout: h.cfg.IdleTimeout,
		SelectSyncWindow: h.cfg.SelectSyncWindow, Now: h.clk.Now, Seed: actorSeed})
	svc, err := api.New(api.Config{IdempotencyTTL: h.cfg.IdempotencyTTL, Now: h.clk.Now,
		Judge: h.cfg.Judge, JudgeDeadline: h.cfg.JudgeDeadline, JudgeMaxRequest: h.cfg.JudgeMaxRequest, Router: h.cfg.Router}, reg, ten, store)
	if err != nil {
		reg.Close()
		_ = store.Close()
		h.t.Fatalf("api.New: %v", err)
	}
	svc.SetReady()
	h.store, h.ten, h.reg, h.svc = store, ten, reg, svc
}

// close closes the service, the actors (after their in-flight writes) and
// the store, in that order; closing a closed harness does nothing.
func (h *harness) close() error {
	if h.svc == nil {
		return nil
	}
	h.svc.Close()
	h.reg.Close()
	err := h.store.Close()
	h.store, h.ten, h.reg, h.svc = nil, nil, nil, nil
	return err
}

// restart closes the harness and opens it again on the same directory.
func (h *harness) restart() {
	h.t.Helper()
	if err := h.close(); err != nil {
		h.t.Fatalf("close: %v", err)
	}
	h.open()
}

// waitPassivated waits until every agent actor has passivated.
func waitPassivated(t *testing.T, h *harness) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.reg.Live() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d agent actors still live 5s after the last request (IdleTimeout %v)",
				h.reg.Live(), h.cfg.IdleTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// client sends requests to the harness's service as one key. Every
// response must carry an X-Request-Id, never reused.
type client struct {
	t   *testing.T
	h   *harness
	key string
}

// client returns a client with key ("" sends no Authorization header).
func (h *harness) client(key string) *client { return &client{t: h.t, h: h, key: key} }

// as returns a client of the same harness using another key ("" sends no
// Authorization header).
func (c *client) as(key string) *client {
	cc := *c
	cc.key = key
	return &cc
}

// on returns a client of the same harness that reports failures to t.
func (c *client) on(t *testing.T) *client {
	cc := *c
	cc.t = t
	return &cc
}

// response is an api.Response as the HTTP door writes it.
type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body as a JSON object.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response body is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// request sends one request. A non-empty body is application/json unless
// hdr sets Content-Type.
func (c *client) request(method, path, body string, hdr map[string]string) response {
	c.t.Helper()
	r, err := c.rawSend(method, path, body, hdr)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return c.fresh(method, path, r)
}

// fresh fails the test unless r carries an X-Request-Id that no earlier
// response of the harness carried; it returns r.
func (c *client) fresh(method, path string, r response) response {
	c.t.Helper()
	rid := r.header.Get("X-Request-Id")
	if rid == "" {
		c.t.Fatalf("%s %s: %d response has no X-Request-Id", method, path, r.status)
	}
	if _, dup := c.h.seen.LoadOrStore(rid, true); dup {
		c.t.Fatalf("%s %s: X-Request-Id %q was already used by an earlier response", method, path, rid)
	}
	return r
}

// must sends a request and fails the test unless the status is want; it
// returns the decoded body.
func (c *client) must(want int, method, path, body string) map[string]any {
	c.t.Helper()
	r := c.request(method, path, body, nil)
	if r.status != want {
		c.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, want, r.body)
	}
	return r.json(c.t)
}

// putObjective PUTs an objective; SPEC §5 does not fix 200 or 201 for it,
// so either is success. It returns the decoded body.
func (c *client) putObjective(agent, body string) map[string]any {
	c.t.Helper()
	r := c.request("PUT", "/api/v1/agents/"+agent+"/objective", body, nil)
	if r.status != 200 && r.status != 201 {
		c.t.Fatalf("PUT objective of %s: status %d; body %s", agent, r.status, r.body)
	}
	return r.json(c.t)
}

// raw sends a GET and returns the body, failing unless it is 200.
func (c *client) raw(path string) string {
	c.t.Helper()
	r := c.request("GET", path, "", nil)
	if r.status != 200 {
		c.t.Fatalf("GET %s: status %d; body %s", path, r.status, r.body)
	}
	return string(r.body)
}

// rawSend sends one request and returns the answer, or an error for a
// request the harness cannot express. Unlike client.request it neither
// fails the test (goroutines may call it) nor insists on a fresh
// X-Request-Id (a replay repeats the first one).
func (c *client) rawSend(method, path, body string, hdr map[string]string) (response, error) {
	p, err := c.build(method, path, body, hdr)
	if err != nil {
		return response{}, err
	}
	return p.send(), nil
}

// pending is a request admitted and stamped with its start order, not yet
// handed to the service (or already answered, when admission refused it).
type pending struct {
	t      *testing.T
	svc    *api.Service
	req    *api.Request
	answer *api.Response // set when admission answered the request
}

// build admits a request as the HTTP door does (httpdoor.Door.Handle):
// request id and start stamp first, then authentication, body and
// Idempotency-Key (POST and PUT only), route and query. Its send hands it
// to the service. The Content-Type, body size and framing checks are the
// door's and are tested there: a body the door would refuse as not JSON is
// an error here.
func (c *client) build(method, path, body string, hdr map[string]string) (*pending, error) {
	svc := c.h.svc
	h := http.Header{}
	if body != "" {
		h.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		h.Set("Authorization", "Bearer "+c.key)
	}
	for k, v := range hdr {
		h.Set(k, v)
	}
	rawPath, rawQuery, _ := strings.Cut(path, "?")
	query, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, fmt.Errorf("query %q: %v", rawQuery, err)
	}

	req := &api.Request{RequestID: svc.RequestID(), Started: svc.Stamp()}
	routeErr := httpdoor.Route(req, method, rawPath) // sets the error shape, route or not
	p := &pending{t: c.t, svc: svc, req: req}
	refuse := func(err error) (*pending, error) {
		resp := svc.Error(req, err)
		p.answer = &resp
		return p, nil
	}
	if !svc.Ready() {
		return refuse(api.ErrRecovering)
	}
	principal, err := svc.Tenancy().Authenticate(h.Get("Authorization"))
	if err != nil {
		return refuse(err)
	}
	req.Principal = principal
	req.Prefer = h.Get("Prefer")
	if method == "POST" || method == "PUT" {
		if body != "" && !isJSON(h.Get("Content-Type")) {
			return nil, fmt.Errorf("Content-Type %q: the HTTP door answers it (test it in transport/httpdoor)", h.Get("Content-Type"))
		}
		if body != "" {
			req.Body = []byte(body)
		}
		if v, ok := h["Idempotency-Key"]; ok {
			req.IdempotencyKey = append([]byte{}, v[0]...) // present, even when empty
		}
	}
	if routeErr != nil {
		return refuse(routeErr)
	}
	req.Query = queryArgs(query)
	return p, nil
}

// queryArgs are a URL's query arguments as api.Arguments, read as the
// HTTP door reads them: the first value of each.
type queryArgs url.Values

func (q queryArgs) Arg(name string) string { return url.Values(q).Get(name) }

// send hands the request to the service and returns its answer as the
// HTTP door writes it. Every answer of every test must be JSON in UTF-8:
// one that is not fails the test (with Errorf, which goroutines may call).
func (p *pending) send() response {
	resp := p.answer
	if resp == nil {
		r := p.svc.Handle(p.req)
		resp = &r
	}
	if !jsontest.Valid(resp.Body) {
		p.t.Errorf("%s answered %d with a body that is not JSON in UTF-8: %q", p.req.Op, resp.Status, resp.Body)
	}
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/json")
	if resp.RequestID != "" {
		hdr.Set("X-Request-Id", resp.RequestID)
	}
	if resp.RetryAfter > 0 {
		hdr.Set("Retry-After", strconv.Itoa(resp.RetryAfter))
	}
	return response{status: resp.Status, header: hdr, body: bytes.Clone(resp.Body)}
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// The JSON-walking helpers, shared with the other door tests.
var (
	at         = jsontest.At
	str        = jsontest.Str
	num        = jsontest.Num
	list       = jsontest.List
	expect     = jsontest.Expect
	ts         = jsontest.TS
	expectTime = jsontest.ExpectTime
)

// apiError checks an error answer of the /api/v1 and /v1/jobs doors: the
// status, error.code, a message naming want, and request_id equal to the
// X-Request-Id header.
func apiError(t *testing.T, r response, status int, code, want string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	body := r.json(t)
	expect(t, body, code, "error", "code")
	if msg := str(t, body, "error", "message"); !strings.Contains(msg, want) {
		t.Errorf("message %q does not name %q", msg, want)
	}
	if rid := str(t, body, "error", "request_id"); rid == "" || rid != r.header.Get("X-Request-Id") {
		t.Errorf("body request_id %q != X-Request-Id %q", rid, r.header.Get("X-Request-Id"))
	}
}

// rpcStatus checks a seed-004 error: the HTTP status, google.rpc.Status
// {code, message, details: []} with the gRPC code, a message naming want.
func rpcStatus(t *testing.T, res response, status int, code float64, want string) {
	t.Helper()
	if res.status != status {
		t.Fatalf("status %d, want %d; body %s", res.status, status, res.body)
	}
	st := res.json(t)
	expect(t, st, code, "code")
	if msg := str(t, st, "message"); !strings.Contains(msg, want) {
		t.Errorf("message %q does not name %q", msg, want)
	}
	if d := list(t, st, "details"); len(d) != 0 {
		t.Errorf("details = %v, want []", d)
	}
	if _, has := st["error"]; has {
		t.Errorf("seed-004 door answered the /api/v1 error shape: %s", res.body)
	}
}
