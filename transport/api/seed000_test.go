package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// seedObjective is the objective of seed 000, verbatim.
const seedObjective = `{
  "definition": {
    "horizon_s": 172800,
    "default": "exclude",
    "guards": [{"signal": "run.succeeded", "op": "lt", "value": 1}],
    "terms": [
      {"signal": "human.rating", "weight": 0.5, "scale": [1, 5]},
      {"signal": "external.ticket_closed", "weight": 0.5, "within_s": 86400, "missing": 0}
    ],
    "bounds": [0, 1]
  },
  "note": "Ratings come from the 1-5 widget; a ticket counts if closed within a day."
}`

// seedSignal is the seed's human-rating call with $RUN filled in.
func seedSignal(run string) string {
	return `{"kind": "human.rating", "value": 0.8, "run_id": "` + run + `", "dedup_key": "msg-19"}`
}

// TestSeed000Walkthrough runs seed 000 end to end on the service:
// a rating, its dedup repeat, a claimed object whose outcome lands later,
// the seed's objective, and the reward reads under it and under version 0.
func TestSeed000Walkthrough(t *testing.T) {
	h := newHarness(t, config{})
	clk, c := h.clk, h.client(adminKey)
	t0 := clk.Now()

	agent := c.must(201, "POST", "/api/v1/agents", `{"name": "support-bot"}`)
	a := str(t, agent, "id")
	if !strings.HasPrefix(a, "agt_") {
		t.Fatalf("agent id %q lacks agt_ prefix", a)
	}

	run := c.must(201, "POST", "/api/v1/agents/"+a+"/runs", `{"version": "3", "session_id": "sess-1"}`)
	r := str(t, run, "id")
	if !strings.HasPrefix(r, "run_") {
		t.Fatalf("run id %q lacks run_ prefix", r)
	}
	expect(t, run, a, "agent_id")
	expect(t, run, "3", "version")
	expect(t, run, "sess-1", "session_id")
	expect(t, run, "running", "status")
	expect(t, run, nil, "finished_at")

	// The seed's curl body, byte for byte.
	first := c.request("POST", "/api/v1/agents/"+a+"/signals", seedSignal(r), nil)
	if first.status != 201 {
		t.Fatalf("first signal: status %d, want 201; %s", first.status, first.body)
	}
	sig := first.json(t)
	sigID := str(t, sig, "id")
	if !strings.HasPrefix(sigID, "sig_") {
		t.Errorf("signal id %q lacks sig_ prefix", sigID)
	}
	expect(t, sig, "human.rating", "kind")
	expect(t, sig, 0.8, "value")
	expect(t, sig, r, "run_ids", 0)
	expect(t, sig, false, "duplicate")
	expectTime(t, sig, t0, "occurred_at") // defaults to the time of the call
	expectTime(t, sig, t0, "received_at")

	again := c.request("POST", "/api/v1/agents/"+a+"/signals", seedSignal(r), nil)
	if again.status != 200 {
		t.Fatalf("repeated dedup_key: status %d, want 200; %s", again.status, again.body)
	}
	dup := again.json(t)
	expect(t, dup, sigID, "id")
	expect(t, dup, true, "duplicate")
	if n := len(list(t, c.must(200, "GET", "/api/v1/agents/"+a+"/runs/"+r+"/signals", ""), "items")); n != 1 {
		t.Errorf("run has %d signals after a repeated dedup_key, want 1", n)
	}

	claim := c.must(201, "POST", "/api/v1/agents/"+a+"/runs/"+r+"/claims", `{"object": "zendesk.ticket/42"}`)
	expect(t, claim, "zendesk.ticket/42", "object")

	clk.Advance(10 * time.Minute)
	finishedAt := clk.Now()
	fin := c.must(200, "POST", "/api/v1/agents/"+a+"/runs/"+r+"/finish", `{"succeeded": true}`)
	expect(t, fin, "succeeded", "status")
	expectTime(t, fin, finishedAt, "finished_at")

	// Before any PUT the agent reads the platform default, version 0.
	def := c.must(200, "GET", "/api/v1/agents/"+a+"/objective", "")
	expect(t, def, 0.0, "version")
	expect(t, def, 604800.0, "definition", "horizon_s")

	put := c.request("PUT", "/api/v1/agents/"+a+"/objective", seedObjective, nil)
	if put.status != 200 && put.status != 201 {
		t.Fatalf("PUT objective: status %d; %s", put.status, put.body)
	}
	obj := put.json(t)
	expect(t, obj, 1.0, "version")
	expect(t, obj, "Ratings come from the 1-5 widget; a ticket counts if closed within a day.", "note")
	expect(t, obj, 172800.0, "definition", "horizon_s")
	expect(t, obj, "exclude", "definition", "default")
	expect(t, obj, 86400.0, "definition", "terms", 1, "within_s")
	expect(t, obj, 0.0, "definition", "terms", 1, "missing")

	// The ticket closes an hour after the run finished: within within_s.
	clk.Advance(time.Hour)
	closed := c.must(201, "POST", "/api/v1/agents/"+a+"/signals",
		`{"kind": "external.ticket_closed", "value": 1, "object": "zendesk.ticket/42"}`)
	expect(t, closed, r, "run_ids", 0)

	// Under version 1 (the seed's objective):
	//   human.rating: last = 0.8; scale [1,5] → clamp((0.8−1)/(5−1), 0, 1) = clamp(−0.05) = 0
	//   external.ticket_closed: last = 1, no scale → clamp(1) = 1
	//   guard run.succeeded lt 1: the run succeeded (1), 1 < 1 is false → not matched
	//   u = (0.5·0 + 0.5·1) / (0.5 + 0.5) = 0.5; value = 0 + (1 − 0)·0.5 = 0.5
	//   the rating is observed evidence → scored; horizon 2 days → not matured.
	rw := c.must(200, "GET", "/api/v1/agents/"+a+"/runs/"+r+"/reward", "")
	expect(t, rw, r, "run_id")
	expect(t, rw, 1.0, "objective_version")
	expect(t, rw, "scored", "status")
	expect(t, rw, 0.5, "value")
	expect(t, rw, false, "matured")
	expectTime(t, rw, finishedAt.Add(172800*time.Second), "matures_at")
	expect(t, rw, 0.0, "late_signals")
	for i, want := range []struct {
		signal      string
		weight, raw float64
		scaled      float64
	}{
		{"human.rating", 0.5, 0.8, 0},
		{"external.ticket_closed", 0.5, 1, 1},
	} {
		expect(t, rw, want.signal, "terms", i, "signal")
		expect(t, rw, want.weight, "terms", i, "weight")
		expect(t, rw, "last", "terms", i, "agg")
		expect(t, rw, 1.0, "terms", i, "count")
		expect(t, rw, want.raw, "terms", i, "raw")
		expect(t, rw, want.scaled, "terms", i, "scaled")
		expect(t, rw, false, "terms", i, "imputed")
		expect(t, rw, true, "terms", i, "evidence")
	}
	expect(t, rw, "run.succeeded", "guards", 0, "signal")
	expect(t, rw, "lt", "guards", 0, "op")
	expect(t, rw, 1.0, "guards", 0, "value")
	expect(t, rw, false, "guards", 0, "matched")

	// Under version 0 (the platform default):
	//   human.rating scale [0,1] → 0.8; human.approval has no signal → skipped
	//   u = 1·0.8 / 1 = 0.8; value = 0.8; horizon 604800 s.
	rw0 := c.must(200, "GET", "/api/v1/agents/"+a+"/runs/"+r+"/reward?objective_version=0", "")
	expect(t, rw0, 0.0, "objective_version")
	expect(t, rw0, "scored", "status")
	expect(t, rw0, 0.8, "value")
	expectTime(t, rw0, finishedAt.Add(604800*time.Second), "matures_at")
	expect(t, rw0, "human.rating", "terms", 0, "signal")
	expect(t, rw0, 0.8, "terms", 0, "scaled")
	expect(t, rw0, "human.approval", "terms", 1, "signal")
	expect(t, rw0, 0.0, "terms", 1, "count")
	expect(t, rw0, nil, "terms", 1, "raw")
	expect(t, rw0, nil, "terms", 1, "scaled")

	// Version "3" has one unmatured, scored run: no mean yet, nothing lowest.
	sum := c.must(200, "GET", "/api/v1/agents/"+a+"/versions/3/rewards", "")
	for k, want := range map[string]any{"version": "3", "objective_version": 1.0, "runs": 1.0, "matured": 0.0,
		"scored": 1.0, "guarded": 0.0, "excluded": 0.0, "mean": nil} {
		expect(t, sum, want, k)
	}
	if n := len(list(t, sum, "lowest")); n != 0 {
		t.Errorf("lowest has %d unmatured runs, want 0", n)
	}

	// Three days later the run has matured: it is averaged and listed. A
	// rating received now is late (after finished_at + 2 days): counted, not used.
	clk.Advance(72 * time.Hour)
	// The clock alone matures it: no event came since the summary above.
	sum = c.must(200, "GET", "/api/v1/agents/"+a+"/versions/3/rewards", "")
	expect(t, sum, 1.0, "matured")
	expect(t, sum, 0.5, "mean")
	c.must(201, "POST", "/api/v1/agents/"+a+"/signals", fmt.Sprintf(`{"kind": "human.rating", "value": 5, "run_id": %q}`, r))
	rwLate := c.must(200, "GET", "/api/v1/agents/"+a+"/runs/"+r+"/reward", "")
	expect(t, rwLate, true, "matured")
	expect(t, rwLate, 0.5, "value")
	expect(t, rwLate, 1.0, "late_signals")
	expect(t, rwLate, 0.8, "terms", 0, "raw")
	sum = c.must(200, "GET", "/api/v1/agents/"+a+"/versions/3/rewards", "")
	expect(t, sum, 1.0, "matured")
	expect(t, sum, 0.5, "mean")
	expect(t, sum, r, "lowest", 0, "run_id")
	expect(t, sum, 0.5, "lowest", 0, "value")

	cur := c.raw("/api/v1/agents/" + a + "/objective")
	v1 := c.raw("/api/v1/agents/" + a + "/objective/versions/1")
	if cur != v1 {
		t.Errorf("current objective differs from version 1:\n%s\n%s", cur, v1)
	}
	if cur != string(put.body) {
		t.Errorf("GET objective differs from the PUT response:\n%s\n%s", cur, put.body)
	}
	c.must(404, "GET", "/api/v1/agents/"+a+"/objective/versions/2", "")
}

