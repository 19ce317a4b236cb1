package server

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Idempotency-Key on the NATS door (SPEC §2), over a real embedded NATS
// server. The service's handling of keys, the same for both doors, is
// tested in process in transport/api (idempotency_test.go); here is what
// needs the NATS door: its header, its error replies, and a key shared by
// both doors.

func withKey(key string) map[string]string { return map[string]string{"Idempotency-Key": key} }

// sameAnswer fails unless again replays first byte for byte: status, body
// and X-Request-Id.
func sameAnswer(t *testing.T, first, again response) {
	t.Helper()
	if again.status != first.status {
		t.Errorf("replay status %d, first answer %d", again.status, first.status)
	}
	if string(again.body) != string(first.body) {
		t.Errorf("replay body differs:\nfirst  %s\nreplay %s", first.body, again.body)
	}
	if a, f := again.header.Get("X-Request-Id"), first.header.Get("X-Request-Id"); a != f {
		t.Errorf("replay X-Request-Id %q, first answer %q", a, f)
	}
}

// natsSend sends body to subject with headers and returns the reply as a
// response: status 200 for a reply without an error code, else the code.
func natsSend(nc *nats.Conn, key, subject, body string, hdr map[string]string) (response, error) {
	msg := nats.NewMsg(subject)
	msg.Data = []byte(body)
	msg.Header.Set("Authorization", "Bearer "+key)
	for k, v := range hdr {
		msg.Header.Set(k, v)
	}
	rep, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		return response{}, err
	}
	status := 200
	if code := rep.Header.Get(micro.ErrorCodeHeader); code != "" {
		if status, err = strconv.Atoi(code); err != nil {
			return response{}, fmt.Errorf("%s: error code %q is not a status", subject, code)
		}
	}
	h := http.Header{}
	if id := rep.Header.Get("X-Request-Id"); id != "" {
		h.Set("X-Request-Id", id)
	}
	return response{status: status, header: h, body: rep.Data}, nil
}

// idemFixture is a server (on a test clock) with one agent and a NATS
// connection of the admin key.
type idemFixture struct {
	s     *Server
	clk   *clock
	c     *client
	nc    *nats.Conn
	agent string
}

func newIdemFixture(t *testing.T, cfg Config) *idemFixture {
	t.Helper()
	f := &idemFixture{clk: newClock()}
	if cfg.Now == nil {
		cfg.Now = f.clk.Now
	}
	f.s = startServer(t, cfg)
	f.c = newClient(t, f.s, adminKey)
	f.agent = str(t, f.c.must(201, "POST", "/api/v1/agents", `{"name": "idem"}`), "id")
	nc, err := nats.Connect(f.s.NATSURL(), nats.Token(adminKey))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	f.nc = nc
	return f
}

func (f *idemFixture) run(t *testing.T, body string) string {
	t.Helper()
	return str(t, f.c.on(t).must(201, "POST", "/api/v1/agents/"+f.agent+"/runs", body), "id")
}

// natsSignal sends a signal of the NATS door under a key, on a run of its
// own; count is how many of its signals the run holds, read over HTTP.
type natsSignal struct {
	f           *idemFixture
	run         string
	body, other string // the request, and another body for the same key
}

func (f *idemFixture) natsSignal(t *testing.T) natsSignal {
	t.Helper()
	run := f.run(t, `{}`)
	sigBody := func(v int) string {
		return fmt.Sprintf(`{"kind": "idem.signal", "value": %d, "run_id": %q}`, v, run)
	}
	return natsSignal{f: f, run: run, body: sigBody(1), other: sigBody(2)}
}

func (op natsSignal) mustSend(t *testing.T, key, body string) response {
	t.Helper()
	r, err := natsSend(op.f.nc, adminKey, "plaudit.v1.default."+op.f.agent+".signal", body, withKey(key))
	if err != nil {
		t.Fatalf("NATS signal: %v", err)
	}
	return r
}

func (op natsSignal) count(t *testing.T) int {
	t.Helper()
	n := 0
	for _, it := range list(t, op.f.c.on(t).must(200, "GET", "/api/v1/agents/"+op.f.agent+"/runs/"+op.run+"/signals", ""), "items") {
		if it.(map[string]any)["kind"] == "idem.signal" {
			n++
		}
	}
	return n
}

// errorCode checks a NATS error reply's status and error.code.
func (op natsSignal) errorCode(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	expect(t, r.json(t), code, "error", "code")
}

// TestIdempotentReplayIsByteIdentical: on the NATS door, the same key with
// the same body answers the first reply byte for byte and writes nothing
// again, and the same key with another body is 409 idempotency_key_reused.
func TestIdempotentReplayIsByteIdentical(t *testing.T) {
	f := newIdemFixture(t, Config{})
	op := f.natsSignal(t)
	first := op.mustSend(t, "replay-nats", op.body)
	if first.status != 200 {
		t.Fatalf("first answer: status %d, want 200; body %s", first.status, first.body)
	}
	if n := op.count(t); n != 1 {
		t.Fatalf("%d writes after the first request, want 1", n)
	}
	for range 2 {
		f.clk.Advance(time.Minute)
		sameAnswer(t, first, op.mustSend(t, "replay-nats", op.body))
	}
	op.errorCode(t, op.mustSend(t, "replay-nats", op.other), 409, "idempotency_key_reused")
	sameAnswer(t, first, op.mustSend(t, "replay-nats", op.body)) // the record is intact
	if n := op.count(t); n != 1 {
		t.Errorf("%d writes after replays and a reused key, want 1", n)
	}
}

