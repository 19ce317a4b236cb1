package httpdoor

// What only the HTTP door shows, on its real fasthttp server over an
// in-memory listener (the same server code a TCP socket reaches): framing,
// body limits, media types, the error shape of each path prefix, status
// lines and headers, /healthz, timeouts. The behaviour of the service behind
// it is tested in process in transport/api.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/internal/jsontest"
	"github.com/plaudit/plaudit/internal/logtest"
	"github.com/plaudit/plaudit/internal/openapitest"
	"github.com/plaudit/plaudit/persist/pebblelog"
	"github.com/plaudit/plaudit/transport/api"
	"github.com/plaudit/plaudit/transport/tenancy"
)

const adminKey = "pl_test_admin_key_0123456789abcdef"

// doorEnv is a door over a real service (Pebble, tenancy, actors).
type doorEnv struct {
	t    *testing.T
	svc  *api.Service
	dial func() (net.Conn, error) // a new connection to the door
	hc   *http.Client
	seen map[string]bool // X-Request-Ids answered so far
}

// newDoorEnv serves cfg's door over a fresh service on an in-memory
// listener; ready marks the service ready (as server.Start does once the
// tenancy is loaded).
func newDoorEnv(t *testing.T, cfg Config, ready bool) *doorEnv {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	return serveDoorEnv(t, cfg, ready, ln, ln.Dial)
}

// newTCPDoorEnv is a ready newDoorEnv on a loopback socket, for what only
// a real connection shows (one closed without a byte written).
func newTCPDoorEnv(t *testing.T, cfg Config) *doorEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveDoorEnv(t, cfg, true, ln, func() (net.Conn, error) { return net.Dial("tcp", ln.Addr().String()) })
}

func serveDoorEnv(t *testing.T, cfg Config, ready bool, ln net.Listener, dial func() (net.Conn, error)) *doorEnv {
	t.Helper()
	// Built before the door serves, so its first request is not slowed by
	// parsing the document (seconds under -race) in a test that counts time.
	if _, err := theOpenAPI(); err != nil {
		t.Fatal(err)
	}
	store, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ten, _, err := tenancy.Open(store, adminKey, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	reg := actors.New(actors.Config{Store: store})
	svc, err := api.New(api.Config{}, reg, ten, store)
	if err != nil {
		t.Fatal(err)
	}
	if ready {
		svc.SetReady()
	}
	d := New(cfg, svc)
	served := make(chan error, 1)
	go func() { served <- d.Serve(ln) }()
	e := &doorEnv{t: t, svc: svc, dial: dial, seen: map[string]bool{}}
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return dial() }}
	e.hc = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		if err := d.Shutdown(); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		// Shutdown closes only the listeners Serve has registered: when it
		// runs before the Serve goroutine got that far (a test that made no
		// request), Serve would accept on ln forever.
		_ = ln.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		svc.Close()
		reg.Close()
		if err := store.Close(); err != nil {
			t.Errorf("store Close: %v", err)
		}
	})
	return e
}

type response struct {
	line   string // the status line, e.g. "HTTP/1.1 201 Created"
	status int
	header http.Header
	body   []byte
	close  bool // Connection: close
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response body is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// do sends a request with Go's HTTP client. A non-empty body is
// application/json unless hdr sets Content-Type ("" removes it); key ""
// sends no Authorization.
func (e *doorEnv) do(t *testing.T, key, method, path, body string, hdr map[string]string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://plaudit.test"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := e.check(t, response{line: resp.Proto + " " + resp.Status, status: resp.StatusCode, header: resp.Header, body: b})
	conform(t, openapitest.Exchange{Method: method, URL: req.URL.String(), Header: req.Header, Body: []byte(body),
		Status: r.status, RespHeader: r.header, RespBody: r.body})
	return r
}

// raw writes a request byte for byte on a new connection and reads one
// response off it.
func (e *doorEnv) raw(t *testing.T, request string) response {
	t.Helper()
	conn, err := e.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the response to %q: %v", request, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return e.check(t, response{line: resp.Proto + " " + resp.Status, status: resp.StatusCode, header: resp.Header, body: b, close: resp.Close})
}

// check fails unless every response is JSON, in type and in body, and
// carries a fresh X-Request-Id.
func (e *doorEnv) check(t *testing.T, r response) response {
	t.Helper()
	rid := r.header.Get("X-Request-Id")
	if rid == "" {
		t.Fatalf("%s response has no X-Request-Id; body %s", r.line, r.body)
	}
	if e.seen[rid] {
		t.Fatalf("X-Request-Id %q was already used by an earlier response", rid)
	}
	e.seen[rid] = true
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", r.line, ct)
	}
	if !jsontest.Valid(r.body) {
		t.Errorf("%s: the body is not JSON in UTF-8: %q", r.line, r.body)
	}
	return r
}

// shape says which error body a response must carry.
type shape int

const (
	jsonShape shape = iota // {"error": {code, message, request_id}}
	rpcShape               // google.rpc.Status {code, message, details}
)

// expectError checks an error answer: its status, and in its shape the
// code (error.code, or the google.rpc code), a message naming want, and
// (JSON) request_id equal to X-Request-Id or (RPC) no "error" member and
// empty details.
func expectError(t *testing.T, r response, status int, sh shape, code any, want string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	body := r.json(t)
	var msg any
	switch sh {
	case jsonShape:
		e, ok := body["error"].(map[string]any)
		if !ok {
			t.Fatalf("no error object in %s", r.body)
		}
		if e["code"] != code {
			t.Errorf("error.code %v, want %v", e["code"], code)
		}
		if rid := e["request_id"]; rid != r.header.Get("X-Request-Id") {
			t.Errorf("body request_id %v != X-Request-Id %q", rid, r.header.Get("X-Request-Id"))
		}
		msg = e["message"]
	case rpcShape:
		if body["code"] != code {
			t.Errorf("code %v, want %v; body %s", body["code"], code, r.body)
		}
		if d, ok := body["details"].([]any); !ok || len(d) != 0 {
			t.Errorf("details = %v, want []", body["details"])
		}
		if _, has := body["error"]; has {
			t.Errorf("a /v1/workspaces path answered the {\"error\"} shape: %s", r.body)
		}
		msg = body["message"]
	}
	if s, ok := msg.(string); !ok || s == "" || !strings.Contains(s, want) {
		t.Errorf("message %v does not name %q", msg, want)
	}
}

