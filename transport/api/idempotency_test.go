package api_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/transport/api"
	"github.com/plaudit/plaudit/transport/idempotency"
)

// Idempotency-Key on every POST/PUT (SPEC §2): a replay is the first
// answer byte for byte and writes nothing; another body under the key is
// 409 idempotency_key_reused; a key whose first request still runs is 409
// idempotency_in_progress; records survive restarts and are kept for
// IdempotencyTTL. The NATS door's part is in server/idempotency_test.go.

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

// idemFixture is a harness with one agent whose runs the operations below
// write to.
type idemFixture struct {
	h     *harness
	clk   *clock
	c     *client
	agent string
}

func newIdemFixture(t *testing.T, cfg config) *idemFixture {
	t.Helper()
	f := &idemFixture{h: newHarness(t, cfg)}
	f.clk, f.c = f.h.clk, f.h.client(adminKey)
	f.agent = str(t, f.c.must(201, "POST", "/api/v1/agents", `{"name": "idem"}`), "id")
	return f
}

func (f *idemFixture) run(t *testing.T, body string) string {
	t.Helper()
	return str(t, f.c.on(t).must(201, "POST", "/api/v1/agents/"+f.agent+"/runs", body), "id")
}

// idemOp is one write: where to send it under a key, and how many of its
// writes are visible.
type idemOp struct {
	name         string
	c            *client
	method, path string
	body, other  string // the request, and another body for the same key
	status       int    // of the first answer
	count        func(t *testing.T) int
	rpc          bool // errors are google.rpc.Status (the seed-004 door)
	appendsEvery bool // without a key every request writes again (for the concurrency test)
}

// ops makes one of each idempotent write, each on its own resources.
func (f *idemFixture) ops(t *testing.T) []idemOp {
	t.Helper()
	c := f.c
	ap := "/api/v1/agents/" + f.agent
	countItems := func(path string, match func(it any) bool) func(t *testing.T) int {
		return func(t *testing.T) int {
			n := 0
			for _, it := range list(t, c.on(t).must(200, "GET", path, ""), "items") {
				if match == nil || match(it) {
					n++
				}
			}
			return n
		}
	}
	kindIs := func(kind string) func(any) bool {
		return func(it any) bool { return it.(map[string]any)["kind"] == kind }
	}
	rSig, rFin, rRep, rFb := f.run(t, `{}`), f.run(t, `{}`), f.run(t, `{}`), f.run(t, `{}`)
	sigBody := func(run string, v int) string {
		return fmt.Sprintf(`{"kind": "idem.signal", "value": %d, "run_id": %q}`, v, run)
	}
	return []idemOp{
		{name: "create agent", c: c, method: "POST", path: "/api/v1/agents", status: 201, appendsEvery: true,
			body: `{"name": "idem-created"}`, other: `{"name": "idem-created", "labels": {"x": "y"}}`,
			count: countItems("/api/v1/agents", func(it any) bool { return it.(map[string]any)["name"] == "idem-created" })},
		{name: "create run", c: c, method: "POST", path: ap + "/runs", status: 201, appendsEvery: true,
			body: `{"version": "idem-v"}`, other: `{"version": "idem-v", "session_id": "s"}`,
			count: func(t *testing.T) int {
				return int(num(t, c.on(t).must(200, "GET", ap+"/versions/idem-v/rewards", ""), "runs"))
			}},
		{name: "signal", c: c, method: "POST", path: ap + "/signals", status: 201, appendsEvery: true,
			body: sigBody(rSig, 1), other: sigBody(rSig, 2),
			count: countItems(ap+"/runs/"+rSig+"/signals", kindIs("idem.signal"))},
		{name: "finish", c: c, method: "POST", path: ap + "/runs/" + rFin + "/finish", status: 200,
			body: `{"succeeded": true}`, other: `{"succeeded": false}`,
			count: countItems(ap+"/runs/"+rFin+"/signals", kindIs("run.succeeded"))},
		{name: "PUT objective", c: c, method: "PUT", path: ap + "/objective", status: 200,
			body:  `{"definition": {"terms": [{"signal": "idem.signal", "weight": 1}]}, "note": "idem"}`,
			other: `{"definition": {"terms": [{"signal": "idem.signal", "weight": 2}]}, "note": "idem"}`,
			count: func(t *testing.T) int { return int(num(t, c.on(t).must(200, "GET", ap+"/objective", ""), "version")) }},
		{name: "report", c: c, method: "POST", path: rewardsPath(rRep), status: 201,
			body: `{"scorer": "idem", "value": 0.5}`, other: `{"scorer": "idem", "value": 0.6}`,
			// A report is replaced in place; a second write would move
			// updated_at (the clock moves before every replay).
			count: func(t *testing.T) int {
				items := list(t, c.on(t).must(200, "GET", rewardsPath(rRep), ""), "items")
				n := len(items)
				for _, it := range items {
					if str(t, it, "updated_at") != str(t, it, "created_at") {
						n++
					}
				}
				return n
			}},
		{name: "seed-004 feedback", c: c, method: "POST", path: "/v1/workspaces/default/objectives/" + rFb + "/feedback", status: 200,
			appendsEvery: true, rpc: true, body: `{"metadata": {}, "data": {"score": 0.5}}`, other: `{"metadata": {}, "data": {"score": -0.5}}`,
			count: countItems("/v1/workspaces/default/objectives/"+rFb+"/feedback", nil)},
	}
}

