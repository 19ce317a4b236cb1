package api_test

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

// history is what populate wrote, for the reads and dedup checks after a restart.
type history struct {
	agents   []string          // agent ids
	runs     map[string]string // run id → agent id
	versions map[string]int    // agent id → objective versions put
	firstRun string            // alpha's first run
	// sessionRun is the run of session s1 that finished last; claimers
	// are the runs that claimed zendesk.ticket/42, in claim order.
	sessionRun string
	claimers   []string
	dedup      []dedupPost // every signal posted with a dedup_key
	wsKey      string      // a key of a second workspace
	extPath    string      // a path naming a run by external_id
}

type dedupPost struct {
	agent, body, id string
}

// populate writes every kind of record through the service: two agents
// (one with external_id and labels), runs with versions, sessions and
// external ids, claims, traces, run/object/session signals with dedup keys
// (the same keys on both agents, since dedup is agent-scoped), finishes and
// two objective versions, plus a workspace and its key. between runs after
// every write.
func populate(t *testing.T, c *client, clk *clock, between func()) *history {
	t.Helper()
	h := &history{runs: map[string]string{}, versions: map[string]int{}}
	post := func(want int, path, body string) map[string]any {
		t.Helper()
		m := c.must(want, "POST", path, body)
		clk.Advance(time.Second)
		between()
		return m
	}
	signal := func(agent, body string) {
		t.Helper()
		m := post(201, "/api/v1/agents/"+agent+"/signals", body)
		h.dedup = append(h.dedup, dedupPost{agent: agent, body: body, id: str(t, m, "id")})
	}

	ws := str(t, post(201, "/v1/workspaces", `{"name": "tenant-b"}`), "id")
	h.wsKey = str(t, post(201, "/v1/workspaces/"+ws+"/api-keys", `{"name": "ci"}`), "key")

	a := str(t, post(201, "/api/v1/agents", `{"name": "alpha", "external_id": "alpha-ext", "labels": {"team": "support"}}`), "id")
	b := str(t, post(201, "/api/v1/agents", `{"name": "beta"}`), "id")
	h.agents = []string{a, b}
	run := func(agent, body string) string {
		t.Helper()
		id := str(t, post(201, "/api/v1/agents/"+agent+"/runs", body), "id")
		h.runs[id] = agent
		return id
	}
	r1 := run(a, `{"version": "3", "session_id": "s1", "external_id": "job-1", "labels": {"k": "v"}}`)
	r2 := run(a, `{"version": "3", "session_id": "s1"}`)
	r3 := run(a, `{"version": "4"}`)
	rb := run(b, `{"version": "3"}`)
	h.firstRun, h.sessionRun, h.claimers = r1, r2, []string{r1, r2}
	h.extPath = "/api/v1/agents/external_id:alpha-ext/runs/external_id:job-1"

	ra := "/api/v1/agents/" + a + "/runs/"
	post(201, ra+r1+"/claims", `{"object": "zendesk.ticket/42"}`)
	post(201, ra+r2+"/claims", `{"object": "zendesk.ticket/42"}`)
	post(201, ra+r2+"/claims", `{"object": "jira.issue/1"}`)
	post(201, ra+r1+"/traces", `{"trace_id": "tr-1"}`)
	post(201, ra+r1+"/traces", `{"trace_id": "tr-2", "turn_id": "turn-1"}`)

	signal(a, fmt.Sprintf(`{"kind": "human.rating", "value": 4, "run_id": %q, "dedup_key": "d1"}`, r1))
	signal(a, fmt.Sprintf(`{"kind": "human.rating", "value": 2, "run_id": %q, "dedup_key": "d2", "occurred_at": "2026-01-10T11:00:00Z"}`, r2))
	signal(a, fmt.Sprintf(`{"kind": "cost.usd", "value": 0.125, "run_id": %q, "dedup_key": "d3"}`, r3))
	signal(b, fmt.Sprintf(`{"kind": "human.rating", "value": 0.3, "run_id": %q, "dedup_key": "d1"}`, rb))
	post(201, "/api/v1/agents/"+a+"/signals", `{"kind": "external.ticket_closed", "value": 1, "object": "zendesk.ticket/42"}`)

	post(200, ra+r1+"/finish", `{"succeeded": true}`)
	// r1 finished at the clock (12:00:17), r2 later by its own finished_at.
	post(200, ra+r2+"/finish", `{"succeeded": false, "finished_at": "2026-01-10T12:05:00Z"}`)
	post(200, "/api/v1/agents/"+b+"/runs/"+rb+"/finish", `{"succeeded": true}`)
	signal(a, `{"kind": "human.approval", "value": 1, "session_id": "s1", "dedup_key": "d4"}`)
	signal(a, `{"kind": "human.approval", "value": 0, "object": "jira.issue/1", "dedup_key": "d5"}`)

	put := func(agent, body string) {
		t.Helper()
		c.putObjective(agent, body)
		h.versions[agent]++
		clk.Advance(time.Second)
		between()
	}
	put(a, seedObjective)
	put(a, `{"definition": {"horizon_s": 3600, "default": 0.25, "terms": [{"signal": "human.rating", "weight": 1, "scale": [1, 5], "agg": "mean"}, {"signal": "cost.usd", "weight": -0.5, "evidence": false}], "bounds": [-1, 1]}, "note": "v2"}`)
	put(b, seedObjective)
	return h
}

