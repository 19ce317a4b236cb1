package api_test

import (
	"fmt"
	"math"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"
)

// The seed-004 door (SPEC §6): objectives (runs), their feedback, variation
// posteriors and selection, on the service. The seed's examples run as
// written, with ${WORKSPACE_ID} and ${CADENYA_API_KEY} swapped for a
// workspace and a key of the harness.

const (
	seedFeedbackCurl = `{ "metadata": {}, "data": { "score": 1.0, "comment": "Short and on point." } }`
	seedFeedbackSDK  = `{"data": {}, "metadata": {}}` // the OpenAPI x-codeSamples body
	seedExternalFB   = `{"metadata": {"externalId": "review-4521", "labels": {"source": "csat"}}, "data": {"score": 0.9, "comment": "Resolved first contact."}}`
	profileTypeKey   = "PROFILE_TYPE_API_KEY"
	modeRandom       = "VARIATION_SELECTION_MODE_RANDOM"
)

// s4env is one workspace and a key of it, as the seed's examples assume.
type s4env struct {
	h       *harness
	clk     *clock
	admin   *client
	c       *client // the workspace's key
	ws      string
	key     string
	profile string // the profile id of c's key
}

// newS4Env opens a harness and makes a workspace with one key.
func newS4Env(t *testing.T, cfg config) *s4env {
	t.Helper()
	e := &s4env{h: newHarness(t, cfg)}
	e.clk = e.h.clk
	e.admin = e.h.client(adminKey)
	e.ws = str(t, e.admin.must(201, "POST", "/v1/workspaces", `{"name": "acme"}`), "id")
	k := e.admin.must(201, "POST", "/v1/workspaces/"+e.ws+"/api-keys", `{"name": "acme-ci"}`)
	e.key, e.profile = str(t, k, "key"), str(t, k, "profile", "id")
	e.c = e.admin.as(e.key)
	return e
}

// path is a path of the workspace door of e's workspace.
func (e *s4env) path(rest string) string { return "/v1/workspaces/" + e.ws + rest }

// agent creates an agent with the workspace key; mode "" is the default.
func (e *s4env) agent(t *testing.T, name, mode string) string {
	t.Helper()
	body := fmt.Sprintf(`{"name": %q}`, name)
	if mode != "" {
		body = fmt.Sprintf(`{"name": %q, "selection_mode": %q}`, name, mode)
	}
	return str(t, e.c.on(t).must(201, "POST", "/api/v1/agents", body), "id")
}

func (e *s4env) variation(t *testing.T, agent, name string) string {
	t.Helper()
	return str(t, e.c.on(t).must(201, "POST", "/api/v1/agents/"+agent+"/variations", fmt.Sprintf(`{"name": %q}`, name)), "id")
}

// objective creates a seed-004 objective pinned to variation ("" leaves
// the choice to selection) and returns its id.
func (e *s4env) objective(t *testing.T, agent, variation string) string {
	t.Helper()
	spec := fmt.Sprintf(`{"agentId": %q}`, agent)
	if variation != "" {
		spec = fmt.Sprintf(`{"agentId": %q, "agentVariationId": %q}`, agent, variation)
	}
	return str(t, e.c.on(t).must(200, "POST", e.path("/objectives"), `{"metadata": {}, "spec": `+spec+`}`), "metadata", "id")
}

// feedback posts one feedback body to an objective (id or external_id:)
// one second after the previous write, and returns the record.
func (e *s4env) feedback(t *testing.T, objective, body string) map[string]any {
	t.Helper()
	e.clk.Advance(time.Second)
	return e.c.on(t).must(200, "POST", e.path("/objectives/"+objective+"/feedback"), body)
}

// nativeVar reads a variation through the native door (alpha and beta).
func (e *s4env) nativeVar(t *testing.T, agent, variation string) map[string]any {
	t.Helper()
	return e.c.on(t).must(200, "GET", "/api/v1/agents/"+agent+"/variations/"+variation, "")
}

// fbIDs lists the metadata.id of each item of a feedback page.
func fbIDs(t *testing.T, page map[string]any) []string {
	t.Helper()
	var out []string
	for i := range list(t, page, "items") {
		out = append(out, str(t, page, "items", i, "metadata", "id"))
	}
	return out
}

// TestSeed004WorkedExample is the seed's "watch the belief update": one
// variation, three objectives scored +1.0, -0.5 and 0.0, then the variation
// reads score 0.5555555 (Beta(2.5, 2.0)) and feedbackCount 3.
func TestSeed004WorkedExample(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	v := e.variation(t, a, "concise")
	seedVar := e.path("/agents/" + a + "/variations/" + v)

	fresh := e.c.must(200, "GET", seedVar, "")
	expect(t, fresh, 0.5, "info", "score")
	expect(t, fresh, 0.0, "info", "feedbackCount")

	bodies := []string{
		seedFeedbackCurl,
		`{"metadata": {}, "data": {"score": -0.5, "comment": "Second reviewer disagrees."}}`,
		`{"metadata": {}, "data": {"score": 0.0}}`,
	}
	for _, body := range bodies {
		e.feedback(t, e.objective(t, a, v), body)
	}

	got := e.c.must(200, "GET", seedVar, "")
	if score := num(t, got, "info", "score"); math.Abs(score-0.5555555) > 1e-6 {
		t.Errorf("info.score = %v, want ≈ 0.5555555", score)
	}
	expect(t, got, 2.5/4.5, "info", "score")
	expect(t, got, 3.0, "info", "feedbackCount")
	expect(t, got, v, "metadata", "id")
	expect(t, got, "concise", "metadata", "name")
	expect(t, got, a, "spec", "agentId")

	native := e.nativeVar(t, a, v)
	expect(t, native, 2.5, "info", "alpha")
	expect(t, native, 2.0, "info", "beta")
	expect(t, native, 3.0, "info", "feedback_count")
	expect(t, native, 2.5/4.5, "info", "score")
}

// TestSeed004FeedbackRecordShape: the seed's cURL body answers 200 with an
// ObjectiveFeedback naming the workspace, the account, the key's profile as
// submitter, and the data as sent.
func TestSeed004FeedbackRecordShape(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	obj := e.objective(t, a, e.variation(t, a, "concise"))

	fb := e.feedback(t, obj, seedFeedbackCurl)
	if id := str(t, fb, "metadata", "id"); !strings.HasPrefix(id, "fb_") {
		t.Errorf("feedback id %q lacks fb_ prefix", id)
	}
	expect(t, fb, e.h.ten.AccountID(), "metadata", "accountId")
	expect(t, fb, e.ws, "metadata", "workspaceId")
	expect(t, fb, e.profile, "metadata", "profileId")
	expectTime(t, fb, e.clk.Now(), "metadata", "createdAt")
	if l, has := at(t, fb, "metadata").(map[string]any)["labels"]; has {
		if m, ok := l.(map[string]any); !ok || len(m) != 0 {
			t.Errorf("metadata.labels = %v, want {} or absent", l)
		}
	}
	expect(t, fb, 1.0, "data", "score")
	expect(t, fb, "Short and on point.", "data", "comment")
	expect(t, fb, e.profile, "info", "submittedBy", "metadata", "id")
	expect(t, fb, profileTypeKey, "info", "submittedBy", "spec", "type")
}