// TestIdempotencyKeyPattern: on the NATS door, a key outside
// ^[\x21-\x7e]{1,200}$ is 400 invalid_request naming Idempotency-Key, and
// nothing is written; a key at the end of the pattern is accepted.
func TestIdempotencyKeyPattern(t *testing.T) {
	f := newIdemFixture(t, Config{})
	op := f.natsSignal(t)
	cases := []struct {
		name   string
		key    string
		status int
	}{
		{"201 characters on NATS", strings.Repeat("k", 201), 400},
		{"non-ASCII on NATS", "ключ", 400},
		{"200 characters on NATS", strings.Repeat("!", 200), 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := op.count(t)
			r := op.mustSend(t, tc.key, op.body)
			if tc.status == 400 {
				op.errorCode(t, r, 400, "invalid_request")
				if msg := str(t, r.json(t), "error", "message"); !strings.Contains(msg, "Idempotency-Key") {
					t.Errorf("message %q does not name Idempotency-Key", msg)
				}
				if after := op.count(t); after != before {
					t.Errorf("%d writes before a rejected key, %d after", before, after)
				}
				return
			}
			if r.status != tc.status {
				t.Fatalf("status %d, want %d; body %s", r.status, tc.status, r.body)
			}
			sameAnswer(t, r, op.mustSend(t, tc.key, op.body))
			if after := op.count(t); after != before+1 {
				t.Errorf("%d writes before, %d after a request and its replay, want one more", before, after)
			}
		})
	}
}

// TestIdempotencyKeyScopes: a key is scoped to the operation, not to the
// door: the same signal sent under one key through HTTP and then NATS is
// written once. (Scopes by path and workspace: transport/api.)
func TestIdempotencyKeyScopes(t *testing.T) {
	f := newIdemFixture(t, Config{})
	run := f.run(t, `{}`)
	t.Run("HTTP and NATS doors, same operation and body", func(t *testing.T) {
		sig := `{"kind": "scope.door", "value": 1, "run_id": "` + run + `"}`
		ra := f.c.request("POST", "/api/v1/agents/"+f.agent+"/signals", sig, withKey("scope-doors"))
		rb, err := natsSend(f.nc, adminKey, "plaudit.v1.default."+f.agent+".signal", sig, withKey("scope-doors"))
		if err != nil {
			t.Fatal(err)
		}
		if ra.status != 201 || rb.status >= 300 || string(ra.body) != string(rb.body) {
			t.Fatalf("HTTP answered %d %s, NATS %d %s; want the NATS request to replay the HTTP answer", ra.status, ra.body, rb.status, rb.body)
		}
	})
	// Feedback answers errors in google.rpc.Status over HTTP and in the
	// {"error"} shape over NATS: its key is still one scope, and a
	// recorded error is replayed in the shape of the door asked, with the
	// first answer's request id.
	t.Run("feedback through both doors", func(t *testing.T) {
		path := "/v1/workspaces/default/objectives/" + run + "/feedback"
		subject := "plaudit.v1.default." + f.agent + ".feedback"
		viaHTTP := func(key, body string) response { return f.c.request("POST", path, body, withKey(key)) }
		viaNATS := func(key, body string) response {
			r, err := natsSend(f.nc, adminKey, subject, body, withKey(key))
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		ok := `{"objectiveId": "` + run + `", "metadata": {}, "data": {"score": 0.5}}`
		bad := `{"objectiveId": "` + run + `", "metadata": {}, "data": {"score": 2}}`
		count := func() int {
			return len(list(t, f.c.must(200, "GET", path, ""), "items"))
		}
		before := count()
		rpcShape := func(r response) bool { return strings.HasPrefix(string(r.body), `{"code":3,`) }
		for _, httpFirst := range []bool{true, false} {
			first, then, name := viaHTTP, viaNATS, "HTTP, then NATS"
			if !httpFirst {
				first, then, name = viaNATS, viaHTTP, "NATS, then HTTP"
			}
			key := fmt.Sprintf("fb-doors-%v", httpFirst)
			a, b := first(key, ok), then(key, ok)
			if a.status != 200 || b.status != 200 || string(a.body) != string(b.body) ||
				b.header.Get("X-Request-Id") != a.header.Get("X-Request-Id") {
				t.Errorf("%s: %d %s (%s), then %d %s (%s); want the first answer replayed", name,
					a.status, a.body, a.header.Get("X-Request-Id"), b.status, b.body, b.header.Get("X-Request-Id"))
			}
			a, b = first(key+"-bad", bad), then(key+"-bad", bad)
			if a.status != 400 || b.status != 400 || b.header.Get("X-Request-Id") != a.header.Get("X-Request-Id") ||
				!strings.Contains(string(b.body), "data.score") {
				t.Errorf("%s, an error: %d %s, then %d %s; want the 400 replayed", name, a.status, a.body, b.status, b.body)
			}
			// Each door answers in its own shape, the replay too.
			httpAnswer, natsAnswer := a, b
			if !httpFirst {
				httpAnswer, natsAnswer = b, a
			}
			if !rpcShape(httpAnswer) || rpcShape(natsAnswer) || !strings.Contains(string(natsAnswer.body), `"error":{`) {
				t.Errorf("%s: HTTP answered %s, NATS %s; want google.rpc.Status, then the {\"error\"} shape", name, httpAnswer.body, natsAnswer.body)
			}
		}
		if n := count() - before; n != 2 {
			t.Errorf("%d feedback records written, want 2 (one a key)", n)
		}
	})
}