// reads is every GET that shows what populate wrote, by path, under the
// admin key; paths under /v1/workspaces use the second workspace's key.
func reads(t *testing.T, c *client, h *history) map[string]string {
	t.Helper()
	out := map[string]string{}
	get := func(path string) { out[path] = c.raw(path) }
	get("/api/v1/agents")
	get("/v1/workspaces")
	out["tenant-b /v1/workspaces"] = c.as(h.wsKey).raw("/v1/workspaces")
	get(h.extPath)
	get("/api/v1/agents/external_id:alpha-ext")
	for _, a := range h.agents {
		p := "/api/v1/agents/" + a
		get(p)
		get(p + "/objective")
		for v := 1; v <= h.versions[a]; v++ {
			get(fmt.Sprintf("%s/objective/versions/%d", p, v))
		}
		for _, ver := range []string{"3", "4"} {
			get(p + "/versions/" + ver + "/rewards")
			get(p + "/versions/" + ver + "/rewards?objective_version=0")
		}
	}
	for r, a := range h.runs {
		p := "/api/v1/agents/" + a + "/runs/" + r
		get(p)
		get(p + "/signals")
		get(p + "/reward")
		get(p + "/reward?objective_version=0")
		get(p + "/reward?objective_version=1")
	}
	return out
}

func sameReads(t *testing.T, when string, before, after map[string]string) {
	t.Helper()
	paths := make([]string, 0, len(before))
	for p := range before {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if before[p] != after[p] {
			t.Errorf("%s: GET %s changed:\nbefore %s\nafter  %s", when, p, before[p], after[p])
		}
	}
}

// checkDedup re-posts every dedup-keyed signal: each must answer 200 with
// the original signal and "duplicate": true.
func checkDedup(t *testing.T, c *client, posts []dedupPost) {
	t.Helper()
	for _, d := range posts {
		res := c.request("POST", "/api/v1/agents/"+d.agent+"/signals", d.body, nil)
		if res.status != 200 {
			t.Errorf("re-post %s: status %d, want 200; %s", d.body, res.status, res.body)
			continue
		}
		m := res.json(t)
		expect(t, m, true, "duplicate")
		expect(t, m, d.id, "id")
	}
}