// fixture makes an agent and a run as the admin; it returns their ids.
func (e *doorEnv) fixture(t *testing.T) (agent, run string) {
	t.Helper()
	r := e.do(t, adminKey, "POST", "/api/v1/agents", `{"name": "door"}`, nil)
	if r.status != 201 {
		t.Fatalf("create agent: %d %s", r.status, r.body)
	}
	agent = r.json(t)["id"].(string)
	r = e.do(t, adminKey, "POST", "/api/v1/agents/"+agent+"/runs", `{}`, nil)
	if r.status != 201 {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	return agent, r.json(t)["id"].(string)
}

// TestHealthzBeforeAndAfterReady: until the service is ready /healthz is
// 503 and every other request is 503 unavailable with Retry-After, in its
// path's error shape, before authentication; once ready /healthz is 200.
func TestHealthzBeforeAndAfterReady(t *testing.T) {
	e := newDoorEnv(t, Config{}, false)
	r := e.do(t, "", "GET", "/healthz", "", nil)
	if r.status != 503 || string(r.body) != `{"status":"recovering"}` {
		t.Fatalf("/healthz before ready: %d %s, want 503 recovering", r.status, r.body)
	}
	for _, tc := range []struct {
		name, key, method, path, body string
		sh                            shape
		code                          any
	}{
		{"a read", adminKey, "GET", "/api/v1/agents", "", jsonShape, "unavailable"},
		{"no key", "", "GET", "/api/v1/agents", "", jsonShape, "unavailable"},
		{"a report", adminKey, "POST", "/v1/jobs/run_x/rewards", `{"scorer": "s", "value": 1}`, jsonShape, "unavailable"},
		{"a workspace path", adminKey, "GET", "/v1/workspaces", "", rpcShape, 14.0},
		{"no such route", adminKey, "GET", "/no/such/route", "", jsonShape, "unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, tc.key, tc.method, tc.path, tc.body, nil)
			expectError(t, r, 503, tc.sh, tc.code, "recovering")
			if ra := r.header.Get("Retry-After"); ra != "1" {
				t.Errorf("Retry-After %q, want 1", ra)
			}
			if r.line != "HTTP/1.1 503 Service Unavailable" {
				t.Errorf("status line %q", r.line)
			}
		})
	}

	e.svc.SetReady()
	r = e.do(t, "", "GET", "/healthz", "", nil)
	if r.status != 200 || string(r.body) != `{"status":"ok"}` {
		t.Fatalf("/healthz after ready: %d %s, want 200 ok", r.status, r.body)
	}
	r = e.do(t, adminKey, "GET", "/api/v1/agents", "", nil)
	if r.status != 200 || r.header.Get("Retry-After") != "" {
		t.Fatalf("GET /api/v1/agents after ready: %d (Retry-After %q) %s", r.status, r.header.Get("Retry-After"), r.body)
	}
}

// TestBodyOverLimitIs413: a body over MaxBody is 413 body_too_large in its
// path's error shape, with a matching request id, and is not applied,
// whether it is declared by Content-Length (refused unread) or sent
// chunked; a body of exactly MaxBody bytes is accepted.
func TestBodyOverLimitIs413(t *testing.T) {
	const limit = 512
	e := newDoorEnv(t, Config{MaxBody: limit}, true)
	a, r := e.fixture(t)
	signals := func(t *testing.T) int {
		res := e.do(t, adminKey, "GET", "/api/v1/agents/"+a+"/runs/"+r+"/signals", "", nil)
		if res.status != 200 {
			t.Fatalf("signals: %d %s", res.status, res.body)
		}
		return len(res.json(t)["items"].([]any))
	}
	// sized is a signal body of exactly n bytes (JSON allows the padding).
	sized := func(n int) string {
		b := `{"kind": "human.rating", "value": 1, "run_id": "` + r + `"`
		return b + strings.Repeat(" ", n-len(b)-1) + `}`
	}
	big := sized(limit + 1)
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		sh         shape
		code       any
	}{
		{"Content-Length on /api/v1", "/api/v1/agents/" + a + "/signals", nil, jsonShape, "body_too_large"},
		{"chunked on /api/v1", "/api/v1/agents/" + a + "/signals", map[string]string{"Transfer-Encoding": "chunked"}, jsonShape, "body_too_large"},
		{"Content-Length on /v1/jobs", "/v1/jobs/" + r + "/rewards", nil, jsonShape, "body_too_large"},
		{"Content-Length on /v1/workspaces", "/v1/workspaces/default/objectives/" + r + "/feedback", nil, rpcShape, 8.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var res response
			if tc.hdr["Transfer-Encoding"] == "chunked" {
				res = e.raw(t, "POST "+tc.path+" HTTP/1.1\r\nHost: plaudit.test\r\nAuthorization: Bearer "+adminKey+
					"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+
					strconv.FormatInt(int64(len(big)), 16)+"\r\n"+big+"\r\n0\r\n\r\n")
			} else {
				res = e.do(t, adminKey, "POST", tc.path, big, nil)
			}
			expectError(t, res, 413, tc.sh, tc.code, "too large")
			if n := signals(t); n != 0 {
				t.Errorf("run has %d signals after a rejected body, want 0", n)
			}
		})
	}
	if res := e.do(t, adminKey, "POST", "/api/v1/agents/"+a+"/signals", sized(limit), nil); res.status != 201 {
		t.Fatalf("a body of exactly %d bytes: %d %s, want 201", limit, res.status, res.body)
	}
	if n := signals(t); n != 1 {
		t.Errorf("run has %d signals, want 1", n)
	}
}

