package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestKill9ResumesPendingJudgedReward: a judged reward (seed 003) that is
// pending when the process is SIGKILLed (its model judge had no worker) is
// on disk; after a restart on the same data directory it is resumed, and
// once a judge worker connects it is scored, and listed as scored evidence
// on its episode.
func TestKill9ResumesPendingJudgedReward(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills it; skipped with -short")
	}
	built := time.Now()
	bin := buildPlaudit(t)
	t.Logf("built in %v", time.Since(built).Round(time.Millisecond))
	data := t.TempDir()
	hc := &http.Client{Timeout: 20 * time.Second}
	defer hc.CloseIdleConnections()

	srv := startPlaudit(t, bin, data, "judged-first")
	api := &kclient{t: t, hc: hc, base: srv.base}
	api.must(201, "POST", "/v1/tasks", `{"id": "acme/tone", "rubric": {"criteria": [
		{"id": "refund", "must": true, "check": {"type": "contains", "value": "refund"}},
		{"id": "tone", "check": {"judge": "tone"}}]}}`)
	agent := api.id(api.must(201, "POST", "/api/v1/agents", `{"name": "judged"}`))
	run := api.id(api.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"external_id": "ep-1"}`))
	status, body := send(t, hc, srv.base, "POST", "/v1/rewards",
		`{"task": {"id": "acme/tone"}, "answer": "A refund is on its way.", "episode_id": "external_id:ep-1"}`, nil)
	if status != 202 || body["status"] != "pending" {
		t.Fatalf("POST /v1/rewards with no judge worker: %d %v", status, body)
	}
	id, _ := body["id"].(string)
	srv.kill(t)

	srv = startPlaudit(t, bin, data, "judged-second")
	api = &kclient{t: t, hc: hc, base: srv.base}
	if status, body := send(t, hc, srv.base, "GET", "/v1/rewards/"+id, "", nil); status != 202 || body["status"] != "pending" {
		t.Fatalf("GET after the restart, no judge worker yet: %d %v", status, body)
	}
	nc, err := nats.Connect(srv.nats, nats.Token(killTestKey))
	if err != nil {
		t.Fatalf("judge worker connect: %v", err)
	}
	defer nc.Close()
	if _, err := nc.Subscribe("plaudit.judge.default.tone", func(m *nats.Msg) { _ = m.Respond([]byte(`{"met": true}`)) }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	status, body = send(t, hc, srv.base, "GET", "/v1/rewards/"+id, "", map[string]string{"Prefer": "wait=10"})
	if status != 200 || body["status"] != "scored" {
		t.Fatalf("GET with Prefer: wait=10 and a judge worker: %d %v", status, body)
	}
	if scores, _ := body["scores"].(map[string]any); scores["reward"] != 1.0 || scores["all_pass"] != 1.0 {
		t.Fatalf("scores %v, want reward and all_pass 1", body["scores"])
	}
	t.Logf("scored %v after the worker connected", time.Since(start).Round(time.Millisecond))

	// The episode lists it as scored evidence.
	var ev struct {
		Items []struct {
			ID, Kind string
			Value    *float64
		}
	}
	if err := json.Unmarshal(api.mustRaw(200, "GET", "/v1/jobs/"+run+"/rewards", ""), &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Items) != 1 || ev.Items[0].ID != id || ev.Items[0].Kind != "model_judge" || ev.Items[0].Value == nil || *ev.Items[0].Value != 1 {
		t.Fatalf("evidence of the episode %+v, want the scored reward %s", ev.Items, id)
	}
}

// send makes one request as the bootstrap key and decodes the JSON answer.
func send(t *testing.T, hc *http.Client, base, method, path, body string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+killTestKey)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: %d answer is not JSON: %s", method, path, resp.StatusCode, b)
	}
	return resp.StatusCode, m
}