// TestSeed004ObjectiveShape: creating an objective answers the Objective
// (metadata, spec, info.agentVariation); GET by id and by external_id read
// the same bytes; an agent without variations runs none.
func TestSeed004ObjectiveShape(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	v := e.variation(t, a, "concise")

	body := fmt.Sprintf(`{"metadata": {"externalId": "ticket-1", "labels": {"priority": "high"}}, "spec": {"agentId": %q, "agentVariationId": %q}}`, a, v)
	res := e.c.request("POST", e.path("/objectives"), body, nil)
	if res.status != 200 {
		t.Fatalf("create objective: %d %s, want 200", res.status, res.body)
	}
	obj := res.json(t)
	id := str(t, obj, "metadata", "id")
	expect(t, obj, e.h.ten.AccountID(), "metadata", "accountId")
	expect(t, obj, e.ws, "metadata", "workspaceId")
	expect(t, obj, e.profile, "metadata", "profileId")
	expectTime(t, obj, e.clk.Now(), "metadata", "createdAt")
	expect(t, obj, "ticket-1", "metadata", "externalId")
	expect(t, obj, "high", "metadata", "labels", "priority")
	expect(t, obj, a, "spec", "agentId")
	expect(t, obj, v, "spec", "agentVariationId")
	expect(t, obj, v, "info", "agentVariation", "id")
	expect(t, obj, "concise", "info", "agentVariation", "name")
	if str(t, obj, "info", "status") == "" {
		t.Error("info.status is empty")
	}

	for _, ref := range []string{id, "external_id:ticket-1"} {
		if got := e.c.raw(e.path("/objectives/" + ref)); got != string(res.body) {
			t.Errorf("GET objective %s:\n got %s\nwant %s", ref, got, res.body)
		}
	}

	bare := e.agent(t, "no-variations", "")
	m := e.c.must(200, "POST", e.path("/objectives"), fmt.Sprintf(`{"metadata": {}, "spec": {"agentId": %q}}`, bare))
	if _, has := at(t, m, "spec").(map[string]any)["agentVariationId"]; has {
		t.Errorf("objective of an agent without variations has spec.agentVariationId: %v", m)
	}
	if _, has := at(t, m, "info").(map[string]any)["agentVariation"]; has {
		t.Errorf("objective of an agent without variations has info.agentVariation: %v", m)
	}
}

// TestSeed004FeedbackAppends is the seed's "Feedback appends": the same
// objective scored twice holds two records, and both moved the odds; the
// same body again, with the same externalId, is a third record.
func TestSeed004FeedbackAppends(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	v := e.variation(t, a, "concise")
	obj := e.objective(t, a, v)

	first := e.feedback(t, obj, `{"metadata": {}, "data": {"score": 1.0, "comment": "Great."}}`)
	second := e.feedback(t, obj, `{"metadata": {}, "data": {"score": -0.5, "comment": "Second reviewer disagrees."}}`)

	all := e.c.must(200, "GET", e.path("/objectives/"+obj+"/feedback"), "")
	want := []string{str(t, second, "metadata", "id"), str(t, first, "metadata", "id")}
	if got := fbIDs(t, all); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("objective feedback = %v, want both records newest first %v", got, want)
	}
	expect(t, all, "", "nextCursor")
	native := e.nativeVar(t, a, v)
	expect(t, native, 2.0, "info", "alpha")
	expect(t, native, 1.5, "info", "beta")
	expect(t, native, 2.0, "info", "feedback_count")

	dup := `{"metadata": {"externalId": "review-1"}, "data": {"score": 1.0}}`
	e.feedback(t, obj, dup)
	e.feedback(t, obj, dup)
	if n := len(fbIDs(t, e.c.must(200, "GET", e.path("/objectives/"+obj+"/feedback"), ""))); n != 4 {
		t.Errorf("after the same body twice: %d records, want 4 (no upsert by externalId)", n)
	}
	expect(t, e.nativeVar(t, a, v), 4.0, "info", "alpha")
}

// TestSeed004FeedbackAppendsSignal: each feedback appends a signal of kind
// "feedback" to the run, its value the score (0 when omitted).
func TestSeed004FeedbackAppendsSignal(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	obj := e.objective(t, a, e.variation(t, a, "concise"))

	e.feedback(t, obj, seedFeedbackCurl)
	e.feedback(t, obj, `{"metadata": {}, "data": {"score": -0.5}}`)
	e.feedback(t, obj, seedFeedbackSDK)

	sigs := e.c.must(200, "GET", "/api/v1/agents/"+a+"/runs/"+obj+"/signals", "")
	var got []string
	for i := range list(t, sigs, "items") {
		got = append(got, fmt.Sprintf("%s=%v", str(t, sigs, "items", i, "kind"), num(t, sigs, "items", i, "value")))
	}
	if want := "[feedback=1 feedback=-0.5 feedback=0]"; fmt.Sprint(got) != want {
		t.Errorf("run signals = %v, want %s", got, want)
	}
}

// TestSeed004OmittedScoreIsNeutral: the OpenAPI sample body (empty data)
// is accepted and adds 0.5 to both sides of the posterior.
func TestSeed004OmittedScoreIsNeutral(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	v := e.variation(t, a, "concise")

	fb := e.feedback(t, e.objective(t, a, v), seedFeedbackSDK)
	if d, ok := at(t, fb, "data").(map[string]any); !ok || d["score"] != nil {
		t.Errorf("data = %v, want no score", at(t, fb, "data"))
	}
	native := e.nativeVar(t, a, v)
	expect(t, native, 1.5, "info", "alpha")
	expect(t, native, 1.5, "info", "beta")
	expect(t, native, 1.0, "info", "feedback_count")
}