// TestWrongContentTypeIs415: a body not declared JSON is 415
// unsupported_media_type naming Content-Type, even when the body is valid
// JSON, in its path's error shape, and changes nothing; application/json
// with parameters and +json types are JSON, and an empty body needs no
// Content-Type.
func TestWrongContentTypeIs415(t *testing.T) {
	e := newDoorEnv(t, Config{}, true)
	a, r := e.fixture(t)
	state := func(t *testing.T) string {
		var b strings.Builder
		for _, p := range []string{"/api/v1/agents/" + a + "/runs/" + r + "/signals", "/v1/jobs/" + r + "/rewards",
			"/api/v1/agents/" + a + "/objective", "/v1/workspaces/default/objectives/" + r + "/feedback"} {
			res := e.do(t, adminKey, "GET", p, "", nil)
			if res.status != 200 {
				t.Fatalf("GET %s: %d %s", p, res.status, res.body)
			}
			b.Write(res.body)
			b.WriteByte('\n')
		}
		return b.String()
	}
	before := state(t)
	report := `{"scorer": "grader", "value": 1}`
	signal := `{"kind": "human.rating", "value": 1, "run_id": "` + r + `"}`
	objective := `{"definition": {"terms": [{"signal": "human.rating", "weight": 1}]}}`
	feedback := `{"metadata": {}, "data": {"score": 1}}`
	jobs, fb := "/v1/jobs/"+r+"/rewards", "/v1/workspaces/default/objectives/"+r+"/feedback"
	for _, tc := range []struct {
		name, contentType, method, path, body string
		sh                                    shape
		code                                  any
	}{
		{"report as text/plain", "text/plain", "POST", jobs, report, jsonShape, "unsupported_media_type"},
		{"report as a form", "application/x-www-form-urlencoded", "POST", jobs, report, jsonShape, "unsupported_media_type"},
		{"report as multipart", "multipart/form-data; boundary=x", "POST", jobs, report, jsonShape, "unsupported_media_type"},
		{"report as XML", "application/xml", "POST", jobs, report, jsonShape, "unsupported_media_type"},
		{"report without Content-Type", "", "POST", jobs, report, jsonShape, "unsupported_media_type"},
		{"signal as text/plain", "text/plain", "POST", "/api/v1/agents/" + a + "/signals", signal, jsonShape, "unsupported_media_type"},
		{"objective as a form", "application/x-www-form-urlencoded", "PUT", "/api/v1/agents/" + a + "/objective", objective, jsonShape, "unsupported_media_type"},
		{"feedback as text/plain", "text/plain", "POST", fb, feedback, rpcShape, 3.0},
		{"report as JSON in Latin-1", "application/json; charset=iso-8859-1", "POST", jobs, report, jsonShape, "unsupported_media_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(t, adminKey, tc.method, tc.path, tc.body, map[string]string{"Content-Type": tc.contentType})
			expectError(t, res, 415, tc.sh, tc.code, "Content-Type")
			if after := state(t); after != before {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	// The route comes first: a body of any type to an unknown path is 404,
	// and with a method the path does not take 405.
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{"POST", "/api/v1/nope", 404, "not_found"},
		{"PUT", "/api/v1/agents", 405, "method_not_allowed"},
	} {
		res := e.do(t, adminKey, tc.method, tc.path, report, map[string]string{"Content-Type": "text/plain"})
		expectError(t, res, tc.status, jsonShape, tc.code, "")
		if tc.status == 405 && res.header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", tc.method, tc.path)
		}
	}
	for _, tc := range []struct{ name, contentType, path, body string }{
		{"JSON with a charset", "application/json; charset=utf-8", jobs, `{"scorer": "charset", "value": 1}`},
		{"JSON with a charset in capitals", "application/json; charset=UTF-8", jobs, `{"scorer": "charset-caps", "value": 1}`},
		{"a +json type", "application/vnd.plaudit+json", jobs, `{"scorer": "plus-json", "value": 1}`},
		{"an empty body without Content-Type", "", "/api/v1/agents/" + a + "/runs", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.do(t, adminKey, "POST", tc.path, tc.body, map[string]string{"Content-Type": tc.contentType})
			if res.status != 201 {
				t.Fatalf("status %d, want 201; body %s", res.status, res.body)
			}
		})
	}
}