// send sends op under key with body; it does not fail the test
// (goroutines may call it).
func (op idemOp) send(key, body string) (response, error) {
	return op.c.rawSend(op.method, op.path, body, withKey(key))
}

// mustSend sends op under key and fails the test on an error.
func (op idemOp) mustSend(t *testing.T, key, body string) response {
	t.Helper()
	r, err := op.send(key, body)
	if err != nil {
		t.Fatalf("%s: %v", op.name, err)
	}
	return r
}

// rpcCodes are the google.rpc codes of the errors the seed-004 door
// answers here.
var rpcCodes = map[string]float64{"invalid_request": 3, "idempotency_key_reused": 6, "idempotency_in_progress": 10}

// errorCode checks an error answer's status and error.code (on the seed-004
// door, its google.rpc code) and that request_id is the answer's
// X-Request-Id.
func (op idemOp) errorCode(t *testing.T, r response, status int, code string) {
	t.Helper()
	if op.rpc {
		rpcStatus(t, r, status, rpcCodes[code], "")
		return
	}
	apiError(t, r, status, code, "")
}

// TestIdempotentReplayIsByteIdentical: for every kind of write the same
// key with the same body answers the first response byte for byte (status
// and X-Request-Id too) and writes nothing again, and the same key with
// another body is 409 idempotency_key_reused.
func TestIdempotentReplayIsByteIdentical(t *testing.T) {
	f := newIdemFixture(t, config{})
	for i, op := range f.ops(t) {
		t.Run(op.name, func(t *testing.T) {
			key := fmt.Sprintf("replay-%d", i)
			first := op.mustSend(t, key, op.body)
			if first.status != op.status {
				t.Fatalf("first answer: status %d, want %d; body %s", first.status, op.status, first.body)
			}
			if n := op.count(t); n != 1 {
				t.Fatalf("%d writes after the first request, want 1", n)
			}
			for range 2 {
				f.clk.Advance(time.Minute)
				sameAnswer(t, first, op.mustSend(t, key, op.body))
			}
			op.errorCode(t, op.mustSend(t, key, op.other), 409, "idempotency_key_reused")
			sameAnswer(t, first, op.mustSend(t, key, op.body)) // the record is intact
			if n := op.count(t); n != 1 {
				t.Errorf("%d writes after replays and a reused key, want 1", n)
			}
		})
	}
}

