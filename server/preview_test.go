package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPreviewThroughBothDoors: one draft previewed over HTTP and over NATS
// gets the same answer, which is what publishing it and reading the
// version summary then gives; a bad draft is a 400 naming the field on
// both doors; the preview writes nothing.
func TestPreviewThroughBothDoors(t *testing.T) {
	clk := newClock()
	s := startServer(t, Config{Now: clk.Now})
	c := newClient(t, s, adminKey)
	nc := newNATSClient(t, s, adminKey)
	agent := c.must(201, "POST", "/api/v1/agents", `{"name": "preview"}`)["id"].(string)
	c.must(200, "PUT", "/api/v1/agents/"+agent+"/objective",
		`{"definition": {"horizon_s": 60, "terms": [{"signal": "human.rating", "weight": 1, "scale": [1, 5]}]}}`)
	for i := range 30 {
		run := c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"version": "7"}`)["id"].(string)
		c.must(201, "POST", "/api/v1/agents/"+agent+"/signals", fmt.Sprintf(`{"kind": "human.rating", "value": %d, "run_id": %q}`, 1+i%5, run))
		if i%3 == 0 {
			c.must(201, "POST", "/api/v1/agents/"+agent+"/signals", fmt.Sprintf(`{"kind": "csat", "value": %d, "run_id": %q}`, i%2, run))
		}
		c.must(200, "POST", "/api/v1/agents/"+agent+"/runs/"+run+"/finish", `{"succeeded": true}`)
	}
	clk.Advance(time.Hour)
	const draft = `{"horizon_s": 60, "terms": [{"signal": "human.rating", "weight": 1, "scale": [1, 5]}, {"signal": "csat", "weight": 3}]}`

	overHTTP := c.must(200, "POST", "/api/v1/agents/"+agent+"/objective/preview", `{"definition": `+draft+`, "version": "7", "limit": 5}`)
	overNATS := nc.must("plaudit.v1.default."+agent+".preview", `{"definition": `+draft+`, "version": "7", "limit": 5}`)
	h, n := jsonText(t, overHTTP), jsonText(t, overNATS)
	if h != n {
		t.Fatalf("the doors answer differently:\nHTTP %s\nNATS %s", h, n)
	}
	// The ten runs with a csat change, but for the two whose csat equals
	// their scaled rating (runs 0 and 9): (x + 3c)/4 = x.
	if moved := overHTTP["moved"].([]any); len(moved) != 5 || overHTTP["changed"].(float64) != 8 {
		t.Fatalf("changed %v, %d moved; want 8 and 5", overHTTP["changed"], len(moved))
	}
	if v := c.must(200, "GET", "/api/v1/agents/"+agent+"/objective", "")["version"]; v != 1.0 {
		t.Fatalf("the preview published version %v", v)
	}

	c.must(200, "PUT", "/api/v1/agents/"+agent+"/objective", `{"definition": `+draft+`}`)
	published := c.must(200, "GET", "/api/v1/agents/"+agent+"/versions/7/rewards?limit=5", "")
	if got, want := jsonText(t, overHTTP["draft"]), jsonText(t, published); got != want {
		t.Fatalf("draft summary:\n%s\nwant what publishing gives\n%s", got, want)
	}

	bad := `{"definition": {"terms": [{"signal": "csat", "weight": 1, "scale": [1, 1]}]}}`
	r := c.request("POST", "/api/v1/agents/"+agent+"/objective/preview", bad, nil)
	code, body := nc.do("plaudit.v1.default."+agent+".preview", bad)
	msgHTTP := r.json(t)["error"].(map[string]any)["message"].(string)
	msgNATS := body["error"].(map[string]any)["message"].(string)
	if r.status != 400 || code != "400" || !strings.HasPrefix(msgHTTP, "definition.terms[0].scale") || msgHTTP != msgNATS {
		t.Fatalf("bad draft: HTTP %d %q, NATS %s %q", r.status, msgHTTP, code, msgNATS)
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