// TestRestartReadsBackIdentically: after a graceful close and a reopen of
// the service, the actors and the store on the same directory, every record reads back byte for byte, repeated
// dedup keys still answer duplicate, and writes continue where they left
// off (checked by a second restart). It runs with the log alone, with
// snapshots every 3 events (recovery = snapshot + tail), and with actors
// passivating after 50ms idle between every write and read.
func TestRestartReadsBackIdentically(t *testing.T) {
	never := 1000 * time.Hour
	cases := []struct {
		name string
		cfg  config
		// snapshot: the first restart must recover agent alpha from a
		// snapshot plus a non-empty tail (true) or from the log alone (false).
		snapshot  bool
		passivate bool
	}{
		{name: "log only", cfg: config{SnapshotEvery: 1 << 30, SnapshotInterval: never}},
		{name: "snapshot every 3 events", cfg: config{SnapshotEvery: 3, SnapshotInterval: never}, snapshot: true},
		{name: "actors passivate after 50ms", cfg: config{SnapshotEvery: 1 << 30, SnapshotInterval: never,
			IdleTimeout: 50 * time.Millisecond}, passivate: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newHarness(t, tc.cfg)
			clk, c := s.clk, s.client(adminKey)
			between := func() {}
			if tc.passivate {
				between = func() { t.Helper(); waitPassivated(t, s) }
			}
			h := populate(t, c, clk, between)
			if tc.snapshot {
				ensureTail(t, s, c, clk, h)
			}
			before := reads(t, c, h)
			if tc.passivate {
				// The same reads while every actor recovers from disk again.
				waitPassivated(t, s)
				sameReads(t, "after passivation", before, reads(t, c, h))
			}

			s.restart()
			rec, err := s.store.Load(h.agents[0])
			if err != nil {
				t.Fatalf("Load(%s): %v", h.agents[0], err)
			}
			switch {
			case tc.snapshot && (rec.SnapshotSeq == 0 || rec.LastSeq == rec.SnapshotSeq):
				t.Fatalf("precondition: want recovery from snapshot + tail, store has snapshot seq %d, last seq %d",
					rec.SnapshotSeq, rec.LastSeq)
			case !tc.snapshot && !tc.passivate && rec.SnapshotSeq != 0:
				t.Fatalf("precondition: want recovery from the log alone, store has snapshot seq %d", rec.SnapshotSeq)
			}
			c = s.client(adminKey)
			sameReads(t, "after restart", before, reads(t, c, h))
			checkDedup(t, c, h.dedup)

			// Writes after recovery resolve subjects from the recovered
			// indexes and continue the log: a run signal, a session signal,
			// an object signal, a third objective version, then one more restart.
			a := h.agents[0]
			body := fmt.Sprintf(`{"kind": "human.rating", "value": 5, "run_id": %q, "dedup_key": "after-restart"}`, h.firstRun)
			m := c.must(201, "POST", "/api/v1/agents/"+a+"/signals", body)
			h.dedup = append(h.dedup, dedupPost{agent: a, body: body, id: str(t, m, "id")})
			m = c.must(201, "POST", "/api/v1/agents/"+a+"/signals", `{"kind": "human.rating", "value": 3, "session_id": "s1"}`)
			if ids := list(t, m, "run_ids"); len(ids) != 1 || ids[0] != h.sessionRun {
				t.Errorf("session s1 signal after restart went to %v, want [%s] (latest finished)", ids, h.sessionRun)
			}
			m = c.must(201, "POST", "/api/v1/agents/"+a+"/signals", `{"kind": "external.ticket_closed", "value": 0, "object": "zendesk.ticket/42"}`)
			if ids := list(t, m, "run_ids"); fmt.Sprint(ids) != fmt.Sprint(h.claimers) {
				t.Errorf("object signal after restart reached %v, want %v", ids, h.claimers)
			}
			expect(t, c.putObjective(a, seedObjective), 3.0, "version")
			h.versions[a]++
			if tc.passivate {
				waitPassivated(t, s)
			}
			before = reads(t, c, h)

			s.restart()
			c = s.client(adminKey)
			sameReads(t, "after second restart", before, reads(t, c, h))
			checkDedup(t, c, h.dedup)
		})
	}
}

// ensureTail makes agent's log end with events after its latest snapshot,
// so that recovery reads both: while the stored snapshot covers every
// event, it registers one more trace (a single event, below SnapshotEvery).
func ensureTail(t *testing.T, s *harness, c *client, clk *clock, h *history) {
	t.Helper()
	agent, run := h.agents[0], ""
	for i := 0; i < 5; i++ {
		time.Sleep(50 * time.Millisecond) // let an in-flight snapshot land
		rec, err := s.store.Load(agent)
		if err != nil {
			t.Fatalf("Load(%s): %v", agent, err)
		}
		if rec.SnapshotSeq > 0 && rec.LastSeq > rec.SnapshotSeq {
			return
		}
		if run == "" {
			run = str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"version": "9"}`), "id")
			h.runs[run] = agent
		}
		c.must(201, "POST", "/api/v1/agents/"+agent+"/runs/"+run+"/traces", fmt.Sprintf(`{"trace_id": "tail-%d"}`, i))
		clk.Advance(time.Second)
	}
	t.Fatalf("precondition: agent %s never had a snapshot and a tail (SnapshotEvery %d)", agent, s.cfg.SnapshotEvery)
}