// TestIdempotencyKeyPattern: a key outside ^[\x21-\x7e]{1,200}$ is 400
// invalid_request naming Idempotency-Key, and nothing is written; keys at
// the ends of the pattern are accepted.
func TestIdempotencyKeyPattern(t *testing.T) {
	f := newIdemFixture(t, config{})
	signal := f.ops(t)[2]
	cases := []struct {
		name   string
		op     idemOp
		key    string
		status int
	}{
		{"empty", signal, "", 400},
		{"201 characters", signal, strings.Repeat("k", 201), 400},
		{"inner space", signal, "retry 1", 400},
		{"inner tab", signal, "retry\t1", 400},
		{"non-ASCII", signal, "ключ", 400},
		{"200 characters", signal, strings.Repeat("~", 200), 201},
		{"one character", signal, "!", 201},
		{"every printable class", signal, `!"#$%&'()*+,-./09:;<=>?@AZ[\]^_` + "`az{|}~", 201},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.op.count(t)
			r := tc.op.mustSend(t, tc.key, tc.op.body)
			if tc.status == 400 {
				tc.op.errorCode(t, r, 400, "invalid_request")
				if msg := str(t, r.json(t), "error", "message"); !strings.Contains(msg, "Idempotency-Key") {
					t.Errorf("message %q does not name Idempotency-Key", msg)
				}
				if after := tc.op.count(t); after != before {
					t.Errorf("%d writes before a rejected key, %d after", before, after)
				}
				return
			}
			if r.status != tc.status {
				t.Fatalf("status %d, want %d; body %s", r.status, tc.status, r.body)
			}
			sameAnswer(t, r, tc.op.mustSend(t, tc.key, tc.op.body))
			if after := tc.op.count(t); after != before+1 {
				t.Errorf("%d writes before, %d after a request and its replay, want one more", before, after)
			}
		})
	}
}

// TestIdempotencyConcurrentRequestsWriteOnce: 16 requests with one key,
// admitted first and then handed to the service together, write exactly
// once; every answer is the first answer byte for byte or 409
// idempotency_in_progress.
func TestIdempotencyConcurrentRequestsWriteOnce(t *testing.T) {
	const n = 16
	f := newIdemFixture(t, config{})
	for _, op := range f.ops(t) {
		if !op.appendsEvery {
			continue
		}
		t.Run(op.name, func(t *testing.T) {
			key := "concurrent-" + strings.ReplaceAll(op.name, " ", "-")
			reqs := make([]*pending, n)
			for i := range reqs {
				p, err := op.c.build(op.method, op.path, op.body, withKey(key))
				if err != nil {
					t.Fatal(err)
				}
				reqs[i] = p
			}
			answers := make([]response, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					answers[i] = reqs[i].send()
				}()
			}
			close(start) // all n are stamped; release them together
			wg.Wait()
			var winner *response
			busy := 0
			for i, r := range answers {
				if r.status == 409 {
					op.errorCode(t, r, 409, "idempotency_in_progress")
					busy++
					continue
				}
				if winner == nil {
					winner = &answers[i]
					if r.status != op.status {
						t.Fatalf("status %d, want %d or 409; body %s", r.status, op.status, r.body)
					}
					continue
				}
				sameAnswer(t, *winner, r)
			}
			if winner == nil {
				t.Fatalf("all %d answers were 409 idempotency_in_progress; the first request must answer", n)
			}
			if w := op.count(t); w != 1 {
				t.Errorf("%d writes from %d requests with one key, want 1", w, n)
			}
			sameAnswer(t, *winner, op.mustSend(t, key, op.body))
			t.Logf("%d replays, %d in progress", n-1-busy, busy)
		})
	}
}

