package api_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

const previewV1 = `{"definition": {"horizon_s": 3600, "guards": [{"signal": "run.succeeded", "op": "lt", "value": 1}],
	"terms": [{"signal": "human.rating", "weight": 1, "scale": [1, 5]}]}}`

const previewDraftDef = `{"horizon_s": 3600, "default": 0.5, "bounds": [-1, 1],
	"terms": [{"signal": "human.rating", "weight": 1, "scale": [1, 5]}, {"signal": "ci.tests", "weight": 1}]}`

// previewAgent makes an agent with objective version 1 and runs of
// versions "3" and "4", all but one matured (finished two hours ago).
func previewAgent(t *testing.T, c *client, clk *clock) string {
	a := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "support"}`), "id")
	c.putObjective(a, previewV1)
	for i := range 12 {
		r := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/runs", fmt.Sprintf(`{"version": "%d"}`, 3+i%2)), "id")
		if i%3 != 0 {
			c.must(201, "POST", "/api/v1/agents/"+a+"/signals", fmt.Sprintf(`{"kind": "human.rating", "value": %d, "run_id": %q}`, 1+i%5, r))
		}
		if i%4 == 0 {
			c.must(201, "POST", "/api/v1/agents/"+a+"/signals", fmt.Sprintf(`{"kind": "ci.tests", "value": 0.%d, "run_id": %q}`, i, r))
		}
		if i != 11 {
			c.must(200, "POST", "/api/v1/agents/"+a+"/runs/"+r+"/finish", fmt.Sprintf(`{"succeeded": %t}`, i%5 != 1))
		}
	}
	clk.Advance(2 * time.Hour)
	return a
}

func asJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPreviewEqualsPublishingThenReading: the preview's two summaries are
// the version summaries of the current version and of the draft once it is
// published; the preview writes nothing. A numeric version reads as its
// text, as in a run; without one, every run is summarised.
func TestPreviewEqualsPublishingThenReading(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	a := previewAgent(t, c, h.clk)
	body := `{"definition": ` + previewDraftDef + `, "version": 3, "limit": 3}`
	pv := c.must(200, "POST", "/api/v1/agents/"+a+"/objective/preview", body)
	all := c.must(200, "POST", "/api/v1/agents/"+a+"/objective/preview", `{"definition": `+previewDraftDef+`}`)
	expect(t, c.must(200, "GET", "/api/v1/agents/"+a+"/objective", ""), 1.0, "version")

	expect(t, pv, "3", "version")
	expect(t, pv, 0.5, "definition", "default") // echoed in canonical form
	cur := c.must(200, "GET", "/api/v1/agents/"+a+"/versions/3/rewards?limit=3", "")
	if got, want := asJSON(t, pv["current"]), asJSON(t, cur); got != want {
		t.Fatalf("current:\n%s\nwant the version summary\n%s", got, want)
	}
	c.putObjective(a, `{"definition": `+previewDraftDef+`}`)
	drf := c.must(200, "GET", "/api/v1/agents/"+a+"/versions/3/rewards?limit=3", "")
	if got, want := asJSON(t, pv["draft"]), asJSON(t, drf); got != want {
		t.Fatalf("draft:\n%s\nwant the published version's summary\n%s", got, want)
	}
	expect(t, drf, 2.0, "objective_version")
	expect(t, all, nil, "version")
	expect(t, all, nil, "draft", "version")
	expect(t, all, 12.0, "draft", "runs")
	if m := list(t, pv, "moved"); len(m) == 0 || len(m) > 3 {
		t.Fatalf("moved %v, want 1 to 3 runs", m)
	}
	for _, key := range []string{"run_id", "current", "draft", "delta", "matured", "current_status", "draft_status"} {
		if _, ok := list(t, pv, "moved")[0].(map[string]any)[key]; !ok {
			t.Errorf("a moved run has no %s", key)
		}
	}
	if reflect.DeepEqual(pv["current"], pv["draft"]) {
		t.Fatal("the draft should change the summary")
	}
}

// TestPreviewChecksItsIdempotencyKey: a preview is a POST, so a malformed
// Idempotency-Key is 400 as on every POST; a well-formed one has no other
// effect (a preview writes nothing), so a second preview with the same
// key and another body is answered, not 409.
func TestPreviewChecksItsIdempotencyKey(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	a := previewAgent(t, c, h.clk)
	path := "/api/v1/agents/" + a + "/objective/preview"
	body := `{"definition": ` + previewDraftDef + `}`
	bad := c.request("POST", path, body, map[string]string{"Idempotency-Key": "a key with spaces"})
	if bad.status != 400 || !strings.Contains(str(t, bad.json(t), "error", "message"), "Idempotency-Key") {
		t.Errorf("preview with a malformed key: %d %s, want 400 naming Idempotency-Key", bad.status, bad.body)
	}
	key := map[string]string{"Idempotency-Key": "preview-1"}
	if r := c.request("POST", path, body, key); r.status != 200 {
		t.Fatalf("preview with a key: %d %s", r.status, r.body)
	}
	other := `{"definition": ` + previewDraftDef + `, "limit": 1}`
	if r := c.request("POST", path, other, key); r.status != 200 {
		t.Errorf("preview again with the key and another body: %d %s, want 200", r.status, r.body)
	}
}

// TestPreviewValidatesTheDraft: a bad draft is refused as a bad PUT is,
// naming the field.
func TestPreviewValidatesTheDraft(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	a := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "support"}`), "id")
	path := "/api/v1/agents/" + a + "/objective/preview"
	for _, tc := range []struct{ body, field string }{
		{`{}`, "definition"},
		{`{"definition": {"terms": []}}`, "definition.terms"},
		{`{"definition": {"terms": [{"signal": "a", "weight": "1"}]}}`, "definition.terms[0].weight"},
		{`{"definition": {"terms": [{"signal": "a", "weight": 1}], "bounds": [1, 0]}}`, "definition.bounds"},
		{`{"definition": {"terms": [{"signal": "a", "weight": 1}]}, "limit": 0}`, "limit"},
		{`{"definition": {"terms": [{"signal": "a", "weight": 1}]}, "limit": 1.5}`, "limit"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			put := c.on(t).request("PUT", "/api/v1/agents/"+a+"/objective", tc.body, nil)
			r := c.on(t).request("POST", path, tc.body, nil)
			apiError(t, r, 400, "invalid_request", tc.field+":")
			if tc.field != "limit" {
				apiError(t, put, 400, "invalid_request", tc.field+":")
			}
		})
	}
	c.must(404, "POST", "/api/v1/agents/agt_none/objective/preview", `{"definition": {"terms": [{"signal": "a", "weight": 1}]}}`)
}