// TestErrorShapePerPathPrefix: errors under /v1/workspaces are
// google.rpc.Status, everywhere else {"error": {code, message,
// request_id}}, for the door's own refusals (authentication, route,
// method, malformed requests) as for the service's.
func TestErrorShapePerPathPrefix(t *testing.T) {
	e := newDoorEnv(t, Config{}, true)
	for _, tc := range []struct {
		name, key, method, path string
		status                  int
		sh                      shape
		code                    any
	}{
		{"no key on /api/v1", "", "GET", "/api/v1/agents", 401, jsonShape, "unauthenticated"},
		{"no key on /v1/jobs", "", "GET", "/v1/jobs/run_x/rewards", 401, jsonShape, "unauthenticated"},
		{"no key on /v1/workspaces", "", "GET", "/v1/workspaces", 401, rpcShape, 16.0},
		{"unknown key on /v1/workspaces/{ws}", "pl_not_a_key", "GET", "/v1/workspaces/default/objectives/run_x", 401, rpcShape, 16.0},
		{"unknown route under /api/v1", adminKey, "GET", "/api/v1/nope", 404, jsonShape, "not_found"},
		{"unknown route at the root", adminKey, "GET", "/nope", 404, jsonShape, "not_found"},
		{"unknown route under /v1/workspaces", adminKey, "GET", "/v1/workspaces/default/nope", 404, rpcShape, 5.0},
		{"wrong method on /api/v1", adminKey, "DELETE", "/api/v1/agents", 405, jsonShape, "method_not_allowed"},
		{"wrong method on /v1/jobs", adminKey, "PUT", "/v1/jobs/run_x/rewards", 405, jsonShape, "method_not_allowed"},
		{"wrong method on /v1/workspaces", adminKey, "DELETE", "/v1/workspaces", 405, rpcShape, 12.0},
		{"unknown job on /v1/jobs", adminKey, "GET", "/v1/jobs/run_01ZZZZZZZZZZZZZZZZZZZZZZZZ/rewards", 404, jsonShape, "not_found"},
		{"unknown objective on /v1/workspaces", adminKey, "GET", "/v1/workspaces/default/objectives/run_01ZZZZZZZZZZZZZZZZZZZZZZZZ", 404, rpcShape, 5.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectError(t, e.do(t, tc.key, tc.method, tc.path, "", nil), tc.status, tc.sh, tc.code, "")
		})
	}
	// A request that cannot be parsed is 400 invalid_request. Its head is
	// fasthttp's to parse, and a head it cannot parse is answered by the
	// door's transport error handler in the {"error"} shape, even under
	// /v1/workspaces: the path is not known. The body the door reads itself
	// (fasthttp streams it), so a malformed chunk is answered in its path's
	// shape, as is a body over the limit (TestBodyOverLimitIs413).
	head := "POST %s HTTP/1.1\r\nHost: plaudit.test\r\nAuthorization: Bearer " + adminKey + "\r\nContent-Type: application/json\r\n"
	for _, tc := range []struct {
		name, request string
		sh            shape
		code          any
	}{
		{"bad chunk on /api/v1", fmt.Sprintf(head, "/api/v1/agents") + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", jsonShape, "invalid_request"},
		{"bad Content-Length on /v1/workspaces", fmt.Sprintf(head, "/v1/workspaces") + "Content-Length: abc\r\n\r\n", jsonShape, "invalid_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.raw(t, tc.request)
			expectError(t, r, 400, tc.sh, tc.code, "malformed request")
			// fasthttp's parse error quotes the request head; the answer
			// must not echo the key in it.
			if strings.Contains(string(r.body), adminKey) {
				t.Fatalf("the answer echoes the API key: %s", r.body)
			}
		})
	}
}

// TestNotFoundVsMethodNotAllowed: a path no route has is 404; a path a
// route has, asked with another method, is 405, decided by the route table
// before any agent is looked up (so an unknown agent with a wrong method
// is 405, with the right one 404).
func TestNotFoundVsMethodNotAllowed(t *testing.T) {
	e := newDoorEnv(t, Config{}, true)
	a, _ := e.fixture(t)
	const unknown = "agt_01ZZZZZZZZZZZZZZZZZZZZZZZZ"
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
		want         string // the message names it
	}{
		{"GET", "/api/v1/agents/" + a + "/nope", 404, "not_found", "no such route"},
		{"GET", "/api/v1/agents/" + unknown + "/nope", 404, "not_found", "no such route"},
		{"DELETE", "/api/v1/agents/" + a, 405, "method_not_allowed", "DELETE"},
		{"DELETE", "/api/v1/agents/" + unknown, 405, "method_not_allowed", "DELETE"},
		{"GET", "/api/v1/agents/" + unknown + "/signals", 405, "method_not_allowed", "GET"},
		{"PATCH", "/api/v1/agents/" + unknown + "/objective", 405, "method_not_allowed", "PATCH"},
		{"GET", "/api/v1/agents/" + unknown, 404, "not_found", unknown},
		{"POST", "/api/v1/agents/" + unknown + "/signals", 404, "not_found", unknown},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			body := ""
			if tc.method == "POST" {
				body = `{"kind": "human.rating", "value": 1, "run_id": "run_x"}`
			}
			expectError(t, e.do(t, adminKey, tc.method, tc.path, body, nil), tc.status, jsonShape, tc.code, tc.want)
		})
	}
}

// TestStatusLinesAndHeaders: the door writes HTTP/1.1 status lines with
// their reason phrases, Server: plaudit, Content-Type: application/json, an
// exact Content-Length and X-Request-Id, on successes and on errors alike.
func TestStatusLinesAndHeaders(t *testing.T) {
	e := newDoorEnv(t, Config{MaxBody: 512}, true)
	a, _ := e.fixture(t)
	auth := "Authorization: Bearer " + adminKey + "\r\n"
	post := func(path, ct, body string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: plaudit.test\r\n" + auth + "Content-Type: " + ct +
			"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	get := func(method, path string) string {
		return method + " " + path + " HTTP/1.1\r\nHost: plaudit.test\r\n" + auth + "\r\n"
	}
	for _, tc := range []struct {
		name, request, line string
	}{
		{"created", post("/api/v1/agents", "application/json", `{"name": "lines"}`), "HTTP/1.1 201 Created"},
		{"ok", get("GET", "/api/v1/agents/"+a), "HTTP/1.1 200 OK"},
		{"healthz", "GET /healthz HTTP/1.1\r\nHost: plaudit.test\r\n\r\n", "HTTP/1.1 200 OK"},
		{"bad request", post("/api/v1/agents", "application/json", `{}`), "HTTP/1.1 400 Bad Request"},
		{"unauthorized", "GET /api/v1/agents HTTP/1.1\r\nHost: plaudit.test\r\n\r\n", "HTTP/1.1 401 Unauthorized"},
		{"unknown workspace", get("GET", "/v1/workspaces/ws_01ZZZZZZZZZZZZZZZZZZZZZZZZ/api-keys"), "HTTP/1.1 404 Not Found"},
		{"not found", get("GET", "/nope"), "HTTP/1.1 404 Not Found"},
		{"method not allowed", get("DELETE", "/api/v1/agents"), "HTTP/1.1 405 Method Not Allowed"},
		{"too large", post("/api/v1/agents", "application/json", `{"name": "`+strings.Repeat("n", 600)+`"}`), "HTTP/1.1 413 Request Entity Too Large"},
		{"unsupported media type", post("/api/v1/agents", "text/plain", `{"name": "x"}`), "HTTP/1.1 415 Unsupported Media Type"},
		{"header names in any case", "GET /api/v1/agents HTTP/1.1\r\nhost: plaudit.test\r\nauthorization: Bearer " + adminKey + "\r\n\r\n", "HTTP/1.1 200 OK"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.raw(t, tc.request)
			if res.line != tc.line {
				t.Errorf("status line %q, want %q; body %s", res.line, tc.line, res.body)
			}
			if s := res.header.Get("Server"); s != "plaudit" {
				t.Errorf("Server %q, want plaudit", s)
			}
			if cl := res.header.Get("Content-Length"); cl != strconv.Itoa(len(res.body)) {
				t.Errorf("Content-Length %q for a body of %d bytes", cl, len(res.body))
			}
		})
	}
}