// TestIdempotencyKeyScopes: a key is scoped to (workspace, operation,
// target), so the same key and body on another path or in another
// workspace is a request of its own and writes. (The same operation on the
// other door replays: server/idempotency_test.go.)
func TestIdempotencyKeyScopes(t *testing.T) {
	f := newIdemFixture(t, config{})
	c := f.c
	ws := str(t, c.must(201, "POST", "/v1/workspaces", `{"name": "scoped"}`), "id")
	other := c.as(str(t, c.must(201, "POST", "/v1/workspaces/"+ws+"/api-keys", `{"name": "scoped-ci"}`), "key"))
	agent2 := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "idem-2"}`), "id")
	type req struct {
		send func(key string) (response, error)
		id   func(t *testing.T, r response) string
	}
	topID := func(t *testing.T, r response) string { return str(t, r.json(t), "id") }
	httpReq := func(c *client, method, path, body string) req {
		return req{send: func(key string) (response, error) { return c.rawSend(method, path, body, withKey(key)) }, id: topID}
	}
	cases := []struct {
		name      string
		a, b      req
		sameState func(t *testing.T) int // writes visible, 2 when both wrote
	}{
		{"two agents' run paths",
			httpReq(c, "POST", "/api/v1/agents/"+f.agent+"/runs", `{"version": "scope"}`),
			httpReq(c, "POST", "/api/v1/agents/"+agent2+"/runs", `{"version": "scope"}`),
			func(t *testing.T) int {
				return int(num(t, c.on(t).must(200, "GET", "/api/v1/agents/"+f.agent+"/versions/scope/rewards", ""), "runs") +
					num(t, c.on(t).must(200, "GET", "/api/v1/agents/"+agent2+"/versions/scope/rewards", ""), "runs"))
			}},
		{"two workspaces, same path and body",
			httpReq(c, "POST", "/api/v1/agents", `{"name": "scoped-agent"}`),
			httpReq(other, "POST", "/api/v1/agents", `{"name": "scoped-agent"}`),
			func(t *testing.T) int {
				n := 0
				for _, cl := range []*client{c, other} {
					for _, it := range list(t, cl.on(t).must(200, "GET", "/api/v1/agents", ""), "items") {
						if it.(map[string]any)["name"] == "scoped-agent" {
							n++
						}
					}
				}
				return n
			}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := fmt.Sprintf("scope-%d", i)
			ra, err := tc.a.send(key)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := tc.b.send(key)
			if err != nil {
				t.Fatal(err)
			}
			if ra.status >= 300 || rb.status >= 300 {
				t.Fatalf("statuses %d and %d, want both successful; bodies %s / %s", ra.status, rb.status, ra.body, rb.body)
			}
			if tc.a.id(t, ra) == tc.b.id(t, rb) {
				t.Errorf("both requests answered %s: the second was a replay of the first", tc.a.id(t, ra))
			}
			if n := tc.sameState(t); n != 2 {
				t.Errorf("%d writes, want 2", n)
			}
		})
	}
}

// TestIdempotentReplaySurvivesRestart: records are durable. After a
// graceful close and a reopen on the same data directory, every key
// (successes and recorded failures alike) replays its first answer byte for
// byte, nothing is written again, and another body is still 409.
func TestIdempotentReplaySurvivesRestart(t *testing.T) {
	h := newHarness(t, config{})
	clk, c := h.clk, h.client(adminKey)
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "restart"}`), "id")
	run := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"version": "r"}`), "id")
	ap := "/api/v1/agents/" + agent

	type write struct {
		name, method, path, body, other string
		status                          int  // of the first answer
		rpc                             bool // errors are google.rpc.Status
	}
	writes := []write{
		{name: "create agent", method: "POST", path: "/api/v1/agents", status: 201,
			body: `{"name": "restart-2"}`, other: `{"name": "restart-3"}`},
		{name: "create run", method: "POST", path: ap + "/runs", status: 201,
			body: `{"version": "r"}`, other: `{"version": "r2"}`},
		{name: "signal", method: "POST", path: ap + "/signals", status: 201,
			body:  fmt.Sprintf(`{"kind": "k", "value": 1, "run_id": %q}`, run),
			other: fmt.Sprintf(`{"kind": "k", "value": 2, "run_id": %q}`, run)},
		{name: "report", method: "POST", path: rewardsPath(run), status: 201,
			body: `{"scorer": "restart", "value": 0.5}`, other: `{"scorer": "restart", "value": 0.4}`},
		{name: "feedback", method: "POST", path: "/v1/workspaces/default/objectives/" + run + "/feedback", status: 200, rpc: true,
			body: `{"metadata": {}, "data": {"score": 1}}`, other: `{"metadata": {}, "data": {}}`},
		{name: "recorded 400", method: "POST", path: rewardsPath(run), status: 400,
			body: `{"scorer": "bad scorer", "value": 0.5}`, other: `{"scorer": "bad  scorer", "value": 0.5}`},
		{name: "recorded 404", method: "POST", path: rewardsPath("external_id:nope"), status: 404,
			body: `{"scorer": "x", "value": 1}`, other: `{"scorer": "y", "value": 1}`},
	}
	state := func(c *client) string {
		var b strings.Builder
		for _, p := range []string{"/api/v1/agents", ap + "/versions/r/rewards", ap + "/runs/" + run + "/signals",
			rewardsPath(run), "/v1/workspaces/default/objectives/" + run + "/feedback"} {
			b.WriteString(c.raw(p))
			b.WriteByte('\n')
		}
		return b.String()
	}
	first := make([]response, len(writes))
	for i, w := range writes {
		r, err := c.rawSend(w.method, w.path, w.body, withKey("restart-"+strings.ReplaceAll(w.name, " ", "-")))
		if err != nil {
			t.Fatal(err)
		}
		if r.status != w.status {
			t.Fatalf("%s: status %d, want %d; body %s", w.name, r.status, w.status, r.body)
		}
		first[i] = r
	}
	before := state(c)

	clk.Advance(time.Hour)
	h.restart()
	c = h.client(adminKey)
	for i, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			again, err := c.rawSend(w.method, w.path, w.body, withKey("restart-"+strings.ReplaceAll(w.name, " ", "-")))
			if err != nil {
				t.Fatal(err)
			}
			sameAnswer(t, first[i], again)
			reused, err := c.rawSend(w.method, w.path, w.other, withKey("restart-"+strings.ReplaceAll(w.name, " ", "-")))
			if err != nil {
				t.Fatal(err)
			}
			if w.rpc {
				rpcStatus(t, reused, 409, 6, "")
			} else {
				apiError(t, reused, 409, "idempotency_key_reused", "")
			}
		})
	}
	if after := state(c); after != before {
		t.Errorf("state changed across restart and replays:\nbefore %s\nafter  %s", before, after)
	}
}

// TestIdempotencyRecordsKeptForTTL: a record outlives a sweep while it is
// younger than the TTL (24 h by default), so the key still replays; once
// a sweep finds it older, the key is free and the same request writes
// again. The service's periodic sweep is SweepIdempotency on a 10-minute
// ticker, so the test calls it.
func TestIdempotencyRecordsKeptForTTL(t *testing.T) {
	cases := []struct {
		name        string
		ttl         time.Duration
		kept, freed time.Duration // clock moves: a sweep after kept keeps the record, one after kept+freed drops it
	}{
		{"default 24h", 0, 24*time.Hour - time.Second, 2 * time.Second},
		{"configured 1m", time.Minute, 59 * time.Second, 2 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newIdemFixture(t, config{IdempotencyTTL: tc.ttl})
			signal := f.ops(t)[2]
			first := signal.mustSend(t, "ttl", signal.body)
			if first.status != 201 {
				t.Fatalf("status %d, want 201; body %s", first.status, first.body)
			}
			f.clk.Advance(tc.kept)
			if err := f.h.svc.SweepIdempotency(); err != nil {
				t.Fatal(err)
			}
			sameAnswer(t, first, signal.mustSend(t, "ttl", signal.body))
			if n := signal.count(t); n != 1 {
				t.Fatalf("%d writes while the record is kept, want 1", n)
			}

			f.clk.Advance(tc.freed)
			if err := f.h.svc.SweepIdempotency(); err != nil {
				t.Fatal(err)
			}
			again := signal.mustSend(t, "ttl", signal.body)
			if again.status != 201 || string(again.body) == string(first.body) {
				t.Fatalf("after expiry: status %d body %s; want a new 201 write", again.status, again.body)
			}
			if n := signal.count(t); n != 2 {
				t.Errorf("%d writes after the record expired and the key was reused, want 2", n)
			}
		})
	}
}

// TestIdempotencyScopeNamesTargetsByID: a key is scoped to the target, not
// to how the path names it: the same write sent by id and then by
// external_id: (or the other way round) is one write, the second answer
// the first replayed; a reference that resolves to nothing is scoped as
// written.
func TestIdempotencyScopeNamesTargetsByID(t *testing.T) {
	f := newIdemFixture(t, config{})
	c := f.c.on(t)
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "scoped", "external_id": "team/a"}`), "id")
	run := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"external_id": "rx"}`), "id")
	// What the run holds: its signals, and its evidence (reports are
	// listed there only).
	held := func() int {
		signals := c.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+run+"/signals", "")
		evidence := c.must(200, "GET", "/v1/jobs/"+run+"/rewards", "")
		return len(list(t, signals, "items")) + len(list(t, evidence, "items"))
	}
	for i, tc := range []struct{ name, first, again, body string }{
		{"feedback by id, then by external id", "/v1/workspaces/default/objectives/" + run + "/feedback",
			"/v1/workspaces/default/objectives/external_id:rx/feedback", `{"metadata": {}, "data": {"score": 0.4}}`},
		{"feedback by external id, then by id", "/v1/workspaces/default/objectives/external_id:rx/feedback",
			"/v1/workspaces/default/objectives/" + run + "/feedback", `{"metadata": {}, "data": {"score": -0.4}}`},
		{"signal by agent external id, then by id", "/api/v1/agents/external_id:team%2Fa/signals",
			"/api/v1/agents/" + agent + "/signals", `{"kind": "human.rating", "value": 1, "run_id": "` + run + `"}`},
		{"report on a job by external id, then by id", "/v1/jobs/external_id:rx/rewards",
			"/v1/jobs/" + run + "/rewards", `{"scorer": "scoped", "value": 0.5}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := withKey(fmt.Sprintf("scope-%d", i))
			first := c.request("POST", tc.first, tc.body, key)
			if first.status != 200 && first.status != 201 {
				t.Fatalf("first: %d %s", first.status, first.body)
			}
			before := held()
			again, err := c.rawSend("POST", tc.again, tc.body, key)
			if err != nil {
				t.Fatal(err)
			}
			sameAnswer(t, first, again)
			if n := held(); n != before {
				t.Errorf("the run held %d items before the retry, %d after", before, n)
			}
		})
	}
	// An unknown external id is its own scope: 404 recorded under the
	// reference as written, a real run's key untouched.
	key := withKey("scope-unknown")
	body := `{"metadata": {}, "data": {"score": 1}}`
	rpcStatus(t, c.request("POST", "/v1/workspaces/default/objectives/external_id:nope/feedback", body, key), 404, 5, "nope")
	if r := c.request("POST", "/v1/workspaces/default/objectives/"+run+"/feedback", body, key); r.status != 200 {
		t.Errorf("the same key on a real run: %d %s, want 200 written", r.status, r.body)
	}
}

