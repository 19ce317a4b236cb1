package server

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Judged rewards (seed 003) through the real server: HTTP door, embedded
// nats-server, and judge workers connected with nats.go and a key of the
// workspace.

const toneTask = `{"id": "acme/tone", "rubric": {"criteria": [
	{"id": "refund", "must": true, "check": {"type": "contains", "value": "refund"}},
	{"id": "tone", "check": {"judge": "tone"}}]}}`

const toneReward = `{"task": {"id": "acme/tone"}, "answer": "We will refund you."}`

// judgeWorker serves plaudit.judge.default.<subject> with reply after
// delay (no reply when it is ""); it counts the requests it gets.
type judgeWorker struct {
	nc    *nats.Conn
	asked atomic.Int32
}

func startJudge(t *testing.T, s *Server, subject string, delay time.Duration, reply func(n int32) string) *judgeWorker {
	t.Helper()
	nc, err := nats.Connect(s.NATSURL(), nats.Token(adminKey))
	if err != nil {
		t.Fatalf("judge worker connect: %v", err)
	}
	t.Cleanup(nc.Close)
	w := &judgeWorker{nc: nc}
	if _, err := nc.Subscribe("plaudit.judge.default."+subject, func(m *nats.Msg) {
		n := w.asked.Add(1)
		var req struct {
			Task      map[string]any `json:"task"`
			Criterion struct {
				ID string `json:"id"`
			} `json:"criterion"`
			Answer *string `json:"answer"`
		}
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Task == nil || req.Criterion.ID != "tone" || req.Answer == nil {
			t.Errorf("judge request %s: %v", m.Data, err)
		}
		time.Sleep(delay)
		if r := reply(n); r != "" { // "": no answer
			_ = m.Respond([]byte(r))
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return w
}

func always(s string) func(int32) string { return func(int32) string { return s } }

// TestJudgedRewardPendingThenScored: with a slow judge the reward is 202
// pending; GET with Prefer: wait gives it scored, and so does a later GET.
func TestJudgedRewardPendingThenScored(t *testing.T) {
	s := startServer(t, Config{JudgeDeadline: 5 * time.Second})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", toneTask)
	startJudge(t, s, "tone", 300*time.Millisecond, always(`{"met": true}`))
	r := c.request("POST", "/v1/rewards", toneReward, nil)
	if r.status != 202 || r.header.Get("Retry-After") == "" {
		t.Fatalf("POST: %d (Retry-After %q) %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	id := str(t, r.json(t), "id")
	if g := c.request("GET", "/v1/rewards/"+id, "", nil); g.status != 202 || g.header.Get("Retry-After") == "" {
		t.Fatalf("GET while pending: %d %s", g.status, g.body)
	}
	g := c.request("GET", "/v1/rewards/"+id, "", map[string]string{"Prefer": "wait=5"})
	if g.status != 200 {
		t.Fatalf("GET with Prefer: wait=5: %d %s", g.status, g.body)
	}
	rw := g.json(t)
	expect(t, rw, "scored", "status")
	expect(t, rw, 1.0, "scores", "reward")
	expect(t, rw, 1.0, "scores", "all_pass")
	expect(t, c.must(200, "GET", "/v1/rewards/"+id, ""), "scored", "status")
}

// TestJudgedRewardJudgeDownFails: with no judge worker the reward fails
// at the deadline (judge_error, retryable); the same answer later, with a
// worker up, is a new reward that scores.
func TestJudgedRewardJudgeDownFails(t *testing.T) {
	s := startServer(t, Config{JudgeDeadline: time.Second})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", toneTask)
	r := c.request("POST", "/v1/rewards", toneReward, map[string]string{"Prefer": "wait=10"})
	if r.status != 201 {
		t.Fatalf("POST with the judge down: %d %s", r.status, r.body)
	}
	failed := r.json(t)
	expect(t, failed, "failed", "status")
	expect(t, failed, nil, "scores")
	expect(t, failed, "judge_error", "failure", "reason")
	expect(t, failed, true, "failure", "retryable")

	startJudge(t, s, "tone", 0, always(`{"met": false}`))
	r = c.request("POST", "/v1/rewards", toneReward, map[string]string{"Prefer": "wait=10"})
	if r.status != 201 {
		t.Fatalf("POST again with a judge up: %d %s", r.status, r.body)
	}
	rw := r.json(t)
	if str(t, rw, "id") == str(t, failed, "id") {
		t.Fatal("a failed reward was reused")
	}
	expect(t, rw, "scored", "status")
	expect(t, rw, 0.5, "scores", "partial")
	expect(t, rw, 0.0, "scores", "all_pass")
}

// TestJudgedRewardTimedOutRequestIsAskedAgain: a judge request that gets
// no reply times out after a third of the deadline and is asked again (a
// hung worker beside a healthy one costs a retry, not the reward).
func TestJudgedRewardTimedOutRequestIsAskedAgain(t *testing.T) {
	s := startServer(t, Config{JudgeDeadline: 3 * time.Second})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", toneTask)
	w := startJudge(t, s, "tone", 0, func(n int32) string {
		if n == 1 {
			return "" // the first request is never answered
		}
		return `{"met": true}`
	})
	r := c.request("POST", "/v1/rewards", toneReward, map[string]string{"Prefer": "wait=10"})
	if r.status != 201 {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	rw := r.json(t)
	expect(t, rw, "scored", "status")
	expect(t, rw, 1.0, "scores", "reward")
	if n := w.asked.Load(); n != 2 {
		t.Errorf("the judge was asked %d times, want 2", n)
	}
}

// TestJudgedRewardUnscorable: a judge that keeps answering unscorable is
// asked 1 + 3 times, then the reward is scored 0 with the unscorable flag.
func TestJudgedRewardUnscorable(t *testing.T) {
	s := startServer(t, Config{JudgeDeadline: 10 * time.Second})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", toneTask)
	w := startJudge(t, s, "tone", 0, always(`{"unscorable": true}`))
	r := c.request("POST", "/v1/rewards", toneReward, map[string]string{"Prefer": "wait=10"})
	if r.status != 201 {
		t.Fatalf("POST: %d %s", r.status, r.body)
	}
	rw := r.json(t)
	expect(t, rw, "scored", "status")
	expect(t, rw, 0.0, "scores", "reward")
	expect(t, rw, 0.0, "scores", "partial")
	if f := list(t, rw, "flags"); len(f) != 1 || f[0] != "unscorable" {
		t.Errorf("flags %v, want [unscorable]", f)
	}
	if n := w.asked.Load(); n != 4 {
		t.Errorf("the judge was asked %d times, want 4", n)
	}
}

// TestJudgedRewardJudgeVersionSubject: j2 maps tone to tone-v2; a reward
// under j2 is judged by tone-v2's worker only, one under j1 by tone's.
func TestJudgedRewardJudgeVersionSubject(t *testing.T) {
	s := startServer(t, Config{JudgeDeadline: 5 * time.Second})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", toneTask)
	c.must(201, "PUT", "/v1/judge-versions/j2", `{"judges": {"tone": "tone-v2"}}`)
	v1 := startJudge(t, s, "tone", 0, always(`{"met": false}`))
	v2 := startJudge(t, s, "tone-v2", 0, always(`{"met": true}`))
	r := c.request("POST", "/v1/rewards", `{"task": {"id": "acme/tone"}, "answer": "refund", "judge_version": "j2"}`, map[string]string{"Prefer": "wait=10"})
	if r.status != 201 {
		t.Fatalf("POST under j2: %d %s", r.status, r.body)
	}
	expect(t, r.json(t), 1.0, "scores", "all_pass")
	if v1.asked.Load() != 0 || v2.asked.Load() != 1 {
		t.Fatalf("tone asked %d, tone-v2 asked %d; want 0 and 1", v1.asked.Load(), v2.asked.Load())
	}
	r = c.request("POST", "/v1/rewards", `{"task": {"id": "acme/tone"}, "answer": "refund", "judge_version": "j1"}`, map[string]string{"Prefer": "wait=10"})
	expect(t, r.json(t), 0.0, "scores", "all_pass")
	if v1.asked.Load() != 1 || v2.asked.Load() != 1 {
		t.Fatalf("tone asked %d, tone-v2 asked %d; want 1 and 1", v1.asked.Load(), v2.asked.Load())
	}
}

// TestJudgedRewardSurvivesRestart: a reward pending when the server closes
// stays pending on disk and is scored after a start on the same data
// directory, once a worker is up.
func TestJudgedRewardSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, Config{DataDir: dir, JudgeDeadline: 30 * time.Second})
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", toneTask)
	r := c.request("POST", "/v1/rewards", toneReward, nil)
	if r.status != 202 {
		t.Fatalf("POST with no judge: %d %s", r.status, r.body)
	}
	id := str(t, r.json(t), "id")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = startServer(t, Config{DataDir: dir, JudgeDeadline: 30 * time.Second})
	c = newClient(t, s, adminKey)
	if g := c.request("GET", "/v1/rewards/"+id, "", nil); g.status != 202 {
		t.Fatalf("GET after the restart, no judge yet: %d %s", g.status, g.body)
	}
	startJudge(t, s, "tone", 0, always(`{"met": true}`))
	g := c.request("GET", "/v1/rewards/"+id, "", map[string]string{"Prefer": "wait=10"})
	if g.status != 200 {
		t.Fatalf("GET after the restart with a judge: %d %s", g.status, g.body)
	}
	expect(t, g.json(t), 1.0, "scores", "reward")
}

// TestJudgedRewardNewAnswerIsLookedUpInTheKeyFilter: the lookup of an
// answer never judged is answered by the store's key filter, not Pebble;
// the same answer again is found and answered with its first reward.
func TestJudgedRewardNewAnswerIsLookedUpInTheKeyFilter(t *testing.T) {
	s := startServer(t, Config{})
	base := "http://" + s.HTTPAddr()
	c := newClient(t, s, adminKey)
	c.must(201, "POST", "/v1/tasks", `{"id": "acme/refund", "rubric": {"criteria": [
		{"id": "refund", "must": true, "check": {"type": "contains", "value": "refund"}}]}}`)
	deadline := time.Now().Add(10 * time.Second)
	for scrape(t, base).value("plaudit_store_key_filter_bytes") <= 0 { // built after the start
		if time.Now().After(deadline) {
			t.Fatal("the key filter was not built")
		}
		time.Sleep(20 * time.Millisecond)
	}
	reward := `{"task": {"id": "acme/refund"}, "answer": "We will refund you."}`
	before := scrape(t, base).value("plaudit_store_key_filter_absent_total")
	first := str(t, c.must(201, "POST", "/v1/rewards", reward), "id")
	if got := scrape(t, base).value("plaudit_store_key_filter_absent_total") - before; got != 1 {
		t.Fatalf("a new answer's lookup: the filter answered %v lookups, want 1", got)
	}
	if again := str(t, c.must(200, "POST", "/v1/rewards", reward), "id"); again != first {
		t.Fatalf("the same answer again: reward %s, want the first, %s", again, first)
	}
}