// TestSeed004ExternalIDExample is the seed's "Put it to work": an objective
// created with metadata.externalId is scored through external_id:, and the
// labels ride along into the labels filter.
func TestSeed004ExternalIDExample(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	v := e.variation(t, a, "concise")
	other := e.objective(t, a, v)
	e.feedback(t, other, seedFeedbackCurl)

	obj := e.c.must(200, "POST", e.path("/objectives"),
		fmt.Sprintf(`{"metadata": {"externalId": "ticket-4521"}, "spec": {"agentId": %q}}`, a))
	objID := str(t, obj, "metadata", "id")

	fb := e.feedback(t, "external_id:ticket-4521", seedExternalFB)
	expect(t, fb, "review-4521", "metadata", "externalId")
	expect(t, fb, "csat", "metadata", "labels", "source")
	expect(t, fb, 0.9, "data", "score")
	expect(t, fb, "Resolved first contact.", "data", "comment")
	fbID := str(t, fb, "metadata", "id")

	want := fmt.Sprint([]string{fbID})
	for _, p := range []string{
		"/agents/" + a + "/feedback?labels=source=csat",
		"/objectives/external_id:ticket-4521/feedback",
		"/objectives/" + objID + "/feedback?labels=source=csat",
	} {
		if got := fbIDs(t, e.c.must(200, "GET", e.path(p), "")); fmt.Sprint(got) != want {
			t.Errorf("GET %s = %v, want %s", p, got, want)
		}
	}
	expect(t, e.c.must(200, "GET", "/api/v1/agents/"+a+"/runs/external_id:ticket-4521/signals", ""), 0.9, "items", 0, "value")
}