// TestObjectSignalResolvedOnRead: an object signal reaches runs that claim
// the object after it was received, because claims are resolved on read.
func TestObjectSignalResolvedOnRead(t *testing.T) {
	c := newHarness(t, config{}).client(adminKey)
	a := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "ops"}`), "id")
	r1 := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/runs", `{"version": "1"}`), "id")
	r2 := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/runs", `{"version": "1"}`), "id")

	c.must(201, "POST", "/api/v1/agents/"+a+"/runs/"+r1+"/claims", `{"object": "jira.issue/7"}`)
	sig := c.must(201, "POST", "/api/v1/agents/"+a+"/signals",
		`{"kind": "human.approval", "value": 1, "object": "jira.issue/7"}`)
	sigID := str(t, sig, "id")
	if ids := list(t, sig, "run_ids"); len(ids) != 1 || ids[0] != r1 {
		t.Errorf("run_ids at receipt = %v, want [%s]", ids, r1)
	}
	c.must(201, "POST", "/api/v1/agents/"+a+"/runs/"+r2+"/claims", `{"object": "jira.issue/7"}`)

	for _, r := range []string{r1, r2} {
		items := list(t, c.must(200, "GET", "/api/v1/agents/"+a+"/runs/"+r+"/signals", ""), "items")
		if len(items) != 1 || str(t, items[0], "id") != sigID {
			t.Errorf("run %s signals = %v, want the object signal %s", r, items, sigID)
		}
		// Default objective: human.approval 1, scale [0,1] → u = 1 → value 1.
		rw := c.must(200, "GET", "/api/v1/agents/"+a+"/runs/"+r+"/reward", "")
		expect(t, rw, "scored", "status")
		expect(t, rw, 1.0, "value")
		expect(t, rw, 1.0, "terms", 1, "count")
	}
}

// TestSignalToARunByExternalID: a signal's run_id may name the run as
// external_id:<value>, as a path may; the signal keeps the run's id. A run
// of another agent is 404, as by id.
func TestSignalToARunByExternalID(t *testing.T) {
	c := newHarness(t, config{}).client(adminKey)
	a := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "support"}`), "id")
	other := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "other"}`), "id")
	r := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/runs", `{"external_id": "ticket-1"}`), "id")
	c.must(201, "POST", "/api/v1/agents/"+other+"/runs", `{"external_id": "ticket-2"}`)

	sig := c.must(201, "POST", "/api/v1/agents/"+a+"/signals",
		`{"kind": "human.approval", "value": 1, "run_id": "external_id:ticket-1"}`)
	expect(t, sig, r, "run_ids", 0)
	items := list(t, c.must(200, "GET", "/api/v1/agents/"+a+"/runs/external_id:ticket-1/signals", ""), "items")
	if len(items) != 1 || str(t, items[0], "id") != str(t, sig, "id") {
		t.Errorf("run's signals = %v, want the signal sent by external id", items)
	}
	for _, ref := range []string{"external_id:ticket-2", "external_id:no-such-ticket"} {
		got := c.request("POST", "/api/v1/agents/"+a+"/signals",
			`{"kind": "human.approval", "value": 1, "run_id": "`+ref+`"}`, nil)
		if got.status != 404 || !strings.Contains(str(t, got.json(t), "error", "message"), ref) {
			t.Errorf("signal to %s: %d %s, want 404 naming it", ref, got.status, got.body)
		}
	}
}

// TestSessionSignalAttachesAtReceipt: a session signal goes to the session's
// most recently finished run when it is received, and stays there; a
// session with no finished run is 404 not_found.
func TestSessionSignalAttachesAtReceipt(t *testing.T) {
	h := newHarness(t, config{})
	clk, c := h.clk, h.client(adminKey)
	a := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "chat"}`), "id")
	runs := "/api/v1/agents/" + a + "/runs/"
	sigs := "/api/v1/agents/" + a + "/signals"

	rA := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/runs", `{"session_id": "conv-1"}`), "id")
	r := c.request("POST", sigs, `{"kind": "human.rating", "value": 1, "session_id": "conv-1"}`, nil)
	if r.status != 404 || str(t, r.json(t), "error", "code") != "not_found" {
		t.Fatalf("session with no finished run: %d %s, want 404 not_found", r.status, r.body)
	}
	c.must(404, "POST", sigs, `{"kind": "human.rating", "value": 1, "session_id": "no-such-session"}`)

	clk.Advance(time.Second)
	c.must(200, "POST", runs+rA+"/finish", `{"succeeded": true}`)
	rB := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/runs", `{"session_id": "conv-1"}`), "id")
	clk.Advance(time.Second)
	first := c.must(201, "POST", sigs, `{"kind": "human.rating", "value": 0.2, "session_id": "conv-1"}`)
	expect(t, first, rA, "run_ids", 0) // rB is not finished yet

	clk.Advance(time.Second)
	c.must(200, "POST", runs+rB+"/finish", `{"succeeded": true}`)
	clk.Advance(time.Second)
	second := c.must(201, "POST", sigs, `{"kind": "human.rating", "value": 0.9, "session_id": "conv-1"}`)
	expect(t, second, rB, "run_ids", 0)

	// The first signal stayed with rA although rB is now the latest.
	ratings := func(run string) []string {
		var ids []string
		for _, it := range list(t, c.must(200, "GET", runs+run+"/signals", ""), "items") {
			if str(t, it, "kind") == "human.rating" {
				ids = append(ids, str(t, it, "id"))
			}
		}
		return ids
	}
	if got := ratings(rA); len(got) != 1 || got[0] != str(t, first, "id") {
		t.Errorf("run A ratings = %v, want [%s]", got, str(t, first, "id"))
	}
	if got := ratings(rB); len(got) != 1 || got[0] != str(t, second, "id") {
		t.Errorf("run B ratings = %v, want [%s]", got, str(t, second, "id"))
	}
	expect(t, c.must(200, "GET", runs+rA+"/reward", ""), 0.2, "value")
	expect(t, c.must(200, "GET", runs+rB+"/reward", ""), 0.9, "value")
}

