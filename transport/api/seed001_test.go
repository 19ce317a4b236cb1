package api_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Seed 001: POST/GET /v1/jobs/{id}/rewards on the service, on real Pebble,
// with the job being a run (SPEC §7).

// s1env is a harness with one agent and one job (a run with external id
// "job-1") that has two registered traces: tr-1 (turn "turn-1") and tr-2
// (no turn, so its turn is "tr-2").
type s1env struct {
	h     *harness
	clk   *clock
	c     *client
	agent string
	job   string
}

// newS1Env opens a harness and makes the agent, the job and its traces.
func newS1Env(t *testing.T) *s1env {
	t.Helper()
	e := &s1env{h: newHarness(t, config{})}
	e.clk, e.c = e.h.clk, e.h.client(adminKey)
	e.agent = str(t, e.c.must(201, "POST", "/api/v1/agents", `{"name": "seed-001"}`), "id")
	e.job = str(t, e.c.must(201, "POST", "/api/v1/agents/"+e.agent+"/runs", `{"external_id": "job-1"}`), "id")
	e.c.must(201, "POST", "/api/v1/agents/"+e.agent+"/runs/"+e.job+"/traces", `{"trace_id": "tr-1", "turn_id": "turn-1"}`)
	e.c.must(201, "POST", "/api/v1/agents/"+e.agent+"/runs/"+e.job+"/traces", `{"trace_id": "tr-2"}`)
	return e
}

func rewardsPath(job string) string { return "/v1/jobs/" + job + "/rewards" }

// report posts a report body to a job as c.
func (e *s1env) report(c *client, job, body string, hdr map[string]string) response {
	c.t.Helper()
	return c.request("POST", rewardsPath(job), body, hdr)
}

// mustReport posts a report that must answer 201 and returns it.
func (e *s1env) mustReport(t *testing.T, body string) map[string]any {
	t.Helper()
	r := e.report(e.c.on(t), e.job, body, nil)
	if r.status != 201 {
		t.Fatalf("report %s: status %d, want 201; body %s", body, r.status, r.body)
	}
	return r.json(t)
}

// evidence is the job's evidence list, raw.
func (e *s1env) evidence(t *testing.T) string {
	t.Helper()
	return e.c.on(t).raw(rewardsPath(e.job))
}

// items is the job's evidence list, decoded.
func (e *s1env) items(t *testing.T) []any {
	t.Helper()
	return list(t, e.c.on(t).must(200, "GET", rewardsPath(e.job), ""), "items")
}

