package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/internal/jsontest"
	"github.com/plaudit/plaudit/internal/openapitest"
)

// adminKey is the PLAUDIT_BOOTSTRAP_KEY of every test server.
const adminKey = "pl_test_admin_key_0123456789abcdef"

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

// startServer starts a Server on loopback ports; an empty DataDir gets a
// fresh t.TempDir(). The server is closed when the test ends (Close is safe
// to call again after an explicit Close).
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	// Built before the server starts, so its first request is not slowed by
	// parsing the document (seconds under -race) in a test that counts time.
	if _, err := theOpenAPI(); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.NATSListen = "127.0.0.1:0"
	if cfg.BootstrapKey == "" {
		cfg.BootstrapKey = adminKey
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start(%s): %v", cfg.DataDir, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// client talks to one server as one key over a real loopback socket. Every
// response must carry an X-Request-Id, never reused.
type client struct {
	t    *testing.T
	base string
	key  string
	hc   *http.Client
	seen *sync.Map // request ids already returned
}

func newClient(t *testing.T, s *Server, key string) *client {
	return &client{t: t, base: "http://" + s.HTTPAddr(), key: key,
		hc: &http.Client{Timeout: 30 * time.Second}, seen: &sync.Map{}}
}

// as returns a client of the same server using another key ("" sends no
// Authorization header).
func (c *client) as(key string) *client {
	cc := *c
	cc.key = key
	return &cc
}

// on returns a client of the same server that reports failures to t.
func (c *client) on(t *testing.T) *client {
	cc := *c
	cc.t = t
	return &cc
}

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

// request sends one request. A non-empty body is sent as application/json
// unless hdr sets Content-Type. The answer is held to the OpenAPI document
// (the request is not: tests send invalid ones on purpose).
func (c *client) request(method, path, body string, hdr map[string]string) response {
	c.t.Helper()
	req, err := c.build(method, path, body, hdr)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	sent := openapitest.Exchange{Method: method, URL: req.URL.String(), Header: req.Header.Clone(), Body: []byte(body)}
	r, err := c.send(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	rid := r.header.Get("X-Request-Id")
	if rid == "" {
		c.t.Fatalf("%s %s: %d response has no X-Request-Id", method, path, r.status)
	}
	if _, dup := c.seen.LoadOrStore(rid, true); dup {
		c.t.Fatalf("%s %s: X-Request-Id %q was already used by an earlier response", method, path, rid)
	}
	if !jsontest.Valid(r.body) {
		c.t.Fatalf("%s %s: %d response body is not JSON in UTF-8: %q", method, path, r.status, r.body)
	}
	sent.Status, sent.RespHeader, sent.RespBody = r.status, r.header, r.body
	c.conform(sent, false)
	return r
}

// conform fails the test unless x's answer (and request, when
// validRequest) is what the OpenAPI document says.
func (c *client) conform(x openapitest.Exchange, validRequest bool) {
	c.t.Helper()
	if strings.HasSuffix(x.URL, "/openapi.json") {
		return // the document itself, checked byte for byte in TestOpenAPIConformance
	}
	oa, err := theOpenAPI()
	if err != nil {
		c.t.Fatal(err)
	}
	if v := oa.Check(x, validRequest, errorSchema); v != "" {
		c.t.Errorf("%s %s: %d answer does not conform to openapi.json:\n%s\nrequest %s\nanswer %s",
			x.Method, x.URL, x.Status, v, clip(x.Body), clip(x.RespBody))
	}
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

// The JSON-walking helpers, shared with the other door tests.
var (
	at     = jsontest.At
	str    = jsontest.Str
	list   = jsontest.List
	expect = jsontest.Expect
)

// rawSend sends one request and returns the answer or the transport error.
// Unlike client.request it neither fails the test (goroutines may call it)
// nor insists on a fresh X-Request-Id (a replay repeats the first one).
func (c *client) rawSend(method, path, body string, hdr map[string]string) (response, error) {
	req, err := c.build(method, path, body, hdr)
	if err != nil {
		return response{}, err
	}
	return c.send(req)
}

// build makes a request as the client sends it.
func (c *client) build(method, path, body string, hdr map[string]string) (*http.Request, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req, nil
}

// clip shortens a body quoted in a failure.
func clip(b []byte) []byte {
	if len(b) > 600 {
		return append(b[:600:600], "…"...)
	}
	return b
}

func (c *client) send(req *http.Request) (response, error) {
	resp, err := c.hc.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}