// TestWorkspaceRoutesRejectUnknownFields: the bodies of POST /v1/workspaces
// and POST /v1/workspaces/{ws}/api-keys are read strictly, like every body
// under /v1/workspaces (seed 004 "validates strictly").
func TestWorkspaceRoutesRejectUnknownFields(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	rpcStatus(t, c.request("POST", "/v1/workspaces", `{"name": "w", "bogus": 1}`, nil), 400, 3, "bogus")
	rpcStatus(t, c.request("POST", "/v1/workspaces/default/api-keys", `{"name": "k", "Name": "k"}`, nil), 400, 3, "Name")
	c.must(201, "POST", "/v1/workspaces", `{"name": "w"}`)
	c.must(201, "POST", "/v1/workspaces/default/api-keys", `{"name": "k"}`)
}

// TestRecordsOfTheOldScopesAreStillAnswered: scopes now name a target by
// id and leave the error shape out; a record stored before, under the
// scope its request had then (here seed-004 feedback over HTTP: the run
// as the path named it, no agent, the google.rpc shape), still answers a
// retry, and nothing is written again.
func TestRecordsOfTheOldScopesAreStillAnswered(t *testing.T) {
	f := newIdemFixture(t, config{})
	c := f.c.on(t)
	run := f.run(t, `{"external_id": "old-scope"}`)
	keeper, err := idempotency.New(f.h.store, 24*time.Hour, f.clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"metadata": {}, "data": {"score": 1}}`
	ref := "external_id:old-scope"
	legacy := strings.Join([]string{string(api.CreateFeedback), "", ref, "", "", "", "", "1"}, "\x00")
	_, res, err := keeper.Begin("default", legacy, "old-key", []byte(body))
	if err != nil || res == nil {
		t.Fatalf("Begin: %v, %v", res, err)
	}
	if err := keeper.Store(res, idempotency.Record{Status: 200, RequestID: "req_old", Body: []byte(`{"old": true}`)}); err != nil {
		t.Fatal(err)
	}
	keeper.Release(res)
	r, err := c.rawSend("POST", "/v1/workspaces/default/objectives/"+ref+"/feedback", body, withKey("old-key"))
	if err != nil {
		t.Fatal(err)
	}
	if r.status != 200 || string(r.body) != `{"old": true}` || r.header.Get("X-Request-Id") != "req_old" {
		t.Fatalf("a retry of a request recorded under its old scope: %d %s (%s), want the record", r.status, r.body, r.header.Get("X-Request-Id"))
	}
	if n := len(list(t, c.must(200, "GET", "/v1/workspaces/default/objectives/"+run+"/feedback", ""), "items")); n != 0 {
		t.Errorf("%d feedback written, want none", n)
	}
}