// TestRequestTranslation: the door hands the service what the request
// says: the Idempotency-Key header (a replay repeats the first answer,
// X-Request-Id header included), the query string, and the path's
// workspace.
func TestRequestTranslation(t *testing.T) {
	e := newDoorEnv(t, Config{}, true)
	a, r := e.fixture(t)
	key := map[string]string{"Idempotency-Key": "door-key"}
	first := e.do(t, adminKey, "POST", "/v1/jobs/"+r+"/rewards", `{"scorer": "door", "value": 1}`, key)
	if first.status != 201 {
		t.Fatalf("keyed report: %d %s", first.status, first.body)
	}
	again, err := e.hc.Do(func() *http.Request {
		req, _ := http.NewRequest("POST", "http://plaudit.test/v1/jobs/"+r+"/rewards", strings.NewReader(`{"scorer": "door", "value": 1}`))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "door-key")
		return req
	}())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(again.Body)
	again.Body.Close()
	if again.StatusCode != first.status || string(b) != string(first.body) ||
		again.Header.Get("X-Request-Id") != first.header.Get("X-Request-Id") {
		t.Errorf("replay %d %q (X-Request-Id %q), want the first answer %d %q (X-Request-Id %q)",
			again.StatusCode, b, again.Header.Get("X-Request-Id"), first.status, first.body, first.header.Get("X-Request-Id"))
	}
	expectError(t, e.do(t, adminKey, "POST", "/v1/jobs/"+r+"/rewards", `{"scorer": "door", "value": 0}`, key),
		409, jsonShape, "idempotency_key_reused", "")

	// The query string reaches the service, decoded.
	res := e.do(t, adminKey, "GET", "/api/v1/agents/"+a+"/runs/"+r+"/reward?objective_version=0", "", nil)
	if res.status != 200 || res.json(t)["objective_version"] != 0.0 {
		t.Errorf("reward under objective_version=0: %d %s", res.status, res.body)
	}
	expectError(t, e.do(t, adminKey, "GET", "/api/v1/agents/"+a+"/runs/"+r+"/reward?objective_version=9", "", nil),
		404, jsonShape, "not_found", "")
	expectError(t, e.do(t, adminKey, "GET", "/v1/workspaces/default/agents/"+a+"/feedback?limit=0", "", nil),
		400, rpcShape, 3.0, "limit")
	expectError(t, e.do(t, adminKey, "GET", "/v1/workspaces/default/agents/"+a+"/feedback?labels=source%3Dcsat%2Cbad", "", nil),
		400, rpcShape, 3.0, "labels")
	if res := e.do(t, adminKey, "GET", "/v1/workspaces/default/agents/"+a+"/feedback?labels=source%3Dcsat", "", nil); res.status != 200 {
		t.Errorf("labels=source%%3Dcsat: %d %s", res.status, res.body)
	}
	// A repeated argument reads as its values joined with ',': labels
	// pairs add up, and a repeated single value is refused, never one of
	// them picked.
	if res := e.do(t, adminKey, "GET", "/v1/workspaces/default/agents/"+a+"/feedback?labels=source%3Dcsat&labels=team%3Da", "", nil); res.status != 200 {
		t.Errorf("labels twice: %d %s", res.status, res.body)
	}
	expectError(t, e.do(t, adminKey, "GET", "/v1/workspaces/default/agents/"+a+"/feedback?labels=source%3Dcsat&labels=bad", "", nil),
		400, rpcShape, 3.0, "labels")
	expectError(t, e.do(t, adminKey, "GET", "/v1/workspaces/default/agents/"+a+"/feedback?limit=1&limit=2", "", nil),
		400, rpcShape, 3.0, "limit")
	// The path's workspace: an unknown one is refused before anything runs.
	expectError(t, e.do(t, adminKey, "GET", "/v1/workspaces/ws_01ZZZZZZZZZZZZZZZZZZZZZZZZ/objectives/"+r, "", nil),
		404, rpcShape, 5.0, "")
}

