package server

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plaudit/plaudit/backup"
	"github.com/plaudit/plaudit/internal/openapitest"
	"github.com/plaudit/plaudit/transport/httpdoor"
)

// conformance drives one server through a script and holds every request
// it sends (when the script means it to be valid) and every answer to the
// OpenAPI document, recording which operations answered which statuses.
type conformance struct {
	t        *testing.T
	c        *client
	oa       *openapitest.Doc
	answered map[string]map[int]bool // "GET /api/v1/agents/{agent}" → statuses
}

// step sends one request as key and fails unless the answer has status
// want and conforms to the document; valid says the request should
// conform too (false for the error cases that send what the document
// forbids).
func (cf *conformance) step(key, method, path, body string, hdr map[string]string, want int, valid bool) map[string]any {
	cf.t.Helper()
	c := cf.c.as(key)
	req, err := c.build(method, path, body, hdr)
	if err != nil {
		cf.t.Fatal(err)
	}
	x := openapitest.Exchange{Method: method, URL: req.URL.String(), Header: req.Header.Clone(), Body: []byte(body)}
	r, err := c.send(req)
	if err != nil {
		cf.t.Fatalf("%s %s: %v", method, path, err)
	}
	if r.status != want {
		cf.t.Fatalf("%s %s: %d, want %d; body %s", method, path, r.status, want, r.body)
	}
	x.Status, x.RespHeader, x.RespBody = r.status, r.header, r.body
	c.conform(x, valid)
	tmpl, documented := cf.oa.Operation(x)
	if documented {
		op := method + " " + tmpl
		if cf.answered[op] == nil {
			cf.answered[op] = map[int]bool{}
		}
		cf.answered[op][want] = true
	}
	if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		return nil
	}
	return r.json(cf.t)
}

// beyond sends a request that is past a limit the document's schemas
// state: the server refuses it (400) and so does the document.
func (cf *conformance) beyond(method, path, body string) {
	cf.t.Helper()
	req, err := cf.c.as(adminKey).build(method, path, body, nil)
	if err != nil {
		cf.t.Fatal(err)
	}
	x := openapitest.Exchange{Method: method, URL: req.URL.String(), Header: req.Header.Clone(), Body: []byte(body)}
	if v := cf.oa.CheckRequest(x); v == "" {
		cf.t.Errorf("%s %s %.80s…: the document's schemas accept it, the server refuses it", method, path, body)
	}
	cf.step(adminKey, method, path, body, nil, 400, false)
}

// ok is a valid request answered want.
func (cf *conformance) ok(method, path, body string, want int) map[string]any {
	cf.t.Helper()
	return cf.step(adminKey, method, path, body, nil, want, true)
}