// TestSeed004StrictValidation: every malformed feedback body or list query
// is 400 google.rpc.Status code 3 whose message names the field, and
// nothing a read can see changes.
func TestSeed004StrictValidation(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	v := e.variation(t, a, "concise")
	obj := e.objective(t, a, v)
	other := e.objective(t, a, v)
	e.feedback(t, obj, seedFeedbackCurl)

	fbPath := e.path("/objectives/" + obj + "/feedback")
	agentList := e.path("/agents/" + a + "/feedback")
	state := func(c *client) string {
		var b strings.Builder
		for _, p := range []string{fbPath, agentList + "?includeInfo=true", "/api/v1/agents/" + a + "/variations/" + v,
			e.path("/agents/" + a + "/variations/" + v), "/api/v1/agents/" + a + "/runs/" + obj + "/signals"} {
			b.WriteString(c.raw(p))
			b.WriteByte('\n')
		}
		return b.String()
	}
	before := state(e.c)

	longValue := strings.Repeat("a", 64)
	cases := []struct {
		name, method, path, body string
		field                    string // the message must name it
	}{
		{name: "metadata missing", body: `{"data": {"score": 1.0}}`, field: "metadata"},
		{name: "metadata null", body: `{"metadata": null, "data": {"score": 1.0}}`, field: "metadata"},
		{name: "data missing", body: `{"metadata": {}}`, field: "data"},
		{name: "empty object", body: `{}`, field: "metadata"},
		{name: "empty body", body: ``, field: "metadata"},
		{name: "metadata not an object", body: `{"metadata": "x", "data": {}}`, field: "metadata"},
		{name: "data not an object", body: `{"metadata": {}, "data": 1}`, field: "data"},
		{name: "unknown top-level field", body: `{"metadata": {}, "data": {}, "rating": 5}`, field: "rating"},
		{name: "unknown metadata field", body: `{"metadata": {"name": "x"}, "data": {}}`, field: "metadata.name"},
		{name: "unknown data field", body: `{"metadata": {}, "data": {"score": 1.0, "stars": 5}}`, field: "data.stars"},
		{name: "score above 1", body: `{"metadata": {}, "data": {"score": 1.5}}`, field: "data.score"},
		{name: "score below -1", body: `{"metadata": {}, "data": {"score": -1.01}}`, field: "data.score"},
		{name: "score a string", body: `{"metadata": {}, "data": {"score": "1"}}`, field: "data.score"},
		{name: "score overflows to infinity", body: `{"metadata": {}, "data": {"score": 1e999}}`, field: "data.score"},
		{name: "comment not a string", body: `{"metadata": {}, "data": {"comment": 5}}`, field: "data.comment"},
		{name: "externalId not a string", body: `{"metadata": {"externalId": 5}, "data": {}}`, field: "metadata.externalId"},
		{name: "labels not an object", body: `{"metadata": {"labels": ["a"]}, "data": {}}`, field: "metadata.labels"},
		{name: "label value not a string", body: `{"metadata": {"labels": {"n": 1}}, "data": {}}`, field: "metadata.labels.n:"},
		{name: "label key with a space", body: `{"metadata": {"labels": {"bad key": "x"}}, "data": {}}`, field: `metadata.labels["bad key"]`},
		{name: "label key empty", body: `{"metadata": {"labels": {"": "x"}}, "data": {}}`, field: "metadata.labels"},
		{name: "label key 64 characters", body: `{"metadata": {"labels": {"` + longValue + `": "x"}}, "data": {}}`, field: "metadata.labels." + longValue},
		{name: "label key prefix not a DNS subdomain", body: `{"metadata": {"labels": {"Cadenya.com/x": "y"}}, "data": {}}`, field: `metadata.labels["Cadenya.com/x"]`},
		{name: "label value starting with a dash", body: `{"metadata": {"labels": {"source": "-csat"}}, "data": {}}`, field: "metadata.labels.source"},
		{name: "label value with a slash", body: `{"metadata": {"labels": {"source": "a/b"}}, "data": {}}`, field: "metadata.labels.source"},
		{name: "label value 64 characters", body: `{"metadata": {"labels": {"source": "` + longValue + `"}}, "data": {}}`, field: "metadata.labels.source"},
		{name: "body not JSON", body: `{"metadata": `, field: "JSON"},
		// The readOnly ids: the feedback goes to the path's objective, so a
		// body naming another is refused rather than written elsewhere.
		{name: "objectiveId not a string", body: `{"objectiveId": {"x": [1]}, "metadata": {}, "data": {}}`, field: "objectiveId"},
		{name: "objectiveId another objective", body: `{"objectiveId": "` + other + `", "metadata": {}, "data": {}}`, field: "objectiveId"},
		{name: "objectiveId no objective", body: `{"objectiveId": "external_id:nope", "metadata": {}, "data": {}}`, field: "objectiveId"},
		{name: "workspaceId not a string", body: `{"workspaceId": false, "metadata": {}, "data": {}}`, field: "workspaceId"},
		{name: "workspaceId another workspace", body: `{"workspaceId": "ws_other", "metadata": {}, "data": {}}`, field: "workspaceId"},
		{name: "a key twice", body: `{"metadata": {}, "data": {"score": 1, "score": -1}}`, field: "data.score"},
		{name: "list limit 0", method: "GET", path: agentList + "?limit=0", field: "limit"},
		{name: "list limit 1001", method: "GET", path: agentList + "?limit=1001", field: "limit"},
		{name: "list limit not a number", method: "GET", path: agentList + "?limit=ten", field: "limit"},
		{name: "objective list limit 1001", method: "GET", path: fbPath + "?limit=1001", field: "limit"},
		{name: "list cursor not given out", method: "GET", path: agentList + "?cursor=bogus", field: "cursor"},
		{name: "list sentiment unknown", method: "GET", path: agentList + "?sentiment=FEEDBACK_SENTIMENT_HAPPY", field: "sentiment"},
		{name: "list createdAfter not RFC 3339", method: "GET", path: agentList + "?createdAfter=yesterday", field: "createdAfter"},
		{name: "list createdBefore not RFC 3339", method: "GET", path: agentList + "?createdBefore=2026-01-10", field: "createdBefore"},
		{name: "list includeInfo not a boolean", method: "GET", path: agentList + "?includeInfo=maybe", field: "includeInfo"},
		{name: "list labels without =", method: "GET", path: agentList + "?labels=source", field: "labels"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			method, path := tc.method, tc.path
			if method == "" {
				method, path = "POST", fbPath
			}
			var hdr map[string]string
			if method == "POST" && tc.body == "" {
				hdr = map[string]string{"Content-Type": "application/json"}
			}
			rpcStatus(t, e.c.on(t).request(method, path, tc.body, hdr), 400, 3, tc.field)
			if after := state(e.c.on(t)); after != before {
				t.Errorf("state changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	// Ids naming the request's own workspace and objective are accepted.
	e.c.must(200, "POST", fbPath, `{"workspaceId": "`+e.ws+`", "objectiveId": "`+obj+`", "metadata": {}, "data": {}}`)
}

// TestSeed004ObjectiveValidation: creating an objective validates strictly
// too (google.rpc.Status, the field path in the message), an external id is
// unique in the workspace (ALREADY_EXISTS), and a rejected create makes no
// objective.
func TestSeed004ObjectiveValidation(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	e.variation(t, a, "concise")
	e.c.must(200, "POST", e.path("/objectives"), fmt.Sprintf(`{"metadata": {"externalId": "taken"}, "spec": {"agentId": %q}}`, a))
	// Every rejected body names external id "probe": had the objective
	// been made, GET external_id:probe would find it.
	probe := func(t *testing.T) int {
		t.Helper()
		return e.c.on(t).request("GET", e.path("/objectives/external_id:probe"), "", nil).status
	}

	cases := []struct {
		name, body string
		status     int
		code       float64
		field      string
	}{
		{"spec missing", `{"metadata": {"externalId": "probe"}}`, 400, 3, "spec"},
		{"agentId missing", `{"metadata": {"externalId": "probe"}, "spec": {}}`, 400, 3, "spec.agentId"},
		{"unknown top-level field", fmt.Sprintf(`{"metadata": {"externalId": "probe"}, "spec": {"agentId": %q}, "name": "x"}`, a), 400, 3, "name"},
		{"unknown spec field", fmt.Sprintf(`{"metadata": {"externalId": "probe"}, "spec": {"agentId": %q, "model": "x"}}`, a), 400, 3, "spec.model"},
		{"unknown metadata field", fmt.Sprintf(`{"metadata": {"externalId": "probe", "id": "obj_1"}, "spec": {"agentId": %q}}`, a), 400, 3, "metadata.id"},
		{"label value off the seed's syntax", fmt.Sprintf(`{"metadata": {"externalId": "probe", "labels": {"k": "-x"}}, "spec": {"agentId": %q}}`, a), 400, 3, "metadata.labels.k"},
		{"unknown agent", `{"metadata": {"externalId": "probe"}, "spec": {"agentId": "agt_01ZZZZZZZZZZZZZZZZZZZZZZZZ"}}`, 404, 5, "agt_01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"unknown variation", fmt.Sprintf(`{"metadata": {"externalId": "probe"}, "spec": {"agentId": %q, "agentVariationId": "var_01ZZZZZZZZZZZZZZZZZZZZZZZZ"}}`, a), 404, 5, "var_01ZZZZZZZZZZZZZZZZZZZZZZZZ"},
		{"external id already used", fmt.Sprintf(`{"metadata": {"externalId": "taken"}, "spec": {"agentId": %q}}`, a), 409, 6, "taken"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rpcStatus(t, e.c.on(t).request("POST", e.path("/objectives"), tc.body, nil), tc.status, tc.code, tc.field)
			if got := probe(t); got != 404 {
				t.Errorf("GET external_id:probe after a rejected create: %d, want 404", got)
			}
		})
	}
}

// TestSeed004LabelSyntaxAccepted: label shapes the seed allows are 200.
func TestSeed004LabelSyntaxAccepted(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	obj := e.objective(t, a, "")
	for _, labels := range []string{
		`{"priority": "high", "source": "api", "workflow": "onboarding"}`,
		`{"cadenya.com/priority": "high"}`,
		`{"empty": ""}`,
		`{"a.b_c-d": "x.y_z-9"}`,
		`{"k": "` + strings.Repeat("v", 63) + `"}`,
		`{"` + strings.Repeat("k", 63) + `": "v"}`,
	} {
		t.Run(labels, func(t *testing.T) {
			e.feedback(t, obj, `{"metadata": {"labels": `+labels+`}, "data": {"score": 0.5}}`)
		})
	}
}

// s4feedbackFixture is one agent with two variations and six feedback
// records, one minute apart (record i at t0 + i minutes):
//
//	1 A  1.0  "Short and on point."             source=csat
//	2 B -0.5  "Second reviewer DISAGREES."      source=auto
//	3 A  0.0  "Neutral take"                     source=csat,tier=gold
//	4 B  —    (no score, no comment)
//	5 A -1.0  "Customer came back within 24h."  source=csat
//	6 B  0.9  "Resolved first contact."         tier=gold
type s4feedbackFixture struct {
	agent, varA, varB string
	t0                time.Time
	ids               [7]string // feedback id of record i; [0] unused
	objs              [7]string // objective of record i
}

func newS4FeedbackFixture(t *testing.T, e *s4env) *s4feedbackFixture {
	t.Helper()
	f := &s4feedbackFixture{t0: e.clk.Now()}
	f.agent = e.agent(t, "support-bot", "")
	f.varA, f.varB = e.variation(t, f.agent, "concise"), e.variation(t, f.agent, "verbose")
	records := []struct {
		variation, data, labels string
	}{
		{f.varA, `{"score": 1.0, "comment": "Short and on point."}`, `{"source": "csat"}`},
		{f.varB, `{"score": -0.5, "comment": "Second reviewer DISAGREES."}`, `{"source": "auto"}`},
		{f.varA, `{"score": 0.0, "comment": "Neutral take"}`, `{"source": "csat", "tier": "gold"}`},
		{f.varB, `{}`, `{}`},
		{f.varA, `{"score": -1.0, "comment": "Customer came back within 24h."}`, `{"source": "csat"}`},
		{f.varB, `{"score": 0.9, "comment": "Resolved first contact."}`, `{"tier": "gold"}`},
	}
	for i, r := range records {
		n := i + 1
		f.objs[n] = e.objective(t, f.agent, r.variation)
		e.clk.Advance(time.Minute) // record n at t0 + n minutes
		m := e.c.on(t).must(200, "POST", e.path("/objectives/"+f.objs[n]+"/feedback"),
			`{"metadata": {"labels": `+r.labels+`}, "data": `+r.data+`}`)
		f.ids[n] = str(t, m, "metadata", "id")
	}
	return f
}

// want lists the ids of records n..., in the order given.
func (f *s4feedbackFixture) want(n ...int) []string {
	out := make([]string, len(n))
	for i, k := range n {
		out[i] = f.ids[k]
	}
	return out
}

// TestSeed004AgentFeedbackFilters: every filter of the agent-level list,
// alone and combined, newest first; 0.0 and an omitted score match neither
// sentiment.
func TestSeed004AgentFeedbackFilters(t *testing.T) {
	e := newS4Env(t, config{})
	f := newS4FeedbackFixture(t, e)
	tm := func(d time.Duration) string { return ts(f.t0.Add(d)) }

	cases := []struct {
		name  string
		query url.Values
		want  []int
	}{
		{"no filter is everything", nil, []int{6, 5, 4, 3, 2, 1}},
		{"sentiment positive is score > 0", url.Values{"sentiment": {"FEEDBACK_SENTIMENT_POSITIVE"}}, []int{6, 1}},
		{"sentiment negative is score < 0; 0.0 and omitted match neither", url.Values{"sentiment": {"FEEDBACK_SENTIMENT_NEGATIVE"}}, []int{5, 2}},
		{"sentiment unspecified is everything", url.Values{"sentiment": {"FEEDBACK_SENTIMENT_UNSPECIFIED"}}, []int{6, 5, 4, 3, 2, 1}},
		{"agentVariationId A", url.Values{"agentVariationId": {f.varA}}, []int{5, 3, 1}},
		{"agentVariationId B", url.Values{"agentVariationId": {f.varB}}, []int{6, 4, 2}},
		{"agentVariationId unknown", url.Values{"agentVariationId": {"var_01ZZZZZZZZZZZZZZZZZZZZZZZZ"}}, nil},
		{"query is a case-insensitive substring (lower finds upper)", url.Values{"query": {"disagrees"}}, []int{2}},
		{"query is a case-insensitive substring (upper finds mixed)", url.Values{"query": {"SHORT AND"}}, []int{1}},
		{"query matches mid-word", url.Values{"query": {"24h"}}, []int{5}},
		{"query matches no comment", url.Values{"query": {"refund"}}, nil},
		{"createdAfter", url.Values{"createdAfter": {tm(150 * time.Second)}}, []int{6, 5, 4, 3}},
		{"createdBefore", url.Values{"createdBefore": {tm(150 * time.Second)}}, []int{2, 1}},
		{"createdAfter and createdBefore", url.Values{"createdAfter": {tm(90 * time.Second)}, "createdBefore": {tm(270 * time.Second)}}, []int{4, 3, 2}},
		{"labels one pair", url.Values{"labels": {"source=csat"}}, []int{5, 3, 1}},
		{"labels every pair must match", url.Values{"labels": {"source=csat,tier=gold"}}, []int{3}},
		{"labels other key", url.Values{"labels": {"tier=gold"}}, []int{6, 3}},
		{"labels value must match", url.Values{"labels": {"source=email"}}, nil},
		{"negative on variation A", url.Values{"sentiment": {"FEEDBACK_SENTIMENT_NEGATIVE"}, "agentVariationId": {f.varA}}, []int{5}},
		{"positive with label tier=gold", url.Values{"sentiment": {"FEEDBACK_SENTIMENT_POSITIVE"}, "labels": {"tier=gold"}}, []int{6}},
		{"query and createdBefore", url.Values{"query": {"o"}, "createdBefore": {tm(210 * time.Second)}}, []int{2, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := e.path("/agents/" + f.agent + "/feedback")
			if len(tc.query) > 0 {
				p += "?" + tc.query.Encode()
			}
			page := e.c.on(t).must(200, "GET", p, "")
			if got, want := fbIDs(t, page), f.want(tc.want...); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("GET %s = %v, want %v", p, got, want)
			}
			expect(t, page, "", "nextCursor")
		})
	}

	// Per objective: labels filter on the objective's own records.
	p := e.path("/objectives/" + f.objs[3] + "/feedback?labels=tier=gold")
	if got := fbIDs(t, e.c.must(200, "GET", p, "")); fmt.Sprint(got) != fmt.Sprint(f.want(3)) {
		t.Errorf("GET %s = %v, want %v", p, got, f.want(3))
	}
	p = e.path("/objectives/" + f.objs[1] + "/feedback?labels=tier=gold")
	if got := fbIDs(t, e.c.must(200, "GET", p, "")); len(got) != 0 {
		t.Errorf("GET %s = %v, want none", p, got)
	}
}

// TestSeed004IncludeInfo: with includeInfo each record names its objective
// and the variation that ran it; without it (or false, or on the
// per-objective list) info carries submittedBy and nothing else.
func TestSeed004IncludeInfo(t *testing.T) {
	e := newS4Env(t, config{})
	f := newS4FeedbackFixture(t, e)
	base := e.path("/agents/" + f.agent + "/feedback")

	page := e.c.must(200, "GET", base+"?includeInfo=true", "")
	items := list(t, page, "items")
	if len(items) != 6 {
		t.Fatalf("includeInfo=true: %d items, want 6", len(items))
	}
	for i := range items {
		n := 6 - i
		wantVar, wantName := f.varB, "verbose"
		if n%2 == 1 {
			wantVar, wantName = f.varA, "concise"
		}
		expect(t, page, f.objs[n], "items", i, "info", "objective", "id")
		expect(t, page, wantVar, "items", i, "info", "agentVariation", "id")
		expect(t, page, wantName, "items", i, "info", "agentVariation", "name")
		expect(t, page, e.profile, "items", i, "info", "submittedBy", "metadata", "id")
	}

	for _, p := range []string{base, base + "?includeInfo=false", e.path("/objectives/" + f.objs[1] + "/feedback?includeInfo=true")} {
		page := e.c.must(200, "GET", p, "")
		for i := range list(t, page, "items") {
			info, _ := at(t, page, "items", i, "info").(map[string]any)
			var keys []string
			for k := range info {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			if fmt.Sprint(keys) != "[submittedBy]" {
				t.Errorf("GET %s item %d: info keys %v, want only submittedBy", p, i, keys)
			}
			expect(t, page, profileTypeKey, "items", i, "info", "submittedBy", "spec", "type")
		}
	}
}

// walkFeedback pages through path with limit=1 and returns the ids in page
// order; mid runs after the first page.
func walkFeedback(t *testing.T, c *client, path string, mid func()) []string {
	t.Helper()
	var out []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("walk of %s did not end after 100 pages: %v", path, out)
		}
		q := url.Values{"limit": {"1"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		page := c.must(200, "GET", path+sep+q.Encode(), "")
		ids := fbIDs(t, page)
		if len(ids) > 1 {
			t.Fatalf("limit=1 page of %s has %d items", path, len(ids))
		}
		out = append(out, ids...)
		cursor = str(t, page, "nextCursor")
		if cursor == "" {
			return out
		}
		if len(ids) == 0 {
			t.Fatalf("empty page of %s with a nextCursor", path)
		}
		if pages == 0 && mid != nil {
			mid()
		}
	}
}

// TestSeed004CursorPaging: limit=1 walks every record exactly once, newest
// first, and a record that arrives mid-walk neither shows up nor shifts the
// walk; the same holds under a filter and on the per-objective list.
func TestSeed004CursorPaging(t *testing.T) {
	e := newS4Env(t, config{})
	f := newS4FeedbackFixture(t, e)
	all := e.path("/agents/" + f.agent + "/feedback")
	late := func() { e.feedback(t, f.objs[1], `{"metadata": {}, "data": {"score": 1.0, "comment": "late"}}`) }

	if got, want := walkFeedback(t, e.c, all, late), f.want(6, 5, 4, 3, 2, 1); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("walk with a record arriving mid-walk = %v, want %v", got, want)
	}
	after := fbIDs(t, e.c.must(200, "GET", all, ""))
	if len(after) != 7 || fmt.Sprint(after[1:]) != fmt.Sprint(f.want(6, 5, 4, 3, 2, 1)) {
		t.Errorf("after the walk the list is %v, want the late record then %v", after, f.want(6, 5, 4, 3, 2, 1))
	}
	if got := walkFeedback(t, e.c, all, nil); fmt.Sprint(got) != fmt.Sprint(after) {
		t.Errorf("second walk = %v, want %v", got, after)
	}
	positive := all + "?sentiment=FEEDBACK_SENTIMENT_POSITIVE"
	if got, want := walkFeedback(t, e.c, positive, nil), []string{after[0], f.ids[6], f.ids[1]}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("positive walk = %v, want %v", got, want)
	}
	obj := e.path("/objectives/" + f.objs[1] + "/feedback")
	if got, want := walkFeedback(t, e.c, obj, late), []string{after[0], f.ids[1]}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("objective walk = %v, want %v", got, want)
	}

	page := e.c.must(200, "GET", all+"?limit=3", "")
	if got := fbIDs(t, page); fmt.Sprint(got) != fmt.Sprint(fbIDs(t, e.c.must(200, "GET", all, ""))[:3]) {
		t.Errorf("limit=3 page = %v", got)
	}
	if str(t, page, "nextCursor") == "" {
		t.Error("limit=3 page of 8 records has no nextCursor")
	}
	e.c.must(200, "GET", all+"?limit=1000", "")
}

// TestSeed004ListLimitDefaults50: without limit a page holds 50 records
// and a cursor to the rest.
func TestSeed004ListLimitDefaults50(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	obj := e.objective(t, a, "")
	for i := 0; i < 52; i++ {
		e.feedback(t, obj, fmt.Sprintf(`{"metadata": {}, "data": {"comment": "n%d"}}`, i))
	}
	for _, p := range []string{e.path("/agents/" + a + "/feedback"), e.path("/objectives/" + obj + "/feedback")} {
		page := e.c.must(200, "GET", p, "")
		if n := len(list(t, page, "items")); n != 50 {
			t.Errorf("GET %s: %d items, want 50", p, n)
		}
		expect(t, page, "n51", "items", 0, "data", "comment")
		rest := e.c.must(200, "GET", p+"?cursor="+url.QueryEscape(str(t, page, "nextCursor")), "")
		if n := len(list(t, rest, "items")); n != 2 {
			t.Errorf("GET %s second page: %d items, want 2", p, n)
		}
		expect(t, rest, "n0", "items", 1, "data", "comment")
		expect(t, rest, "", "nextCursor")
	}
}

// countSelections creates n unpinned objectives through the seed-004 door
// and counts info.agentVariation.id; spec.agentId must echo the agent.
func countSelections(t *testing.T, e *s4env, agent string, n int) map[string]int {
	t.Helper()
	counts := map[string]int{}
	body := fmt.Sprintf(`{"metadata": {}, "spec": {"agentId": %q}}`, agent)
	for i := 0; i < n; i++ {
		m := e.c.must(200, "POST", e.path("/objectives"), body)
		counts[str(t, m, "info", "agentVariation", "id")]++
	}
	return counts
}

// train pins n objectives to variation and scores each with score.
func train(t *testing.T, e *s4env, agent, variation string, n int, score string) {
	t.Helper()
	for i := 0; i < n; i++ {
		e.feedback(t, e.objective(t, agent, variation), `{"metadata": {}, "data": {"score": `+score+`}}`)
	}
}

// TestSeed004WeightedSelectionFollowsFeedback: after twenty +1 on one
// variation and twenty -1 on the other, Thompson sampling picks the first
// for at least 95% of 200 unpinned objectives (Beta(21,1) vs Beta(1,21)).
func TestSeed004WeightedSelectionFollowsFeedback(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", "")
	good, bad := e.variation(t, a, "concise"), e.variation(t, a, "verbose")
	train(t, e, a, good, 20, "1.0")
	train(t, e, a, bad, 20, "-1.0")
	expect(t, e.nativeVar(t, a, good), 21.0, "info", "alpha")
	expect(t, e.nativeVar(t, a, bad), 21.0, "info", "beta")

	counts := countSelections(t, e, a, 200)
	if counts[good] < 190 || counts[good]+counts[bad] != 200 {
		t.Errorf("selections %v: want ≥ 190 of 200 for %s", counts, good)
	}
}

// TestSeed004RandomSelectionIgnoresFeedback: an agent in RANDOM mode picks
// uniformly even when one variation has a far better record.
func TestSeed004RandomSelectionIgnoresFeedback(t *testing.T) {
	e := newS4Env(t, config{})
	a := e.agent(t, "support-bot", modeRandom)
	good, other := e.variation(t, a, "concise"), e.variation(t, a, "verbose")
	train(t, e, a, good, 10, "1.0")

	counts := countSelections(t, e, a, 200)
	for _, v := range []string{good, other} {
		if counts[v] < 70 || counts[v] > 130 {
			t.Errorf("selections %v: %s chosen %d times, want 70-130 of 200", counts, v, counts[v])
		}
	}
}

// TestNativeVariationsAndRuns: the native door creates, lists and reads
// variations, and a run names the variation it was pinned to or given.
func TestNativeVariationsAndRuns(t *testing.T) {
	e := newS4Env(t, config{})
	c := e.c
	a := e.agent(t, "support-bot", "")
	base := "/api/v1/agents/" + a

	runs := c.must(201, "POST", base+"/runs", `{}`)
	expect(t, runs, nil, "variation_id")
	expect(t, runs, nil, "variation")

	res := c.request("POST", base+"/variations", `{"name": "concise", "config": {"model": "small", "temperature": 0.2}}`, nil)
	if res.status != 201 {
		t.Fatalf("create variation: %d %s, want 201", res.status, res.body)
	}
	v1 := res.json(t)
	id1 := str(t, v1, "id")
	if !strings.HasPrefix(id1, "var_") {
		t.Errorf("variation id %q lacks var_ prefix", id1)
	}
	expect(t, v1, a, "agent_id")
	expect(t, v1, "concise", "name")
	expect(t, v1, "small", "config", "model")
	expectTime(t, v1, e.clk.Now(), "created_at")
	expect(t, v1, 0.5, "info", "score")
	expect(t, v1, 0.0, "info", "feedback_count")
	expect(t, v1, 1.0, "info", "alpha")
	expect(t, v1, 1.0, "info", "beta")
	v2 := c.must(201, "POST", base+"/variations", `{"name": "verbose"}`)
	id2 := str(t, v2, "id")
	expect(t, v2, nil, "config")

	if got := c.raw(base + "/variations/" + id1); got != string(res.body) {
		t.Errorf("GET variation %s:\n got %s\nwant %s", id1, got, res.body)
	}
	items := list(t, c.must(200, "GET", base+"/variations", ""), "items")
	if len(items) != 2 || str(t, items[0], "id") != id1 || str(t, items[1], "id") != id2 {
		t.Errorf("variations list = %v, want [%s %s]", items, id1, id2)
	}
	seedVar := c.must(200, "GET", e.path("/agents/"+a+"/variations/"+id1), "")
	expect(t, seedVar, "small", "spec", "config", "model")

	pinned := c.must(201, "POST", base+"/runs", fmt.Sprintf(`{"variation_id": %q}`, id2))
	expect(t, pinned, id2, "variation_id")
	expect(t, pinned, id2, "variation", "id")
	expect(t, pinned, "verbose", "variation", "name")
	chosen := c.must(201, "POST", base+"/runs", `{}`)
	if id := str(t, chosen, "variation_id"); id != id1 && id != id2 {
		t.Errorf("unpinned run chose %q, want one of the agent's variations", id)
	}
	expect(t, chosen, str(t, chosen, "variation_id"), "variation", "id")

	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"variation without name", "POST", base + "/variations", `{}`, 400},
		{"variation config not an object", "POST", base + "/variations", `{"name": "x", "config": "small"}`, 400},
		{"unknown variation", "GET", base + "/variations/var_01ZZZZZZZZZZZZZZZZZZZZZZZZ", ``, 404},
		{"run pinned to an unknown variation", "POST", base + "/runs", `{"variation_id": "var_01ZZZZZZZZZZZZZZZZZZZZZZZZ"}`, 404},
		{"seed-004 variation unknown", "GET", e.path("/agents/" + a + "/variations/var_01ZZZZZZZZZZZZZZZZZZZZZZZZ"), ``, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if res := c.on(t).request(tc.method, tc.path, tc.body, nil); res.status != tc.status {
				t.Errorf("status %d, want %d; %s", res.status, tc.status, res.body)
			}
		})
	}
	other := e.agent(t, "other-bot", "")
	res = c.request("POST", "/api/v1/agents/"+other+"/runs", fmt.Sprintf(`{"variation_id": %q}`, id1), nil)
	if res.status != 404 {
		t.Errorf("run pinned to another agent's variation: %d %s, want 404", res.status, res.body)
	}
}