// TestErrorsLeaveStateUnchanged: each bad request gets its status and error
// code, a message naming the field, an X-Request-Id equal to the body's
// request_id, and changes nothing a read can see. (The door's own refusals,
// a body not declared JSON among them, are in transport/httpdoor.)
func TestErrorsLeaveStateUnchanged(t *testing.T) {
	c := newHarness(t, config{}).client(adminKey)
	a := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "err"}`), "id")
	r := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/runs", `{"version": "1"}`), "id")
	c.must(201, "POST", "/api/v1/agents/"+a+"/signals", `{"kind": "human.rating", "value": 0.5, "run_id": "`+r+`", "dedup_key": "d1"}`)
	c.must(200, "POST", "/api/v1/agents/"+a+"/runs/"+r+"/finish", `{"succeeded": true}`)
	c.putObjective(a, seedObjective)

	agentPath := "/api/v1/agents/" + a
	runPath := agentPath + "/runs/" + r
	state := func(c *client) string {
		var b strings.Builder
		for _, p := range []string{"/api/v1/agents", agentPath, runPath, runPath + "/signals",
			agentPath + "/objective", agentPath + "/objective/versions/1"} {
			b.WriteString(c.raw(p))
			b.WriteByte('\n')
		}
		return b.String()
	}
	before := state(c)

	sig := func(fields string) string { return `{"kind": "human.rating", "value": 1, ` + fields + `}` }
	badScale := strings.Replace(seedObjective, `"within_s": 86400`, `"within_s": 86400, "scale": [5, 1]`, 1)
	cases := []struct {
		name                  string
		key                   string // "" uses the admin key; "-" sends none
		method, path, body    string
		status                int
		code, messageContains string
	}{
		{name: "objective scale lo above hi", method: "PUT", path: agentPath + "/objective", body: badScale,
			status: 400, code: "invalid_request", messageContains: "definition.terms[1].scale"},
		{name: "objective without definition", method: "PUT", path: agentPath + "/objective", body: `{"note": "x"}`,
			status: 400, code: "invalid_request", messageContains: "definition"},
		{name: "signal kind with a space", method: "POST", path: agentPath + "/signals",
			body: `{"kind": "human rating", "value": 1, "run_id": "` + r + `"}`, status: 400, code: "invalid_request", messageContains: "kind"},
		{name: "signal value overflows to infinity", method: "POST", path: agentPath + "/signals",
			body: `{"kind": "human.rating", "value": 1e999, "run_id": "` + r + `"}`, status: 400, code: "invalid_request", messageContains: "value"},
		{name: "signal value a string", method: "POST", path: agentPath + "/signals",
			body: `{"kind": "human.rating", "value": "1", "run_id": "` + r + `"}`, status: 400, code: "invalid_request", messageContains: "value"},
		{name: "signal with two subjects", method: "POST", path: agentPath + "/signals",
			body: sig(`"run_id": "` + r + `", "object": "zendesk.ticket/1"`), status: 400, code: "invalid_request", messageContains: "run_id"},
		{name: "signal without subject", method: "POST", path: agentPath + "/signals",
			body: `{"kind": "human.rating", "value": 1}`, status: 400, code: "invalid_request", messageContains: "run_id"},
		{name: "signal occurred_at not RFC 3339", method: "POST", path: agentPath + "/signals",
			body: sig(`"run_id": "` + r + `", "occurred_at": "yesterday"`), status: 400, code: "invalid_request", messageContains: "occurred_at"},
		{name: "body not JSON", method: "POST", path: agentPath + "/signals", body: `{"kind": `,
			status: 400, code: "invalid_request", messageContains: "JSON"},
		{name: "no key", key: "-", method: "GET", path: agentPath, status: 401, code: "unauthenticated"},
		{name: "unknown key", key: "pl_not_a_key", method: "POST", path: agentPath + "/signals",
			body: sig(`"run_id": "` + r + `"`), status: 401, code: "unauthenticated"},
		{name: "unknown agent", method: "GET", path: "/api/v1/agents/agt_01ZZZZZZZZZZZZZZZZZZZZZZZZ", status: 404, code: "not_found"},
		{name: "unknown run", method: "GET", path: agentPath + "/runs/run_01ZZZZZZZZZZZZZZZZZZZZZZZZ", status: 404, code: "not_found"},
		{name: "signal to unknown run", method: "POST", path: agentPath + "/signals",
			body: sig(`"run_id": "run_01ZZZZZZZZZZZZZZZZZZZZZZZZ"`), status: 404, code: "not_found"},
		{name: "unknown objective version", method: "GET", path: agentPath + "/objective/versions/9", status: 404, code: "not_found"},
		{name: "finish twice", method: "POST", path: runPath + "/finish", body: `{"succeeded": false}`,
			status: 409, code: "conflict"},
		{name: "DELETE an agent", method: "DELETE", path: agentPath, status: 405, code: "method_not_allowed"},
		{name: "GET the signal collection", method: "GET", path: agentPath + "/signals", status: 405, code: "method_not_allowed"},
		{name: "PUT a run", method: "PUT", path: runPath, body: `{}`, status: 405, code: "method_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cc := c.on(t)
			switch tc.key {
			case "-":
				cc = cc.as("")
			case "":
			default:
				cc = cc.as(tc.key)
			}
			res := cc.request(tc.method, tc.path, tc.body, nil)
			if res.status != tc.status {
				t.Fatalf("status %d, want %d; body %s", res.status, tc.status, res.body)
			}
			body := res.json(t)
			expect(t, body, tc.code, "error", "code")
			if msg := str(t, body, "error", "message"); !strings.Contains(msg, tc.messageContains) {
				t.Errorf("message %q does not name %q", msg, tc.messageContains)
			}
			if rid := str(t, body, "error", "request_id"); rid != res.header.Get("X-Request-Id") {
				t.Errorf("body request_id %q != X-Request-Id %q", rid, res.header.Get("X-Request-Id"))
			}
			if after := state(c.on(t)); after != before {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}