// TestReadTimeout: a request that stalls past its deadline, ReadTimeout
// for its head and BodyTimeout for its body (whether fasthttp is reading
// it or, past its first bytes, the door), is answered (a 4xx with an
// X-Request-Id, in the error shape) and its connection closed, instead of
// holding the connection.
func TestReadTimeout(t *testing.T) {
	e := newDoorEnv(t, Config{ReadTimeout: 100 * time.Millisecond, BodyTimeout: 100 * time.Millisecond}, true)
	post := "POST /api/v1/agents HTTP/1.1\r\nHost: plaudit.test\r\nAuthorization: Bearer " + adminKey +
		"\r\nContent-Type: application/json\r\n"
	for _, tc := range []struct{ name, request string }{
		{"stalled headers", "GET /api/v1/agents HTTP/1.1\r\nHost: plaudit.test\r\n"},
		{"stalled body", post + "Content-Length: 100\r\n\r\n{"},
		{"stalled body past its first bytes", post + "Content-Length: 100000\r\n\r\n{" + strings.Repeat(" ", 3*preRead)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			res := e.raw(t, tc.request)
			if res.status < 400 || res.status >= 500 {
				t.Errorf("status %d, want a 4xx; body %s", res.status, res.body)
			}
			expectError(t, res, res.status, jsonShape, "invalid_request", "in time")
			if !res.close {
				t.Error("the connection stays open (no Connection: close)")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("answered after %v with timeouts of 100ms", d)
			}
		})
	}
}

// TestRoutesNameHandledOps: the route table and the service agree: every
// route names an operation the service handles (a request with that Op is
// never 404 "no such route"), and every route's pattern routes back to its
// operation with its placeholders bound to the request's target.
func TestRoutesNameHandledOps(t *testing.T) {
	e := newDoorEnv(t, Config{}, true)
	admin, err := e.svc.Tenancy().Authenticate("Bearer " + adminKey)
	if err != nil {
		t.Fatal(err)
	}
	handled := func(op api.Op, shape api.ErrorShape) api.Response {
		return e.svc.Handle(&api.Request{Op: op, Principal: admin, RequestID: e.svc.RequestID(),
			Started: e.svc.Stamp(), Errors: shape})
	}
	noRoute := api.ErrRouteNotFound.Error()
	// The check can fail: an operation the service does not know is.
	if resp := handled("no_such_operation", api.ErrorJSON); resp.Status != 404 || !strings.Contains(resp.Message, noRoute) {
		t.Fatalf("an unknown Op: %d %q, want 404 %q", resp.Status, resp.Message, noRoute)
	}
	values := map[string]string{"{ws}": "ws-v", "{agent}": "agent-v", "{run}": "run-v",
		"{variation}": "variation-v", "{version}": "version-v", "{key}": "key-v"}
	for _, r := range routes {
		t.Run(r.method+" "+r.pattern, func(t *testing.T) {
			if resp := handled(r.op, errorShape(r.pattern)); resp.Status == 404 && strings.Contains(resp.Message, noRoute) {
				t.Errorf("op %q: the service answers %d %q", r.op, resp.Status, resp.Message)
			}

			path := r.pattern
			for k, v := range values {
				path = strings.ReplaceAll(path, k, v)
			}
			var req api.Request
			if err := Route(&req, r.method, path); err != nil {
				t.Fatalf("Route(%s %s): %v", r.method, path, err)
			}
			if req.Op != r.op {
				t.Errorf("Route(%s %s) = %q, want %q", r.method, path, req.Op, r.op)
			}
			bound := map[string]string{"{ws}": req.Workspace, "{agent}": req.Target.Agent, "{run}": req.Target.Run,
				"{variation}": req.Target.Variation, "{version}": req.Target.Version, "{key}": req.Target.Key}
			for k, got := range bound {
				want := ""
				if strings.Contains(r.pattern, k) {
					want = values[k]
				}
				if got != want {
					t.Errorf("Route(%s %s): %s bound to %q, want %q", r.method, path, k, got, want)
				}
			}
			if want := errorShape(path); req.Errors != want {
				t.Errorf("Route(%s %s): error shape %v, want %v", r.method, path, req.Errors, want)
			}
		})
	}
	// A method no route of a known path has is 405, not 404.
	for _, r := range routes {
		path := r.pattern
		for k, v := range values {
			path = strings.ReplaceAll(path, k, v)
		}
		var req api.Request
		err := Route(&req, "PATCH", path)
		if !errors.Is(err, api.ErrMethodNotAllowed) {
			t.Errorf("Route(PATCH %s) = %v, want %v", path, err, api.ErrMethodNotAllowed)
		}
	}
	if err := Route(&api.Request{}, "GET", "/api/v1/nope"); !errors.Is(err, api.ErrRouteNotFound) {
		t.Errorf("Route(GET /api/v1/nope) = %v, want %v", err, api.ErrRouteNotFound)
	}
}

// TestIdleConnectionsCloseSilently: a connection that sends nothing is
// closed after its timeout (ReadTimeout while new, IdleTimeout between
// requests) without a byte written. An unasked-for answer is not only
// noise: a client that sends its next request just then reads it as that
// request's answer.
func TestIdleConnectionsCloseSilently(t *testing.T) {
	e := newTCPDoorEnv(t, Config{ReadTimeout: 100 * time.Millisecond, IdleTimeout: 100 * time.Millisecond})
	t.Run("new", func(t *testing.T) {
		c, err := e.dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		expectSilentClose(t, c, c)
	})
	t.Run("kept alive between requests", func(t *testing.T) {
		c, err := e.dial()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: plaudit.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("/healthz: %d, Connection: close %v; want 200 kept alive", resp.StatusCode, resp.Close)
		}
		expectSilentClose(t, c, br)
	})
}

// expectSilentClose waits for the server to close c and fails if anything
// arrives on r (c, or a reader over it) first.
func expectSilentClose(t *testing.T, c net.Conn, r io.Reader) {
	t.Helper()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(5 * time.Second))
	b, err := io.ReadAll(r)
	if len(b) > 0 {
		t.Fatalf("the idle connection received %d bytes after %v: %q", len(b), time.Since(start).Round(time.Millisecond), b)
	}
	if err != nil {
		t.Fatalf("the idle connection was not closed cleanly (EOF): %v after %v", err, time.Since(start).Round(time.Millisecond))
	}
}