// TestSeed004SurvivesRestart: posteriors, feedback records, their signals
// and the objectives read back byte for byte after a close and a reopen on
// the same directory, and feedback after the restart builds on them.
func TestSeed004SurvivesRestart(t *testing.T) {
	never := 1000 * time.Hour
	cases := []struct {
		name      string
		cfg       config
		passivate bool
	}{
		{name: "log only", cfg: config{SnapshotEvery: 1 << 30, SnapshotInterval: never}},
		{name: "snapshot every 3 events", cfg: config{SnapshotEvery: 3, SnapshotInterval: never}},
		{name: "actors passivate after 50ms", cfg: config{SnapshotEvery: 1 << 30, SnapshotInterval: never,
			IdleTimeout: 50 * time.Millisecond}, passivate: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newS4Env(t, tc.cfg)
			a := e.agent(t, "support-bot", "")
			v, w := e.variation(t, a, "concise"), e.variation(t, a, "verbose")
			var objs []string
			for _, body := range []string{seedFeedbackCurl,
				`{"metadata": {}, "data": {"score": -0.5, "comment": "Second reviewer disagrees."}}`,
				`{"metadata": {}, "data": {"score": 0.0}}`} {
				obj := e.objective(t, a, v)
				objs = append(objs, obj)
				e.feedback(t, obj, body)
			}
			e.c.must(200, "POST", e.path("/objectives"),
				fmt.Sprintf(`{"metadata": {"externalId": "ticket-4521"}, "spec": {"agentId": %q, "agentVariationId": %q}}`, a, w))
			e.feedback(t, "external_id:ticket-4521", seedExternalFB)
			objs = append(objs, "external_id:ticket-4521")

			paths := []string{
				"/api/v1/agents/" + a + "/variations",
				"/api/v1/agents/" + a + "/variations/" + v,
				e.path("/agents/" + a + "/variations/" + v),
				e.path("/agents/" + a + "/variations/" + w),
				e.path("/agents/" + a + "/feedback?includeInfo=true"),
				e.path("/agents/" + a + "/feedback?labels=source=csat"),
			}
			for _, o := range objs {
				paths = append(paths, e.path("/objectives/"+o), e.path("/objectives/"+o+"/feedback"),
					"/api/v1/agents/"+a+"/runs/"+o, "/api/v1/agents/"+a+"/runs/"+o+"/signals")
			}
			reads := func(c *client) map[string]string {
				out := map[string]string{}
				for _, p := range paths {
					out[p] = c.raw(p)
				}
				return out
			}
			if tc.passivate {
				waitPassivated(t, e.h)
			}
			before := reads(e.c)
			e.h.restart()
			e.c = e.h.client(e.key)
			sameReads(t, "after restart", before, reads(e.c))

			fb := e.feedback(t, objs[0], `{"metadata": {}, "data": {"score": 1.0, "comment": "after restart"}}`)
			expect(t, e.nativeVar(t, a, v), 3.5, "info", "alpha")
			expect(t, e.nativeVar(t, a, v), 2.0, "info", "beta")
			expect(t, e.nativeVar(t, a, v), 4.0, "info", "feedback_count")
			page := e.c.must(200, "GET", e.path("/agents/"+a+"/feedback"), "")
			ids := fbIDs(t, page)
			if len(ids) != 5 || ids[0] != str(t, fb, "metadata", "id") {
				t.Errorf("agent feedback after restart = %v, want 5 with %s first", ids, str(t, fb, "metadata", "id"))
			}
			seen := map[string]bool{}
			for _, id := range ids {
				if seen[id] {
					t.Errorf("feedback id %s repeated after restart: %v", id, ids)
				}
				seen[id] = true
			}
			if n := len(list(t, e.c.must(200, "GET", "/api/v1/agents/"+a+"/runs/"+objs[0]+"/signals", ""), "items")); n != 2 {
				t.Errorf("run %s has %d signals after restart, want 2", objs[0], n)
			}
		})
	}
}

