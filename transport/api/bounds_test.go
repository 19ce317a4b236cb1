package api_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/plaudit/plaudit/engine/objective"
)

// rfc3339 is what every timestamp of an answer must match: four-digit
// years, UTC.
var rfc3339 = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$`)

// TestDurationsAndTimesAreBounded: durations over ten years and instants
// outside 1970 to 2199 are 400 naming the field; at the bounds a reward's
// matures_at is still RFC 3339, and the instants survive a restart.
func TestDurationsAndTimesAreBounded(t *testing.T) {
	c := newHarness(t, config{}).client(adminKey)
	a := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "bounds"}`), "id")
	r := str(t, c.must(201, "POST", "/api/v1/agents/"+a+"/runs", `{}`), "id")
	agentPath := "/api/v1/agents/" + a
	runPath := agentPath + "/runs/" + r
	maxS := strconv.Itoa(objective.MaxDurationS)
	over := strconv.Itoa(objective.MaxDurationS + 1)
	def := func(horizon, within string) string {
		return `{"definition": {"horizon_s": ` + horizon + `, "terms": [{"signal": "k", "weight": 1, "within_s": ` + within + `}]}}`
	}
	for _, tc := range []struct{ name, method, path, body, field string }{
		{"horizon 1e300", "PUT", agentPath + "/objective", def("1e300", "1"), "definition.horizon_s"},
		{"horizon over ten years", "PUT", agentPath + "/objective", def(over, "1"), "definition.horizon_s"},
		{"within 1e300", "PUT", agentPath + "/objective", def("1", "1e300"), "definition.terms[0].within_s"},
		{"finished_at in year 9999", "POST", runPath + "/finish", `{"succeeded": true, "finished_at": "9999-12-31T23:59:59Z"}`, "finished_at"},
		{"finished_at at the upper bound", "POST", runPath + "/finish", `{"succeeded": true, "finished_at": "2200-01-01T00:00:00Z"}`, "finished_at"},
		{"finished_at before 1970", "POST", runPath + "/finish", `{"succeeded": true, "finished_at": "1969-12-31T23:59:59Z"}`, "finished_at"},
		{"occurred_at year 1", "POST", agentPath + "/signals", `{"kind": "k", "value": 1, "run_id": "` + r + `", "occurred_at": "0001-01-01T00:00:00Z"}`, "occurred_at"},
		{"feedback filter", "GET", "/v1/workspaces/default/agents/" + a + "/feedback?createdAfter=0001-01-01T00:00:00Z", "", "createdAfter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := c.on(t).request(tc.method, tc.path, tc.body, nil)
			if tc.method == "GET" {
				rpcStatus(t, res, 400, 3, tc.field+":")
				return
			}
			apiError(t, res, 400, "invalid_request", tc.field+":")
		})
	}

	// At the bounds: the longest horizon from the last instant accepted.
	c.putObjective(a, def(maxS, maxS))
	c.must(201, "POST", agentPath+"/signals", `{"kind": "k", "value": 1, "run_id": "`+r+`", "occurred_at": "1970-01-01T00:00:00Z"}`)
	run := c.must(200, "POST", runPath+"/finish", `{"succeeded": true, "finished_at": "2199-12-31T23:59:59.999999999Z"}`)
	reward := c.must(200, "GET", runPath+"/reward", "")
	for _, ts := range []string{str(t, run, "finished_at"), str(t, reward, "matures_at")} {
		if !rfc3339.MatchString(ts) {
			t.Errorf("timestamp %q is not RFC 3339 with a four-digit year", ts)
		}
	}
	// The log keeps instants as Unix nanoseconds: the last one accepted
	// must read back the same after recovery.
	c.h.restart()
	if again := c.must(200, "GET", runPath, ""); str(t, again, "finished_at") != str(t, run, "finished_at") {
		t.Errorf("finished_at after a restart = %s, want %s", str(t, again, "finished_at"), str(t, run, "finished_at"))
	}
}
