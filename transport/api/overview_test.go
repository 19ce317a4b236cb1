package api_test

import (
	"testing"
	"time"
)

// TestAgentOverview reads an agent at a glance: run counts by window and
// release, the mean under the current objective, selections per variation.
func TestAgentOverview(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	a := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "support"}`), "id")
	v := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/variations", `{"name": "concise"}`), "id")
	r := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/runs", `{"version": "3"}`), "id")
	c.must(201, "POST", "/api/v1/agents/"+a+"/signals", `{"kind": "human.rating", "value": 0.8, "run_id": "`+r+`"}`)
	c.must(200, "POST", "/api/v1/agents/"+a+"/runs/"+r+"/finish", `{"succeeded": true}`)
	h.clk.Advance(8 * 24 * time.Hour) // past the default horizon and the 7-day window
	c.must(201, "POST", "/api/v1/agents/"+a+"/runs", `{}`)

	o := c.must(200, "GET", "/api/v1/agents/"+a+"/overview", "")
	for k, want := range map[string]any{"agent_id": a, "objective_version": 0.0, "runs": 2.0, "runs_24h": 1.0,
		"runs_7d": 1.0, "matured": 1.0, "mean": 0.8, "feedback_count": 0.0} {
		expect(t, o, want, k)
	}
	expect(t, o, "3", "versions", 0, "version")
	expect(t, o, 1.0, "versions", 0, "runs")
	expect(t, o, nil, "versions", 1, "version")
	expect(t, o, 3600.0, "selections", "bucket_s")
	expect(t, o, v, "selections", "items", 0, "variation_id")
	counts := list(t, o, "selections", "items", 0, "counts")
	if len(counts) != 24 || counts[23] != 1.0 {
		t.Errorf("counts = %v, want 24 buckets, the new run in the last", counts)
	}
	o = c.must(200, "GET", "/api/v1/agents/"+a+"/overview?buckets=7&bucket_s=86400", "")
	if n := len(list(t, o, "selections", "items", 0, "counts")); n != 7 {
		t.Errorf("%d daily buckets, want 7", n)
	}
	o = c.must(200, "GET", "/api/v1/agents/"+a+"/overview?rewards=false", "")
	expect(t, o, nil, "mean")
	expect(t, o, 0.0, "matured")
	expect(t, o, 2.0, "runs")
	apiError(t, c.request("GET", "/api/v1/agents/"+a+"/overview?buckets=0", "", nil), 400, "invalid_request", "buckets")
}