// TestPathSegmentsDecodedOneByOne: a path is split at its slashes as sent
// and each segment decoded on its own, so an external id holding '/' is
// reachable as external_id:a%2Fb, and an encoded slash, an empty segment
// or a dot segment never makes one route into another (fasthttp's
// normalised path turned /api/v1/agents/%2F into the agent list).
func TestPathSegmentsDecodedOneByOne(t *testing.T) {
	e := newDoorEnv(t, Config{}, true)
	r := e.do(t, adminKey, "POST", "/api/v1/agents", `{"name": "slash", "external_id": "team/a"}`, nil)
	if r.status != 201 {
		t.Fatalf("create agent: %d %s", r.status, r.body)
	}
	agent := r.json(t)["id"].(string)
	r = e.do(t, adminKey, "POST", "/api/v1/agents/"+agent+"/runs", `{"external_id": "ticket/7"}`, nil)
	if r.status != 201 {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	run := r.json(t)["id"].(string)
	get := func(path string) response {
		return e.raw(t, "GET "+path+" HTTP/1.1\r\nHost: plaudit.test\r\nAuthorization: Bearer "+adminKey+"\r\n\r\n")
	}
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/agents/external_id:team%2Fa", agent},
		{"/api/v1/agents/external_id:team%2fa", agent},
		{"/api/v1/agents/%61gt" + strings.TrimPrefix(agent, "agt"), agent},
		{"/api/v1/agents/" + agent + "/runs/external_id:ticket%2F7", run},
		{"/v1/workspaces/default/objectives/external_id:ticket%2F7", run},
	} {
		res := get(tc.path)
		if res.status != 200 || !strings.Contains(string(res.body), `"`+tc.want+`"`) {
			t.Errorf("GET %s: %d %s, want 200 naming %s", tc.path, res.status, res.body, tc.want)
		}
	}
	for _, tc := range []struct {
		path   string
		status int
		sh     shape
		code   any
		want   string
	}{
		{"/api/v1/agents/%2F", 404, jsonShape, "not_found", "agent /"},
		{"/api/v1/agents/external_id:team/a", 404, jsonShape, "not_found", "no such route"},
		{"/api/v1//agents", 404, jsonShape, "not_found", "no such route"},
		{"/api/v1/agents/" + agent + "/..", 404, jsonShape, "not_found", "no such route"},
		{"/api/v1/agents/x/../" + agent, 404, jsonShape, "not_found", "no such route"},
		{"/api/v1/agents/%zz", 400, jsonShape, "invalid_request", "path"},
		{"/v1/workspaces/default/objectives/%2", 400, rpcShape, 3.0, "path"},
	} {
		t.Run(tc.path, func(t *testing.T) { expectError(t, get(tc.path), tc.status, tc.sh, tc.code, tc.want) })
	}
	// A head over the read buffer is refused naming the bound.
	expectError(t, get("/api/v1/agents/"+strings.Repeat("a", 5000)), 400, jsonShape, "invalid_request", "4096 bytes")
}

// TestEveryAnswerHasARequestID: the console's pages, its redirects and
// /metrics carry X-Request-Id like the API's answers; the redirects to the
// console are relative.
func TestEveryAnswerHasARequestID(t *testing.T) {
	text := func(body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, body)
		})
	}
	e := newDoorEnv(t, Config{Metrics: text("metrics"), UI: text("console")}, true)
	e.hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, tc := range []struct {
		path   string
		status int
	}{{"/metrics", 200}, {"/ui/", 200}, {"/ui/static/x.css", 200}, {"/", 302}, {"/ui", 302}} {
		req, _ := http.NewRequest("GET", "http://plaudit.test"+tc.path, nil)
		req.Host = "evil.example"
		resp, err := e.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status || resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("GET %s: %d, X-Request-Id %q; want %d with one", tc.path, resp.StatusCode, resp.Header.Get("X-Request-Id"), tc.status)
		}
		// A redirect names no host, least of all the one the request named.
		if loc := resp.Header.Get("Location"); tc.status == 302 && loc != "/ui/" {
			t.Errorf("GET %s redirects to %q, want /ui/", tc.path, loc)
		}
	}
}

// TestMetricsTakesOnlyGET: served on the HTTP port, /metrics answers
// another method 405 with Allow, without a key, as /openapi.json does.
func TestMetricsTakesOnlyGET(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") })
	e := newDoorEnv(t, Config{Metrics: metrics}, true)
	for _, method := range []string{"POST", "PUT", "DELETE"} {
		res := e.do(t, "", method, "/metrics", "", nil)
		if res.status != 405 || res.header.Get("Allow") != "GET" {
			t.Errorf("%s /metrics: %d, Allow %q; want 405 with Allow GET", method, res.status, res.header.Get("Allow"))
		}
	}
}

// FuzzRoute: any method and path, as sent, routes or is refused without a
// panic; a routed path binds only decoded segments, each free of the '/'
// that split them unless it was sent as %2F; an error is one the service
// answers as a 4xx.
func FuzzRoute(f *testing.F) {
	for _, s := range []string{"/api/v1/agents/agt_1/runs/external_id:a%2Fb", "/v1/tasks/acme%2Fx/versions/tv_1",
		"/api/v1/agents/%zz", "//api/v1/agents", "/v1/workspaces/default/objectives/%2F/feedback", "/%", ""} {
		f.Add("GET", s)
		f.Add("POST", s)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		var req api.Request
		err := Route(&req, method, path)
		if err != nil {
			if !errors.Is(err, api.ErrRouteNotFound) && !errors.Is(err, api.ErrMethodNotAllowed) && !errors.Is(err, field.ErrInvalid) {
				t.Fatalf("Route(%q, %q) = %v, not a 4xx the service knows", method, path, err)
			}
			return
		}
		sentSlash := strings.Contains(strings.ToLower(path), "%2f")
		for _, v := range []string{req.Workspace, req.Target.Agent, req.Target.Run, req.Target.Variation, req.Target.Version, req.Target.Key, req.Target.Reward} {
			if strings.Contains(v, "/") && !sentSlash {
				t.Fatalf("Route(%q, %q) bound %q, holding a '/' the path did not encode", method, path, v)
			}
		}
	})
}