// TestOpenAPIConformance: every operation of the OpenAPI document answers
// a valid request as the document says, and the common errors (400 with a
// field path on both error shapes, 401, 403, 404, 405, 409, 413, 415, 202
// with Retry-After) are shaped as it says, on a real server. Requests are
// validated too, so the document's request schemas accept what the
// README's examples send. The last check fails if an operation of the
// document went unexercised.
func TestOpenAPIConformance(t *testing.T) {
	s := startServer(t, Config{JudgeDeadline: 2 * time.Second, MaxBody: 64 << 10})
	oa, err := theOpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	cf := &conformance{t: t, c: newClient(t, s, adminKey), oa: oa, answered: map[string]map[int]bool{}}
	id := func(m map[string]any, path ...any) string { return str(t, m, path...) }

	// The door's own paths.
	cf.step("", "GET", "/healthz", "", nil, 200, true)
	cf.step("", "GET", "/metrics", "", nil, 200, true)
	r := cf.c.as("").request("GET", "/openapi.json", "", nil)
	if r.status != 200 || !bytes.Equal(r.body, httpdoor.OpenAPI()) {
		t.Fatalf("GET /openapi.json: %d, %d bytes; want 200 and the document", r.status, len(r.body))
	}
	cf.answered["GET /openapi.json"] = map[int]bool{200: true}
	// The backup: its errors are JSON, its 200 a tar stream.
	cf.step("", "POST", backup.Path, "", nil, 401, false)
	if _, err := backup.Fetch(context.Background(), http.DefaultClient, "http://"+s.HTTPAddr(), adminKey, t.TempDir()); err != nil {
		t.Fatalf("POST %s: %v", backup.Path, err)
	}
	cf.answered["POST "+backup.Path] = map[int]bool{200: true}

	// Workspaces and keys.
	ws2 := id(cf.ok("POST", "/v1/workspaces", `{"name": "second"}`, 201), "id")
	cf.ok("GET", "/v1/workspaces", "", 200)
	created := cf.ok("POST", "/v1/workspaces/default/api-keys", `{"name": "runtime"}`, 201)
	key, keyID := id(created, "key"), id(created, "id")
	cf.ok("GET", "/v1/workspaces/default/api-keys", "", 200)

	// Agents, variations, runs, claims, traces, signals.
	agent := id(cf.ok("POST", "/api/v1/agents", `{"name": "support", "external_id": "support-bot",
		"labels": {"team": "cx"}, "selection_mode": "VARIATION_SELECTION_MODE_WEIGHTED"}`, 201), "id")
	cf.ok("GET", "/api/v1/agents", "", 200)
	// Limits the document states are in its schemas: at the limit both
	// take a request, past it both refuse it.
	labels := func(n, keyLen, valLen int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			k := fmt.Sprintf("k%d", i)
			k += strings.Repeat("k", max(keyLen-len(k), 0))
			fmt.Fprintf(&b, "%q: %q", k, strings.Repeat("v", valLen))
		}
		return "{" + b.String() + "}"
	}
	cf.ok("POST", "/api/v1/agents", `{"name": "`+strings.Repeat("n", 200)+`", "labels": `+labels(64, 317, 256)+`}`, 201)
	cf.beyond("POST", "/api/v1/agents", `{"name": "`+strings.Repeat("n", 201)+`"}`)
	cf.beyond("POST", "/api/v1/agents", `{"name": "n", "labels": `+labels(65, 1, 1)+`}`)
	cf.beyond("POST", "/api/v1/agents", `{"name": "n", "labels": `+labels(1, 318, 1)+`}`)
	cf.beyond("POST", "/api/v1/agents", `{"name": "n", "labels": `+labels(1, 1, 257)+`}`)
	cf.beyond("POST", "/api/v1/agents", `{"name": "n", "external_id": "`+strings.Repeat("e", 201)+`"}`)
	cf.ok("GET", "/api/v1/agents/external_id:support-bot", "", 200)
	a := "/api/v1/agents/" + agent
	variation := id(cf.ok("POST", a+"/variations", `{"name": "concise", "config": {"temperature": 0.2, "nested": {"x": [1, 2]}}}`, 201), "id")
	cf.ok("POST", a+"/variations", `{"name": "bare"}`, 201)
	cf.ok("GET", a+"/variations", "", 200)
	cf.ok("GET", a+"/variations/"+variation, "", 200)
	run := id(cf.ok("POST", a+"/runs", `{"version": "3", "session_id": "chat-7", "external_id": "job-812",
		"labels": {"env": "prod"}, "variation_id": "`+variation+`"}`, 201), "id")
	cf.ok("POST", a+"/runs", "", 201) // an empty body needs no Content-Type
	cf.ok("POST", a+"/runs", `{"version": 3}`, 201)
	rp := a + "/runs/" + run
	cf.ok("POST", rp+"/claims", `{"object": "zendesk.ticket/42"}`, 201)
	cf.ok("POST", rp+"/claims", `{"object": "zendesk.ticket/42"}`, 200)
	cf.ok("POST", rp+"/traces", `{"trace_id": "tr-1", "turn_id": "turn-1"}`, 201)
	cf.ok("POST", rp+"/traces", `{"trace_id": "tr-1", "turn_id": "turn-1"}`, 200)
	cf.ok("POST", rp+"/traces", `{"trace_id": "tr-2"}`, 201)
	sig := `{"kind": "human.rating", "value": 4, "run_id": "` + run + `", "dedup_key": "msg-19", "occurred_at": "2026-01-10T11:00:00Z"}`
	cf.ok("POST", a+"/signals", sig, 201)
	cf.ok("POST", a+"/signals", sig, 200) // the dedup key: the first signal, duplicate
	keyed := map[string]string{"Idempotency-Key": "sig-1"}
	cf.step(adminKey, "POST", a+"/signals", `{"kind": "human.approval", "value": 1, "object": "zendesk.ticket/42"}`, keyed, 201, true)
	cf.step(adminKey, "POST", a+"/signals", `{"kind": "human.approval", "value": 1, "object": "zendesk.ticket/42"}`, keyed, 201, true)
	cf.ok("POST", rp+"/finish", `{"succeeded": true, "finished_at": "2026-01-10T11:30:00Z"}`, 200)
	cf.ok("POST", a+"/signals", `{"kind": "csat", "value": 0.5, "session_id": "chat-7"}`, 201)
	cf.ok("GET", rp, "", 200)
	cf.ok("GET", "/api/v1/agents/external_id:support-bot/runs/external_id:job-812/signals", "", 200)

	// Objectives and rewards.
	cf.ok("GET", a+"/objective", "", 200)
	cf.ok("GET", a+"/objective/versions/0", "", 200)
	cf.ok("PUT", a+"/objective", `{"definition": {"horizon_s": 172800, "default": "exclude",
		"guards": [{"signal": "run.succeeded", "op": "lt", "value": 1}],
		"terms": [{"signal": "human.rating", "weight": 0.5, "scale": [1, 5]},
		          {"signal": "external.ticket_closed", "weight": 0.5, "within_s": 86400, "missing": 0, "agg": "max", "evidence": false},
		          {"signal": "ci.tests", "weight": 1}],
		"bounds": [0, 1]}, "note": "Ratings come from the 1-5 widget."}`, 200)
	cf.ok("GET", a+"/objective/versions/1", "", 200)
	cf.ok("GET", rp+"/reward", "", 200)
	cf.ok("GET", rp+"/reward?objective_version=0", "", 200)
	cf.ok("GET", a+"/overview", "", 200)
	cf.ok("GET", a+"/overview?buckets=7&bucket_s=86400&rewards=false", "", 200)
	cf.ok("GET", a+"/versions/3/rewards?objective_version=1&limit=5", "", 200)
	cf.ok("POST", a+"/objective/preview", `{"definition": {"terms": [{"signal": "human.rating", "weight": 1, "scale": [1, 5]}],
		"default": 0.5}, "version": 3, "limit": 5}`, 200)
	cf.ok("POST", a+"/objective/preview", `{"definition": {"terms": [{"signal": "ci.tests", "weight": 1}]}}`, 200)

	// Seed 001: reports on the job.
	j := "/v1/jobs/" + run + "/rewards"
	cf.step(adminKey, "POST", j, `{"kind": "external", "scorer": "ci.tests", "value": 0.92, "detail": {"suite": "unit", "passed": 46}}`,
		map[string]string{"Idempotency-Key": "ci-run-812"}, 201, true)
	cf.ok("POST", j, `{"kind": "external", "scorer": "ci.lint", "value": null, "weight": 0.5}`, 201)
	cf.ok("POST", j, `{"kind": "review", "value": 1}`, 201)
	cf.ok("POST", j, `{"kind": "choice", "shown": ["a", {"b": 1}], "chosen": {"b": 1}, "prompt": "Pick one"}`, 201)
	cf.ok("POST", j, `{"value": {"kind": "review", "scorer": "qa", "value": 0.5, "trace_id": "tr-1"}}`, 201)

	// Seed 004: objectives (runs), feedback, variations.
	w := "/v1/workspaces/default"
	obj := cf.ok("POST", w+"/objectives", `{"metadata": {"externalId": "ticket-4521", "labels": {"cadenya.com/priority": "high"}},
		"spec": {"agentId": "`+agent+`"}}`, 200)
	cf.ok("POST", w+"/objectives", `{"spec": {"agentId": "external_id:support-bot", "agentVariationId": "`+variation+`"}}`, 200)
	cf.ok("GET", w+"/objectives/"+id(obj, "metadata", "id"), "", 200)
	cf.ok("GET", w+"/objectives/external_id:ticket-4521", "", 200)
	cf.ok("POST", w+"/objectives/external_id:ticket-4521/feedback", `{"metadata": {}, "data": {"score": 1.0, "comment": "Short and on point."}}`, 200)
	cf.ok("POST", w+"/objectives/"+run+"/feedback", `{"metadata": {"externalId": "fb-1", "labels": {"source": "widget"}}, "data": {"score": -0.5}}`, 200)
	cf.ok("POST", w+"/objectives/"+run+"/feedback", `{"metadata": {}, "data": {}}`, 200)
	cf.ok("GET", w+"/objectives/"+run+"/feedback?limit=2&labels=source=widget", "", 200)
	page := cf.ok("GET", w+"/objectives/"+run+"/feedback?limit=1", "", 200)
	cf.ok("GET", w+"/objectives/"+run+"/feedback?limit=1&cursor="+id(page, "nextCursor"), "", 200)
	cf.ok("GET", w+"/agents/"+agent+"/feedback?sentiment=FEEDBACK_SENTIMENT_POSITIVE&includeInfo=true&query=point&createdAfter=2020-01-01T00:00:00Z&createdBefore=2199-01-01T00:00:00Z", "", 200)
	cf.ok("GET", w+"/agents/"+agent+"/feedback?agentVariationId="+variation, "", 200)
	cf.ok("GET", w+"/agents/"+agent+"/variations/"+variation, "", 200)

	// Seed 003: tasks, judge versions, judged rewards, calibration, summary.
	checks := `{"id": "acme/checks", "prompt": "Summarise the ticket.", "soft_cap_chars": 2000, "rubric": {"criteria": [
		{"id": "mentions-refund", "must": true, "weight": 2, "check": {"type": "contains", "value": "refund"}},
		{"id": "short", "check": {"type": "max_chars", "value": 400}},
		{"id": "close", "check": {"type": "number_close", "value": 42, "tolerance": 0.5}},
		{"id": "json", "check": {"type": "json_valid"}}]}}`
	tv := id(cf.ok("POST", "/v1/tasks", checks, 201), "version")
	cf.ok("POST", "/v1/tasks", checks, 200)
	cf.ok("POST", "/v1/tasks", `{"id": "acme/tone", "rubric": {"criteria": [{"id": "tone", "check": {"judge": "tone"}}]}}`, 201)
	cf.ok("GET", "/v1/tasks/acme%2Fchecks", "", 200)
	cf.ok("GET", "/v1/tasks", "", 200)
	cf.ok("GET", "/v1/tasks/acme%2Fchecks/versions/"+tv, "", 200)
	cf.ok("PUT", "/v1/judge-versions/j2", `{"judges": {"tone": "tone-v2"}}`, 201)
	cf.ok("PUT", "/v1/judge-versions/j2", `{"judges": {"tone": "tone-v2"}}`, 200)
	cf.ok("GET", "/v1/judge-versions", "", 200)
	answer := `{"task": {"id": "acme/checks"}, "answer": "A refund of 42 is on its way.", "episode_id": "` + run + `", "client_ref": "c-1"}`
	cf.ok("POST", "/v1/rewards", answer, 201)
	cf.ok("POST", "/v1/rewards", answer, 200) // the same answer: the first reward
	cf.ok("POST", "/v1/rewards", `{"task": {"id": "acme/checks", "version": "`+tv+`"}, "answer": "", "judge_version": "j1"}`, 201)
	wait0 := map[string]string{"Prefer": "wait=0"}
	pending := cf.step(adminKey, "POST", "/v1/rewards", `{"task": {"id": "acme/tone"}, "answer": "Sorry!", "episode_id": "`+run+`"}`, wait0, 202, true)
	rw := "/v1/rewards/" + id(pending, "id")
	cf.step(adminKey, "GET", rw, "", wait0, 202, true)
	cf.step(adminKey, "GET", rw, "", map[string]string{"Prefer": "wait=10"}, 200, true) // failed: no judge answers
	cf.ok("GET", "/v1/tasks/acme%2Fchecks/calibration", "", 200)
	cal := cf.ok("GET", "/v1/tasks/acme%2Fchecks/calibration?judge_version=j2", "", 200)
	if n := len(list(t, cal, "items")); n != 1 {
		t.Errorf("calibration has %d groups, want 1 (a scored reward and a review on the job)", n)
	}
	sum := cf.ok("GET", "/v1/tasks/acme%2Fchecks/rewards/summary", "", 200)
	if n := list(t, sum, "items"); len(n) != 1 || n[0].(map[string]any)["scored"] != 2.0 {
		t.Errorf("reward summary %v, want one version with 2 scored rewards", n)
	}
	cf.ok("GET", "/v1/tasks/acme%2Fchecks/rewards/summary?judge_version=j2", "", 200)
	ev := cf.ok("GET", j, "", 200) // reports, feedback, judged rewards (check and model_judge)
	kinds := map[string]bool{}
	for _, it := range list(t, ev, "items") {
		kinds[str(t, it, "kind")] = true
	}
	for _, k := range []string{"external", "review", "choice", "feedback", "check", "model_judge"} {
		if !kinds[k] {
			t.Errorf("the evidence of the job has no %s item: %v", k, slices.Collect(maps.Keys(kinds)))
		}
	}

	// The common errors, in both shapes.
	for _, tc := range []struct {
		method, path, body string
		valid              bool
		message            []any // where the message is, in the path's error shape
		field              string
	}{
		{"PUT", a + "/objective", `{"definition": {"terms": [{"signal": "x", "weight": 1, "scale": [5, 1]}]}}`, true,
			[]any{"error", "message"}, "definition.terms[0].scale"},
		{"POST", a + "/objective/preview", `{"definition": {"terms": [{"signal": "x", "weight": 1, "scale": [5, 1]}]}}`, true,
			[]any{"error", "message"}, "definition.terms[0].scale"},
		{"POST", a + "/signals", `{"kind": "bad kind!", "value": 1, "run_id": "` + run + `"}`, false, []any{"error", "message"}, "kind"},
		{"POST", w + "/objectives/" + run + "/feedback", `{"metadata": {}, "data": {"score": 2}}`, false, []any{"message"}, "data.score"},
		{"POST", j, `{"value": {"kind": "review", "value": 3}}`, false, []any{"error", "message"}, "value.value"},
	} {
		e := cf.step(adminKey, tc.method, tc.path, tc.body, nil, 400, tc.valid)
		if msg := str(t, e, tc.message...); !strings.HasPrefix(msg, tc.field+":") {
			t.Errorf("%s %s: message %q does not name %s", tc.method, tc.path, msg, tc.field)
		}
	}
	cf.step(adminKey, "GET", a+"/versions/3/rewards?limit=0", "", nil, 400, false)
	cf.step(adminKey, "POST", "/v1/rewards", `{"task": {"id": "acme/checks"}, "answer": "x"}`, wait0, 201, true)
	cf.step(adminKey, "POST", "/v1/rewards", `{"task": {"id": "acme/checks"}, "answer": "x"}`, map[string]string{"Prefer": "wait=500"}, 400, true)
	cf.step("", "GET", "/api/v1/agents", "", nil, 401, false)
	cf.step("pl_not_a_key", "GET", "/v1/workspaces", "", nil, 401, false)
	cf.step(key, "GET", "/v1/workspaces/"+ws2+"/api-keys", "", nil, 403, true)
	cf.step(key, "POST", "/v1/workspaces", `{"name": "third"}`, nil, 403, true)
	cf.step(adminKey, "GET", "/api/v1/agents/agt_01ZZZZZZZZZZZZZZZZZZZZZZZZ", "", nil, 404, true)
	cf.step(adminKey, "GET", w+"/objectives/run_01ZZZZZZZZZZZZZZZZZZZZZZZZ", "", nil, 404, true)
	cf.step(adminKey, "GET", "/api/v1/nothing", "", nil, 404, false)
	cf.step(adminKey, "DELETE", "/api/v1/agents", "", nil, 405, false)
	cf.step(adminKey, "DELETE", w+"/objectives", "", nil, 405, false)
	cf.step(adminKey, "POST", rp+"/finish", `{"succeeded": false}`, nil, 409, true)
	cf.step(adminKey, "POST", a+"/signals", `{"kind": "human.approval", "value": 0, "object": "zendesk.ticket/42"}`, keyed, 409, true)
	cf.step(adminKey, "PUT", "/v1/judge-versions/j2", `{"judges": {"tone": "tone-v3"}}`, nil, 409, true)
	big := `{"name": "` + strings.Repeat("x", 70<<10) + `"}`
	cf.step(adminKey, "POST", "/api/v1/agents", big, nil, 413, false)
	cf.step(adminKey, "POST", w+"/objectives", big, nil, 413, false)
	cf.step(adminKey, "POST", "/api/v1/agents", `name=x`, map[string]string{"Content-Type": "text/plain"}, 415, false)

	// Revoking the key: then it is unauthenticated.
	cf.ok("DELETE", "/v1/workspaces/default/api-keys/"+keyID, "", 200)
	cf.step(key, "GET", "/api/v1/agents", "", nil, 401, true)

	// Every operation of the document answered a valid request with a 2xx.
	// GET /v1/cluster answers 2xx only on a cluster node: the cluster test
	// (TestEveryNodeOfAClusterServesEveryAgent) has its 200 checked against
	// the document by the same client; here it answers 404.
	cf.step(adminKey, "GET", "/v1/cluster", "", nil, 404, true)
	clusterOnly := []string{"GET /v1/cluster"}
	var missing []string
	for p, ops := range docOperations(t) {
		for m := range ops {
			if slices.Contains(clusterOnly, m+" "+p) {
				continue
			}
			got := cf.answered[m+" "+p]
			if !slices.ContainsFunc(slices.Collect(maps.Keys(got)), func(st int) bool { return st < 300 }) {
				missing = append(missing, m+" "+p)
			}
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		t.Errorf("operations of openapi.json the script never exercised: %v", missing)
	}
	seen := map[int]bool{}
	for _, sts := range cf.answered {
		maps.Copy(seen, sts)
	}
	for _, st := range []int{202, 400, 401, 403, 404, 409, 413, 415} {
		if !seen[st] {
			t.Errorf("no documented operation answered %d", st)
		}
	}
}