// TestSeed001RejectsInvalidReports: every body constraint of seed 001 is a
// 400 invalid_request whose message names the field path, whose
// request_id is the X-Request-Id, and which leaves the job's evidence as
// it was.
func TestSeed001RejectsInvalidReports(t *testing.T) {
	e := newS1Env(t)
	e.mustReport(t, `{"scorer": "standing", "value": 0.5}`)
	elsewhere := str(t, e.c.must(201, "POST", "/api/v1/agents/"+e.agent+"/runs", `{}`), "id")
	e.c.must(201, "POST", "/api/v1/agents/"+e.agent+"/runs/"+elsewhere+"/traces", `{"trace_id": "tr-elsewhere"}`)

	items21 := "[" + strings.TrimSuffix(strings.Repeat(`"x",`, 21), ",") + "]"
	detailKeys := func(n int) string {
		var kv []string
		for i := 0; i < n; i++ {
			kv = append(kv, fmt.Sprintf(`"k%02d": %d`, i, i))
		}
		return "{" + strings.Join(kv, ", ") + "}"
	}
	ext := func(fields string) string {
		return `{"kind": "external", "scorer": "grader", "value": 0.5, ` + fields + `}`
	}
	cases := []struct {
		name, body, path string
	}{
		{"body not JSON", `{"scorer": `, "JSON"},
		{"body an array", `[]`, "JSON object"},
		{"unknown kind", `{"kind": "model_judge", "scorer": "grader", "value": 1}`, "kind"},
		{"kind not a string", `{"kind": 1, "scorer": "grader", "value": 1}`, "kind"},

		{"external without scorer", `{"value": 0.5}`, "scorer"},
		{"external scorer empty", `{"scorer": "", "value": 0.5}`, "scorer"},
		{"external scorer with a space", `{"scorer": "my grader", "value": 0.5}`, "scorer"},
		{"external scorer with a slash", `{"scorer": "a/b", "value": 0.5}`, "scorer"},
		{"external scorer of 101 characters", `{"scorer": "` + strings.Repeat("s", 101) + `", "value": 0.5}`, "scorer"},
		{"external scorer not a string", `{"scorer": 7, "value": 0.5}`, "scorer"},
		{"external without value", `{"kind": "external", "scorer": "grader"}`, "value"},
		{"external value a string", `{"scorer": "grader", "value": "0.5"}`, "value"},
		{"external value overflows", `{"scorer": "grader", "value": 1e999}`, "value"},
		{"external weight negative", ext(`"weight": -1`), "weight"},
		{"external weight over 1000", ext(`"weight": 1000.5`), "weight"},
		{"external weight a string", ext(`"weight": "2"`), "weight"},

		{"review without value", `{"kind": "review"}`, "value"},
		{"review value null", `{"kind": "review", "value": null}`, "value"},
		{"review value above 1", `{"kind": "review", "value": 1.01}`, "value"},
		{"review value below 0", `{"kind": "review", "value": -0.01}`, "value"},
		{"review value a boolean", `{"kind": "review", "value": true}`, "value"},
		{"review weight over 1000", `{"kind": "review", "value": 1, "weight": 1001}`, "weight"},
		{"review scorer with a space", `{"kind": "review", "scorer": "a b", "value": 1}`, "scorer"},
		{"review scorer empty", `{"kind": "review", "scorer": "", "value": 1}`, "scorer"},

		{"choice without shown", `{"kind": "choice", "chosen": null}`, "shown"},
		{"choice shown one item", `{"kind": "choice", "shown": ["a"], "chosen": "a"}`, "shown"},
		{"choice shown 21 items", `{"kind": "choice", "shown": ` + items21 + `, "chosen": null}`, "shown"},
		{"choice shown an object", `{"kind": "choice", "shown": {"a": 1, "b": 2}, "chosen": null}`, "shown"},
		{"choice without chosen", `{"kind": "choice", "shown": ["a", "b"]}`, "chosen"},
		{"choice chosen not shown", `{"kind": "choice", "shown": ["a", "b"], "chosen": "c"}`, "chosen"},
		{"choice chosen a string of a shown number", `{"kind": "choice", "shown": [1, 2], "chosen": "1"}`, "chosen"},
		{"choice chosen an object not shown", `{"kind": "choice", "shown": [{"id": 1}, {"id": 2}], "chosen": {"id": 3}}`, "chosen"},
		{"choice prompt empty", `{"kind": "choice", "shown": ["a", "b"], "chosen": "a", "prompt": ""}`, "prompt"},
		{"choice prompt of 12001 characters", `{"kind": "choice", "shown": ["a", "b"], "chosen": "a", "prompt": "` + strings.Repeat("p", 12001) + `"}`, "prompt"},
		{"choice prompt not a string", `{"kind": "choice", "shown": ["a", "b"], "chosen": "a", "prompt": 5}`, "prompt"},
		{"choice weight negative", `{"kind": "choice", "shown": ["a", "b"], "chosen": "a", "weight": -0.5}`, "weight"},
		{"choice scorer with a space", `{"kind": "choice", "scorer": "a b", "shown": ["a", "b"], "chosen": "a"}`, "scorer"},
		{"choice scorer empty", `{"kind": "choice", "scorer": "", "shown": ["a", "b"], "chosen": "a"}`, "scorer"},

		{"turn_id empty", ext(`"turn_id": ""`), "turn_id"},
		{"turn_id of 201 characters", ext(`"turn_id": "` + strings.Repeat("t", 201) + `"`), "turn_id"},
		{"turn_id a number", ext(`"turn_id": 3`), "turn_id"},
		{"trace_id empty", ext(`"trace_id": ""`), "trace_id"},
		{"trace_id of 201 characters", ext(`"trace_id": "` + strings.Repeat("t", 201) + `"`), "trace_id"},
		{"trace_id not registered on the job", ext(`"trace_id": "tr-unknown"`), "trace_id"},
		{"trace_id registered on another job", ext(`"trace_id": "tr-elsewhere"`), "trace_id"},
		{"trace_id with a conflicting turn_id", ext(`"trace_id": "tr-1", "turn_id": "turn-2"`), "turn_id"},
		{"trace_id without turn with a conflicting turn_id", ext(`"trace_id": "tr-2", "turn_id": "turn-1"`), "turn_id"},

		{"detail a string", ext(`"detail": "x"`), "detail"},
		{"detail an array", ext(`"detail": ["x"]`), "detail"},
		{"detail of 21 keys", ext(`"detail": ` + detailKeys(21)), "detail"},
		{"detail string of 257 characters", ext(`"detail": {"note": "` + strings.Repeat("d", 257) + `"}`), "detail.note:"},
		{"detail value an object", ext(`"detail": {"nested": {"a": 1}}`), "detail.nested:"},
		{"detail value an array", ext(`"detail": {"list": [1]}`), "detail.list:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.evidence(t)
			apiError(t, e.report(e.c.on(t), e.job, tc.body, nil), 400, "invalid_request", tc.path)
			if after := e.evidence(t); after != before {
				t.Errorf("evidence changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestSeed001AcceptsBoundaryValues: the inclusive ends of every range are
// accepted (201), with lengths counted in characters, not bytes.
func TestSeed001AcceptsBoundaryValues(t *testing.T) {
	e := newS1Env(t)
	items20 := "[" + strings.TrimSuffix(strings.Repeat(`"x",`, 19), ",") + `, "y"]`
	detail20 := func() string {
		var kv []string
		for i := 0; i < 20; i++ {
			kv = append(kv, fmt.Sprintf(`"k%02d": %d`, i, i))
		}
		return "{" + strings.Join(kv, ", ") + "}"
	}()
	cases := []struct{ name, body string }{
		{"weight 0", `{"scorer": "b.w0", "value": 1, "weight": 0}`},
		{"weight 1000", `{"scorer": "b.w1000", "value": 1, "weight": 1000}`},
		{"external value null", `{"scorer": "b.null", "value": null}`},
		{"external value negative and large", `{"scorer": "b.big", "value": -12345.5}`},
		{"scorer of 100 characters", `{"scorer": "` + strings.Repeat("s", 100) + `", "value": 1}`},
		{"scorer of every allowed class", `{"scorer": "aZ09_.-", "value": 1}`},
		{"review value 0", `{"kind": "review", "scorer": "rv0", "value": 0}`},
		{"review value 1", `{"kind": "review", "scorer": "rv1", "value": 1}`},
		{"choice shown 2 items", `{"kind": "choice", "scorer": "c2", "shown": ["a", "b"], "chosen": "b"}`},
		{"choice shown 20 items", `{"kind": "choice", "scorer": "c20", "shown": ` + items20 + `, "chosen": "y"}`},
		{"choice chosen null", `{"kind": "choice", "scorer": "cnull", "shown": ["a", "b"], "chosen": null}`},
		{"choice chosen object in another key order", `{"kind": "choice", "scorer": "cobj", "shown": [{"a": 1, "b": [2, 3]}, {"a": 2}], "chosen": {"b": [2, 3], "a": 1.0}}`},
		{"choice prompt of 12000 characters", `{"kind": "choice", "scorer": "cp", "shown": [1, 2], "chosen": 2, "prompt": "` + strings.Repeat("p", 12000) + `"}`},
		{"choice prompt of 12000 two-byte characters", `{"kind": "choice", "scorer": "cp2", "shown": [1, 2], "chosen": 2, "prompt": "` + strings.Repeat("é", 12000) + `"}`},
		{"turn_id of 200 characters", `{"scorer": "t200", "value": 1, "turn_id": "` + strings.Repeat("t", 200) + `"}`},
		{"turn_id of 200 two-byte characters", `{"scorer": "t200u", "value": 1, "turn_id": "` + strings.Repeat("é", 200) + `"}`},
		{"trace_id with its own turn_id", `{"scorer": "trturn", "value": 1, "trace_id": "tr-1", "turn_id": "turn-1"}`},
		{"detail of 20 keys", `{"scorer": "d20", "value": 1, "detail": ` + detail20 + `}`},
		{"detail string of 256 characters", `{"scorer": "d256", "value": 1, "detail": {"note": "` + strings.Repeat("d", 256) + `"}}`},
		{"detail string of 256 two-byte characters", `{"scorer": "d256u", "value": 1, "detail": {"note": "` + strings.Repeat("é", 256) + `"}}`},
		{"detail of every value type", `{"scorer": "dtypes", "value": 1, "detail": {"s": "x", "n": 1.5, "t": true, "f": false, "z": null}}`},
		{"unknown fields ignored", `{"scorer": "unknown", "value": 1, "extra": {"deep": [1]}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.report(e.c.on(t), e.job, tc.body, nil)
			if r.status != 201 {
				t.Fatalf("status %d, want 201; body %s", r.status, r.body)
			}
		})
	}
}

// TestSeed001MissingJobIs404: a report on, or a listing of, a job that
// does not exist, or exists only in another workspace, is 404 not_found.
func TestSeed001MissingJobIs404(t *testing.T) {
	e := newS1Env(t)
	ws := str(t, e.c.must(201, "POST", "/v1/workspaces", `{"name": "other"}`), "id")
	other := e.c.as(str(t, e.c.must(201, "POST", "/v1/workspaces/"+ws+"/api-keys", `{"name": "other-ci"}`), "key"))
	before := e.evidence(t)
	body := `{"scorer": "grader", "value": 1}`
	cases := []struct {
		name   string
		c      *client
		method string
		job    string
	}{
		{"report on an unknown run id", e.c, "POST", "run_01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"report on an unknown external id", e.c, "POST", "external_id:job-404"},
		{"report on an agent id", e.c, "POST", e.agent},
		{"report on another workspace's job", other, "POST", e.job},
		{"report on another workspace's job by external id", other, "POST", "external_id:job-1"},
		{"listing of an unknown run id", e.c, "GET", "run_01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"listing of another workspace's job", other, "GET", e.job},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := body
			if tc.method == "GET" {
				b = ""
			}
			apiError(t, tc.c.on(t).request(tc.method, rewardsPath(tc.job), b, nil), 404, "not_found", "")
			if after := e.evidence(t); after != before {
				t.Errorf("evidence changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestSeed001KindsAndDefaults: each kind's 201 body, with seed 001's
// defaults filled in (kind external, weights 1/2/1, scorers review and
// choice, turn and trace null, detail_json {}, gate false) and explicit
// values echoed; {id} accepts external_id:.
func TestSeed001KindsAndDefaults(t *testing.T) {
	e := newS1Env(t)
	cases := []struct {
		name string
		job  string // "" is e.job
		body string
		want map[string]any // top-level fields of the answer
	}{
		{name: "kind omitted is external", body: `{"scorer": "grader", "value": 0.25}`,
			want: map[string]any{"kind": "external", "scorer": "grader", "value": 0.25, "weight": 1.0,
				"turn_id": nil, "trace_id": nil, "gate": false}},
		{name: "external with null value", body: `{"kind": "external", "scorer": "nulls", "value": null}`,
			want: map[string]any{"kind": "external", "scorer": "nulls", "value": nil, "weight": 1.0}},
		{name: "external with every field", job: "external_id:job-1",
			body: `{"kind": "external", "scorer": "ci.tests", "value": 7, "weight": 3.5, "turn_id": "turn-9", "detail": {"suite": "unit", "passed": 41, "flaky": false, "note": null}}`,
			want: map[string]any{"kind": "external", "scorer": "ci.tests", "value": 7.0, "weight": 3.5, "turn_id": "turn-9", "trace_id": nil}},
		{name: "review defaults", body: `{"kind": "review", "value": 1}`,
			want: map[string]any{"kind": "review", "scorer": "review", "value": 1.0, "weight": 2.0, "turn_id": nil}},
		{name: "review with scorer and weight", body: `{"kind": "review", "scorer": "qa-team", "value": 0, "weight": 5}`,
			want: map[string]any{"kind": "review", "scorer": "qa-team", "value": 0.0, "weight": 5.0}},
		{name: "choice defaults", body: `{"kind": "choice", "shown": ["draft A", "draft B"], "chosen": "draft B"}`,
			want: map[string]any{"kind": "choice", "scorer": "choice", "value": nil, "weight": 1.0, "chosen": "draft B"}},
		{name: "choice value is always null", body: `{"kind": "choice", "scorer": "pick", "shown": [1, 2, 3], "chosen": null, "value": 0.9, "prompt": "Which is best?"}`,
			want: map[string]any{"kind": "choice", "scorer": "pick", "value": nil, "weight": 1.0, "chosen": nil, "prompt": "Which is best?"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.clk.Advance(time.Second)
			job := tc.job
			if job == "" {
				job = e.job
			}
			r := e.report(e.c.on(t), job, tc.body, nil)
			if r.status != 201 {
				t.Fatalf("status %d, want 201; body %s", r.status, r.body)
			}
			got := r.json(t)
			if id := str(t, got, "id"); !strings.HasPrefix(id, "rpt_") {
				t.Errorf("id %q lacks the rpt_ prefix", id)
			}
			expect(t, got, e.job, "job_id")
			expect(t, got, false, "gate")
			for k, v := range tc.want {
				expect(t, got, v, k)
			}
			expectTime(t, got, e.clk.Now(), "created_at")
			expectTime(t, got, e.clk.Now(), "updated_at")
			if _, ok := at(t, got, "detail_json").(map[string]any); !ok {
				t.Errorf("detail_json = %v, want an object", got["detail_json"])
			}
		})
	}

	// The explicit fields read back as sent.
	for _, it := range e.items(t) {
		switch str(t, it, "scorer") {
		case "ci.tests":
			expect(t, it, "unit", "detail_json", "suite")
			expect(t, it, 41.0, "detail_json", "passed")
			expect(t, it, false, "detail_json", "flaky")
			expect(t, it, nil, "detail_json", "note")
		case "review":
			if d, _ := at(t, it, "detail_json").(map[string]any); len(d) != 0 {
				t.Errorf("review without detail: detail_json = %v, want {}", d)
			}
		case "pick":
			if s := list(t, it, "shown"); len(s) != 3 || s[0] != 1.0 || s[2] != 3.0 {
				t.Errorf("shown = %v, want [1, 2, 3]", s)
			}
		case "choice":
			if s := list(t, it, "shown"); len(s) != 2 || s[1] != "draft B" {
				t.Errorf("shown = %v, want [draft A, draft B]", s)
			}
		}
	}
}

// TestSeed001ReportAgainReplaces: reporting the same (scorer, turn) again
// answers 201 with the same id and created_at, a later updated_at and the
// new value, and the job lists the report once; a different scorer or a
// different turn is a report of its own.
func TestSeed001ReportAgainReplaces(t *testing.T) {
	e := newS1Env(t)
	first := e.mustReport(t, `{"scorer": "grader", "value": 0.2, "turn_id": "t1", "detail": {"try": 1}}`)
	created := e.clk.Now()
	e.clk.Advance(time.Minute)
	again := e.mustReport(t, `{"scorer": "grader", "value": 0.7, "turn_id": "t1", "weight": 4}`)
	expect(t, again, str(t, first, "id"), "id")
	expectTime(t, again, created, "created_at")
	expectTime(t, again, e.clk.Now(), "updated_at")
	expect(t, again, 0.7, "value")
	expect(t, again, 4.0, "weight")
	if d, _ := at(t, again, "detail_json").(map[string]any); len(d) != 0 {
		t.Errorf("replacement without detail kept the old detail: %v", d)
	}

	others := []struct{ name, body string }{
		{"another turn", `{"scorer": "grader", "value": 0.1, "turn_id": "t2"}`},
		{"no turn", `{"scorer": "grader", "value": 0.1}`},
		{"another scorer", `{"scorer": "grader2", "value": 0.1, "turn_id": "t1"}`},
	}
	ids := map[string]string{str(t, first, "id"): "grader/t1"}
	for _, o := range others {
		id := str(t, e.mustReport(t, o.body), "id")
		if prev, dup := ids[id]; dup {
			t.Errorf("%s reused the id of %s", o.name, prev)
		}
		ids[id] = o.name
	}

	items := e.items(t)
	if len(items) != 4 {
		t.Fatalf("job lists %d reports, want 4: %v", len(items), items)
	}
	expect(t, items[0], str(t, first, "id"), "id") // first-made order
	expect(t, items[0], 0.7, "value")
	expectTime(t, items[0], created, "created_at")
	expectTime(t, items[0], created.Add(time.Minute), "updated_at")
}

// TestSeed001TraceSetsTurn: a report's trace_id names a registered model
// call of the job and sets turn_id to that trace's turn (the trace id when
// it was registered without one), so it replaces the report of that turn.
func TestSeed001TraceSetsTurn(t *testing.T) {
	e := newS1Env(t)
	cases := []struct {
		name, body       string
		turn, trace      string // want; "" is null
		replacesPrevious bool
	}{
		{name: "trace with a turn", body: `{"scorer": "judge", "value": 0.5, "trace_id": "tr-1"}`, turn: "turn-1", trace: "tr-1"},
		{name: "same turn named directly replaces it", body: `{"scorer": "judge", "value": 0.6, "turn_id": "turn-1"}`,
			turn: "turn-1", replacesPrevious: true},
		{name: "trace and its own turn agree", body: `{"scorer": "judge", "value": 0.7, "trace_id": "tr-1", "turn_id": "turn-1"}`,
			turn: "turn-1", trace: "tr-1", replacesPrevious: true},
		{name: "trace without a turn is its own turn", body: `{"scorer": "judge", "value": 0.8, "trace_id": "tr-2"}`, turn: "tr-2", trace: "tr-2"},
		{name: "another scorer on a trace without a turn", body: `{"scorer": "judge2", "value": 0.9, "trace_id": "tr-2", "turn_id": "tr-2"}`, turn: "tr-2", trace: "tr-2"},
	}
	var prev string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := e.mustReport(t, tc.body)
			want := func(s string) any {
				if s == "" {
					return nil
				}
				return s
			}
			expect(t, got, want(tc.turn), "turn_id")
			expect(t, got, want(tc.trace), "trace_id")
			if id := str(t, got, "id"); tc.replacesPrevious != (id == prev) {
				t.Errorf("id %s, previous %s: replaces = %v, want %v", id, prev, id == prev, tc.replacesPrevious)
			}
			prev = str(t, got, "id")
		})
	}
	if n := len(e.items(t)); n != 3 {
		t.Errorf("job lists %d reports, want 3 (judge/turn-1, judge/tr-2, judge2/tr-2)", n)
	}
}

// TestSeed001LaterStartedReportStands: when two reports race, the one whose
// request started last stands even if it reaches the engine first; the
// earlier-started one, reaching the engine second, then gets 409
// reward_superseded and changes nothing. Reports of different turns do not
// race. The race is set up by start stamps, not by timing: the held report
// is stamped first (it started earlier), the late one after it, and the
// late one is handled first.
func TestSeed001LaterStartedReportStands(t *testing.T) {
	cases := []struct {
		name       string
		standing   string // a report made before the race; "" for none
		held, late string // the earlier-started (held) and later-started bodies
		heldStatus int
		wantValues map[string]float64 // turn → standing value after both answered
	}{
		{name: "first report of a turn", held: `{"scorer": "race", "value": 0.1, "turn_id": "t"}`,
			late: `{"scorer": "race", "value": 0.9, "turn_id": "t"}`, heldStatus: 409, wantValues: map[string]float64{"t": 0.9}},
		{name: "replacing a standing report", standing: `{"scorer": "race", "value": 0.5, "turn_id": "t"}`,
			held: `{"scorer": "race", "value": 0.1, "turn_id": "t"}`,
			late: `{"scorer": "race", "value": 0.9, "turn_id": "t"}`, heldStatus: 409, wantValues: map[string]float64{"t": 0.9}},
		{name: "turn set by a trace races the same turn", held: `{"scorer": "race", "value": 0.1, "trace_id": "tr-1"}`,
			late: `{"scorer": "race", "value": 0.9, "turn_id": "turn-1"}`, heldStatus: 409, wantValues: map[string]float64{"turn-1": 0.9}},
		{name: "different turns both stand", held: `{"scorer": "race", "value": 0.1, "turn_id": "a"}`,
			late: `{"scorer": "race", "value": 0.9, "turn_id": "b"}`, heldStatus: 201, wantValues: map[string]float64{"a": 0.1, "b": 0.9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newS1Env(t)
			if tc.standing != "" {
				e.mustReport(t, tc.standing)
			}
			held, err := e.c.build("POST", rewardsPath(e.job), tc.held, nil)
			if err != nil {
				t.Fatal(err)
			}
			lateReq, err := e.c.build("POST", rewardsPath(e.job), tc.late, nil)
			if err != nil {
				t.Fatal(err)
			}
			if held.answer != nil || lateReq.answer != nil || held.req.Started >= lateReq.req.Started {
				t.Fatalf("precondition: want two admitted reports, the held one started first (stamps %d, %d)",
					held.req.Started, lateReq.req.Started)
			}
			lateRes := e.c.on(t).fresh("POST", rewardsPath(e.job), lateReq.send())
			if lateRes.status != 201 {
				t.Fatalf("late report %s: status %d, want 201; body %s", tc.late, lateRes.status, lateRes.body)
			}
			late := lateRes.json(t)
			heldRes := e.c.on(t).fresh("POST", rewardsPath(e.job), held.send())
			if tc.heldStatus == 409 {
				apiError(t, heldRes, 409, "reward_superseded", "")
			} else if heldRes.status != tc.heldStatus {
				t.Fatalf("held report: status %d, want %d; body %s", heldRes.status, tc.heldStatus, heldRes.body)
			}
			items := e.items(t)
			if len(items) != len(tc.wantValues) {
				t.Fatalf("job lists %d reports, want %d: %v", len(items), len(tc.wantValues), items)
			}
			for _, it := range items {
				turn := str(t, it, "turn_id")
				expect(t, it, tc.wantValues[turn], "value")
				if turn == str(t, late, "turn_id") {
					expect(t, it, str(t, late, "id"), "id")
				}
			}
		})
	}
}

// TestSeed001ReportsAreSignals: each standing report with a value is a
// signal of kind = scorer on the job for objectives; a replaced report
// counts once, with its latest value, and reports without a value (null
// externals, choices) are not signals.
func TestSeed001ReportsAreSignals(t *testing.T) {
	e := newS1Env(t)
	for _, body := range []string{
		`{"scorer": "grader", "value": 0.3, "turn_id": "t1"}`,
		`{"scorer": "grader", "value": 0.5, "turn_id": "t1"}`, // replaces 0.3
		`{"scorer": "grader", "value": 0.25, "turn_id": "t2"}`,
		`{"scorer": "grader", "value": null, "turn_id": "t3"}`,
		`{"kind": "review", "value": 1}`,
		`{"kind": "choice", "scorer": "grader", "shown": ["a", "b"], "chosen": "a", "turn_id": "t4"}`,
	} {
		e.clk.Advance(time.Second)
		e.mustReport(t, body)
	}
	cases := []struct {
		term      string
		wantCount float64
		wantRaw   float64
	}{
		{`{"signal": "grader", "weight": 1, "agg": "sum", "scale": [0, 10]}`, 2, 0.75},
		{`{"signal": "grader", "weight": 1, "agg": "count", "scale": [0, 10]}`, 2, 2},
		{`{"signal": "grader", "weight": 1, "agg": "max"}`, 2, 0.5},
		{`{"signal": "review", "weight": 1, "agg": "last"}`, 1, 1},
	}
	for i, tc := range cases {
		t.Run(tc.term, func(t *testing.T) {
			obj := e.c.on(t).putObjective(e.agent, `{"definition": {"default": "exclude", "terms": [`+tc.term+`], "bounds": [0, 1]}}`)
			expect(t, obj, float64(i+1), "version")
			rw := e.c.on(t).must(200, "GET", "/api/v1/agents/"+e.agent+"/runs/"+e.job+"/reward", "")
			expect(t, rw, "scored", "status")
			expect(t, rw, tc.wantCount, "terms", 0, "count")
			expect(t, rw, tc.wantRaw, "terms", 0, "raw")
			expect(t, rw, false, "terms", 0, "imputed")
		})
	}
}

// TestSeed001EvidenceListsReportsThenFeedback: GET /v1/jobs/{id}/rewards
// lists the job's reports (first-made order), then its seed-004 feedback
// as kind "feedback" items, in the report shape; by id or external_id:.
func TestSeed001EvidenceListsReportsThenFeedback(t *testing.T) {
	e := newS1Env(t)
	empty := e.c.must(200, "GET", rewardsPath(e.job), "")
	if items := list(t, empty, "items"); len(items) != 0 {
		t.Fatalf("job without evidence lists %v, want []", items)
	}

	e.clk.Advance(time.Second)
	fb1 := e.c.must(200, "POST", "/v1/workspaces/default/objectives/"+e.job+"/feedback", `{"metadata": {}, "data": {"score": 0.5}}`)
	e.clk.Advance(time.Second)
	r1 := e.mustReport(t, `{"scorer": "grader", "value": 0.4}`)
	e.clk.Advance(time.Second)
	fb2 := e.c.must(200, "POST", "/v1/workspaces/default/objectives/external_id:job-1/feedback",
		`{"metadata": {"labels": {"source": "widget"}}, "data": {"score": -1, "comment": "wrong answer"}}`)
	e.clk.Advance(time.Second)
	r2 := e.mustReport(t, `{"kind": "review", "value": 0}`)

	for _, job := range []string{e.job, "external_id:job-1"} {
		t.Run(job, func(t *testing.T) {
			items := list(t, e.c.on(t).must(200, "GET", rewardsPath(job), ""), "items")
			if len(items) != 4 {
				t.Fatalf("%d items, want 2 reports and 2 feedback: %v", len(items), items)
			}
			want := []struct {
				id, kind string
				value    float64
			}{
				{str(t, r1, "id"), "external", 0.4},
				{str(t, r2, "id"), "review", 0},
				{str(t, fb1, "metadata", "id"), "feedback", 0.5},
				{str(t, fb2, "metadata", "id"), "feedback", -1},
			}
			for i, w := range want {
				expect(t, items[i], w.id, "id")
				expect(t, items[i], w.kind, "kind")
				expect(t, items[i], w.value, "value")
				expect(t, items[i], e.job, "job_id")
				for _, k := range []string{"scorer", "turn_id", "trace_id", "weight", "gate", "detail_json", "created_at", "updated_at"} {
					at(t, items[i], k)
				}
			}
			expect(t, items[3], "wrong answer", "detail_json", "comment")
		})
	}
}

// TestSeed001KeyedRetryNeverReplacesNewerReport: seed 001's reason for
// Idempotency-Key. A late retry of an answered report, under its key,
// replays the first answer and does not replace the newer report that
// stands since.
func TestSeed001KeyedRetryNeverReplacesNewerReport(t *testing.T) {
	e := newS1Env(t)
	old := `{"scorer": "grader", "value": 0.1, "turn_id": "t1"}`
	first := e.report(e.c, e.job, old, withKey("report-attempt-1"))
	if first.status != 201 {
		t.Fatalf("first report: status %d; body %s", first.status, first.body)
	}
	e.clk.Advance(time.Minute)
	newer := e.mustReport(t, `{"scorer": "grader", "value": 0.9, "turn_id": "t1"}`)
	e.clk.Advance(time.Minute)

	retry, err := e.c.rawSend("POST", rewardsPath(e.job), old, withKey("report-attempt-1"))
	if err != nil {
		t.Fatal(err)
	}
	sameAnswer(t, first, retry)
	items := e.items(t)
	if len(items) != 1 {
		t.Fatalf("job lists %d reports, want 1", len(items))
	}
	expect(t, items[0], 0.9, "value")
	expect(t, items[0], str(t, newer, "updated_at"), "updated_at")
}

// TestSeed001ValueEnvelope: seed 001 documents the body as "value: object",
// one of the shapes, so {"value": {"kind": …, …}} is a report as well as
// the flat body (whose "value" is a number or null, never an object); an
// error inside the envelope names its path under value.
func TestSeed001ValueEnvelope(t *testing.T) {
	e := newS1Env(t)
	cases := []struct {
		name, body string
		want       map[string]any
	}{
		{"external", `{"value": {"kind": "external", "scorer": "ci.tests", "value": 0.92, "detail": {"suite": "unit"}}}`,
			map[string]any{"kind": "external", "scorer": "ci.tests", "value": 0.92, "weight": 1.0}},
		{"review", `{"value": {"kind": "review", "value": 1, "trace_id": "tr-1"}}`,
			map[string]any{"kind": "review", "scorer": "review", "value": 1.0, "weight": 2.0, "turn_id": "turn-1"}},
		{"choice", `{"value": {"kind": "choice", "shown": ["a", "b"], "chosen": "a"}, "ignored": true}`,
			map[string]any{"kind": "choice", "scorer": "choice", "value": nil, "chosen": "a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.report(e.c.on(t), e.job, tc.body, nil)
			if r.status != 201 {
				t.Fatalf("status %d, want 201; body %s", r.status, r.body)
			}
			got := r.json(t)
			for k, v := range tc.want {
				expect(t, got, v, k)
			}
		})
	}
	for _, tc := range []struct{ name, body, path string }{
		{"decoded field", `{"value": {"kind": "review", "value": 2}}`, "value.value:"},
		{"weight", `{"value": {"scorer": "x", "value": 1, "weight": -1}}`, "value.weight:"},
		{"engine's scorer rule", `{"value": {"scorer": "a b", "value": 1}}`, "value.scorer:"},
		{"engine's trace rule", `{"value": {"scorer": "x", "value": 1, "trace_id": "tr-unknown"}}`, "value.trace_id:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			apiError(t, e.report(e.c.on(t), e.job, tc.body, nil), 400, "invalid_request", tc.path)
		})
	}
}

// TestALateReplacementLeavesAMaturedRewardAsItMatured: a report replaced
// after the job's horizon is late (counted, never used), and the reward
// keeps the value that stood at the horizon.
func TestALateReplacementLeavesAMaturedRewardAsItMatured(t *testing.T) {
	e := newS1Env(t)
	agentPath := "/api/v1/agents/" + e.agent
	e.c.must(200, "PUT", agentPath+"/objective", `{"definition": {"horizon_s": 3, "terms": [{"signal": "ci", "weight": 1}]}}`)
	e.mustReport(t, `{"scorer": "ci", "value": 0.9}`)
	e.c.must(200, "POST", agentPath+"/runs/"+e.job+"/finish", `{"succeeded": true}`)
	e.clk.Advance(4 * time.Second)
	reward := func() map[string]any { return e.c.must(200, "GET", agentPath+"/runs/"+e.job+"/reward", "") }
	before := reward()
	if before["value"] != 0.9 || before["matured"] != true {
		t.Fatalf("matured reward %v, want 0.9", before)
	}
	e.mustReport(t, `{"scorer": "ci", "value": 0.1}`)
	after := reward()
	if after["value"] != 0.9 || after["late_signals"] != 1.0 || after["status"] != "scored" {
		t.Fatalf("after a late replacement: %v, want 0.9 still, one late signal", after)
	}
}