// TestSeed004Tenancy: a key on another workspace's path is 403 code 7 and
// writes nothing; ids of another workspace under the key's own path are 404
// code 5; external ids are scoped to their workspace.
func TestSeed004Tenancy(t *testing.T) {
	e := newS4Env(t, config{}) // workspace A (acme) and its key
	b := str(t, e.admin.must(201, "POST", "/v1/workspaces", `{"name": "globex"}`), "id")
	keyB := str(t, e.admin.must(201, "POST", "/v1/workspaces/"+b+"/api-keys", `{"name": "globex-ci"}`), "key")
	cb := e.admin.as(keyB)

	agentA := e.agent(t, "acme-bot", "")
	varA := e.variation(t, agentA, "concise")
	objA := e.objective(t, agentA, varA)

	agentB := str(t, cb.must(201, "POST", "/api/v1/agents", `{"name": "globex-bot"}`), "id")
	varB := str(t, cb.must(201, "POST", "/api/v1/agents/"+agentB+"/variations", `{"name": "concise"}`), "id")
	pathB := func(rest string) string { return "/v1/workspaces/" + b + rest }
	objB := str(t, cb.must(200, "POST", pathB("/objectives"),
		fmt.Sprintf(`{"metadata": {"externalId": "shared-ext"}, "spec": {"agentId": %q, "agentVariationId": %q}}`, agentB, varB)), "metadata", "id")
	cb.must(200, "POST", pathB("/objectives/"+objB+"/feedback"), seedFeedbackCurl)

	stateB := func(t *testing.T) string {
		return cb.on(t).raw(pathB("/agents/"+agentB+"/feedback")) + cb.on(t).raw(pathB("/agents/"+agentB+"/variations/"+varB))
	}
	before := stateB(t)

	spec := func(agent, variation string) string {
		return fmt.Sprintf(`{"metadata": {}, "spec": {"agentId": %q, "agentVariationId": %q}}`, agent, variation)
	}
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     float64
	}{
		{"create objective on B's path", "POST", pathB("/objectives"), spec(agentB, varB), 403, 7},
		{"read B's objective on B's path", "GET", pathB("/objectives/" + objB), "", 403, 7},
		{"feedback on B's path", "POST", pathB("/objectives/" + objB + "/feedback"), seedFeedbackCurl, 403, 7},
		{"B's objective feedback list", "GET", pathB("/objectives/" + objB + "/feedback"), "", 403, 7},
		{"B's agent feedback list", "GET", pathB("/agents/" + agentB + "/feedback"), "", 403, 7},
		{"B's variation", "GET", pathB("/agents/" + agentB + "/variations/" + varB), "", 403, 7},
		{"a workspace that does not exist", "GET", "/v1/workspaces/ws_01ZZZZZZZZZZZZZZZZZZZZZZZZ/objectives/" + objA, "", 403, 7},
		{"B's objective under A's path", "GET", e.path("/objectives/" + objB), "", 404, 5},
		{"feedback to B's objective under A's path", "POST", e.path("/objectives/" + objB + "/feedback"), seedFeedbackCurl, 404, 5},
		{"B's objective feedback list under A's path", "GET", e.path("/objectives/" + objB + "/feedback"), "", 404, 5},
		{"B's external id under A's path", "POST", e.path("/objectives/external_id:shared-ext/feedback"), seedFeedbackCurl, 404, 5},
		{"B's agent under A's path", "GET", e.path("/agents/" + agentB + "/feedback"), "", 404, 5},
		{"B's variation under A's agent", "GET", e.path("/agents/" + agentA + "/variations/" + varB), "", 404, 5},
		{"objective for B's agent under A's path", "POST", e.path("/objectives"), spec(agentB, varB), 404, 5},
		{"objective pinned to B's variation on A's agent", "POST", e.path("/objectives"), spec(agentA, varB), 404, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rpcStatus(t, e.c.on(t).request(tc.method, tc.path, tc.body, nil), tc.status, tc.code, "")
			if after := stateB(t); after != before {
				t.Errorf("workspace B changed:\nbefore %s\nafter  %s", before, after)
			}
		})
	}

	// External ids are per workspace: A may use B's, and it names A's own.
	ownA := str(t, e.c.must(200, "POST", e.path("/objectives"),
		fmt.Sprintf(`{"metadata": {"externalId": "shared-ext"}, "spec": {"agentId": %q}}`, agentA)), "metadata", "id")
	expect(t, e.c.must(200, "GET", e.path("/objectives/external_id:shared-ext"), ""), ownA, "metadata", "id")
	expect(t, cb.must(200, "GET", pathB("/objectives/external_id:shared-ext"), ""), objB, "metadata", "id")

	// The admin key may act on every workspace.
	e.admin.must(200, "GET", pathB("/objectives/"+objB), "")
	res := e.admin.request("GET", "/v1/workspaces/ws_01ZZZZZZZZZZZZZZZZZZZZZZZZ/objectives/"+objB, "", nil)
	rpcStatus(t, res, 404, 5, "")
	res = e.c.as("").request("GET", e.path("/objectives/"+objA), "", nil)
	rpcStatus(t, res, 401, 16, "")
}