// TestVariationListingShowsPosteriors: the listing carries each
// variation's mean, 95% interval and probability of being best, which sum
// to 1 and follow the posteriors; the same state reads the same.
func TestVariationListingShowsPosteriors(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	a := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "support"}`), "id")
	var ids []string
	for _, name := range []string{"good", "bad"} {
		ids = append(ids, str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/variations", fmt.Sprintf(`{"name": %q}`, name)), "id"))
	}
	for i := range 8 {
		v, score := ids[i%2], []string{"1", "-1"}[i%2]
		r := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/runs", fmt.Sprintf(`{"variation_id": %q}`, v)), "id")
		c.must(200, "POST", "/v1/workspaces/default/objectives/"+r+"/feedback", `{"metadata": {}, "data": {"score": `+score+`}}`)
	}
	first := c.raw("/api/v1/agents/" + a + "/variations")
	if again := c.raw("/api/v1/agents/" + a + "/variations"); again != first {
		t.Fatalf("two reads of one state differ:\n%s\n%s", first, again)
	}
	var got struct {
		Items []struct {
			Info struct {
				Alpha, Beta, Mean float64
				ProbBest          float64 `json:"prob_best"`
				Interval          []float64
			}
		}
	}
	if err := json.Unmarshal([]byte(first), &got); err != nil || len(got.Items) != 2 {
		t.Fatalf("%v: %s", err, first)
	}
	good, bad := got.Items[0].Info, got.Items[1].Info
	if good.Alpha != 5 || good.Beta != 1 || bad.Alpha != 1 || bad.Beta != 5 {
		t.Fatalf("posteriors %+v %+v", good, bad)
	}
	// P(Beta(5,1) > Beta(1,5)) = 1 − 1/252 (the closed form), within Monte Carlo error.
	if want := 1 - 1.0/252; good.ProbBest < want-0.01 || good.ProbBest+bad.ProbBest != 1 {
		t.Fatalf("prob_best %v and %v, want about %.4f and %.4f", good.ProbBest, bad.ProbBest, want, 1-want)
	}
	// Beta(5,1): CDF x^5, so the interval is [0.025^(1/5), 0.975^(1/5)].
	if len(good.Interval) != 2 || good.Mean != 5.0/6 || abs(good.Interval[0]-0.478176) > 1e-6 || abs(good.Interval[1]-0.994949) > 1e-6 {
		t.Fatalf("mean %v interval %v", good.Mean, good.Interval)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