// TestAReportIsStampedWhenItsHeadersArrive: seed 001's order of reports is
// the order their requests were admitted, which is when their headers
// arrived: a report whose body comes slowly, overtaken by one sent whole
// after its headers, is the one superseded.
func TestAReportIsStampedWhenItsHeadersArrive(t *testing.T) {
	e := newTCPDoorEnv(t, Config{})
	_, run := e.fixture(t)
	slow := `{"kind":"external","scorer":"slow","value":0.1}`
	conn, err := e.dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	head := fmt.Sprintf("POST /v1/jobs/%s/rewards HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", run, adminKey, len(slow))
	if _, err := io.WriteString(conn, head+slow[:10]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the door has the headers
	if r := e.do(t, adminKey, "POST", "/v1/jobs/"+run+"/rewards", `{"kind":"external","scorer":"slow","value":0.9}`, nil); r.status != 201 {
		t.Fatalf("the later report: %d %s", r.status, r.body)
	}
	if _, err := io.WriteString(conn, slow[10:]); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 409 || !strings.Contains(string(body), "reward_superseded") {
		t.Fatalf("the report admitted first, its body last: %d %s, want 409 reward_superseded", resp.StatusCode, body)
	}
	r := e.do(t, adminKey, "GET", "/v1/jobs/"+run+"/rewards", "", nil)
	if !strings.Contains(string(r.body), `"value":0.9`) || strings.Contains(string(r.body), `"value":0.1`) {
		t.Fatalf("standing reports %s, want the later one's 0.9", r.body)
	}
}

// TestConsoleAndMetricsBodiesAreBounded: the console and /metrics sit behind
// fasthttpadaptor, which reads a body whole before its handler looks at
// it; the door reads it first, within --max-body, so a body announced over
// the limit is 413 at once and unread, whoever sends it (the console's
// sign-in takes no key), and one within it reaches the handler as sent.
func TestConsoleAndMetricsBodiesAreBounded(t *testing.T) {
	var got atomic.Value
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Store(string(b))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	})
	e := newTCPDoorEnv(t, Config{MaxBody: 1000, UI: h, Metrics: h})
	for _, path := range []string{"/ui/signin", "/metrics"} {
		method := "POST"
		if path == "/metrics" {
			method = "GET"
		}
		start := time.Now()
		// The head and a byte (fasthttp waits for one before the handler
		// runs): a door that read the body would wait for the rest.
		r := e.raw(t, method+" "+path+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1001\r\n\r\nx")
		if r.status != 413 || time.Since(start) > 5*time.Second {
			t.Errorf("%s %s over the limit: %d after %v, want 413 at once", method, path, r.status, time.Since(start))
		}
	}
	body := "user=a&pass=" + strings.Repeat("b", 900)
	r := e.raw(t, fmt.Sprintf("POST /ui/signin HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	if r.status != 200 || got.Load() != body {
		t.Fatalf("a console body within the limit: %d, the handler read %d bytes; want 200 and the body", r.status, len(got.Load().(string)))
	}
}

func TestRedactHeadBlanksCredentials(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer pl_secret\r\nContent-Length: 1\r\n\r\n",
			"POST / HTTP/1.1\r\nHost: x\r\nAuthorization: [REDACTED]\r\nContent-Length: 1\r\n\r\n"},
		{`cannot parse "POST / HTTP/1.1\r\nauthorization:bearer pl_secret\r\nCookie: s=abc\r\n"`,
			`cannot parse "POST / HTTP/1.1\r\nauthorization:[REDACTED]\r\nCookie: [REDACTED]\r\n"`},
		{"no head here", "no head here"},
	} {
		if got := redactHead(c.in); got != c.want {
			t.Errorf("redactHead(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestAMalformedRequestLogsNoKey: a head fasthttp cannot parse is logged at
// debug, as fasthttp quotes it, with its credentials blanked.
func TestAMalformedRequestLogsNoKey(t *testing.T) {
	rec := &logtest.Recorder{Min: slog.LevelDebug}
	e := newTCPDoorEnv(t, Config{Logger: slog.New(rec)})
	r := e.raw(t, "POST /api/v1/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+adminKey+
		"\r\nContent-Length: 13\r\nContent-Length: 13\r\n\r\n{\"name\":\"cl\"}")
	if r.status != 400 {
		t.Fatalf("a head with two Content-Lengths: %d, want 400", r.status)
	}
	time.Sleep(50 * time.Millisecond) // fasthttp logs after it answers
	if rec.Count("malformed request") == 0 {
		t.Fatalf("nothing logged: %s", rec)
	}
	if strings.Contains(rec.String(), adminKey) {
		t.Fatalf("the key is in the log:\n%s", rec)
	}
}

// TestABodyDeclaredOverTheLimitIs413AtOnce: with a valid key and a body
// declared over --max-body, the answer is 413 after the first byte, not
// after the body timeout (fasthttp read up to 8 KiB before the handler).
func TestABodyDeclaredOverTheLimitIs413AtOnce(t *testing.T) {
	e := newTCPDoorEnv(t, Config{MaxBody: 1000, BodyTimeout: 5 * time.Second})
	start := time.Now()
	r := e.raw(t, "POST /api/v1/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+adminKey+
		"\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n{\"")
	if r.status != 413 || time.Since(start) > 3*time.Second {
		t.Fatalf("%d after %v, want 413 at once", r.status, time.Since(start))
	}
}
