package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/plaudit/plaudit/persist"
)

// Judged rewards (seed 003) as evidence on their episode (seed 001's GET
// /v1/jobs/{id}/rewards), after the job's reports and feedback.

// TestEvidenceListsJudgedRewards: the job's judged rewards are listed after
// its reports and feedback, oldest first, in the report shape: kind check
// (built-ins only) or model_judge, scorer judge, value = the reward score
// (null while pending and when failed), weight 1, the task, versions,
// status and flags in detail_json. Another job's rewards are not listed.
func TestEvidenceListsJudgedRewards(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, config{JudgeDeadline: 2 * time.Second,
		Judge: func(ws, subject string, data []byte, timeout time.Duration) ([]byte, error) {
			if strings.Contains(string(data), `"answer":"no judge for me"`) {
				return []byte(`not json`), nil // never usable: the reward fails at its deadline
			}
			<-release
			return []byte(`{"met": true}`), nil
		}})
	c := h.client(adminKey)
	builtinTV := str(t, c.must(201, "POST", "/v1/tasks", builtinTask), "version")
	judgeTV := str(t, c.must(201, "POST", "/v1/tasks", judgeTask), "version")
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "evidence"}`), "id")
	job := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"external_id": "job-1"}`), "id")
	other := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"external_id": "job-2"}`), "id")

	// Rewards first: the listing orders by kind of evidence, not by time.
	h.clk.Advance(time.Second)
	check := c.must(201, "POST", "/v1/rewards", reward(`{"id": "acme/refund"}`, "We will refund you.", `"episode_id": "`+job+`"`))
	h.clk.Advance(time.Second)
	pending := c.request("POST", "/v1/rewards", reward(`{"id": "acme/tone"}`, "A refund, kindly.", `"episode_id": "external_id:job-1"`), nil)
	if pending.status != 202 {
		t.Fatalf("judged reward: %d %s", pending.status, pending.body)
	}
	h.clk.Advance(time.Second)
	c.must(201, "POST", "/v1/rewards", reward(`{"id": "acme/refund"}`, "refund", `"episode_id": "`+other+`"`))
	c.must(201, "POST", "/v1/rewards", reward(`{"id": "acme/refund"}`, "no episode refund", ""))
	h.clk.Advance(time.Second)
	rep := c.must(201, "POST", rewardsPath(job), `{"scorer": "grader", "value": 0.4}`)
	fb := c.must(200, "POST", "/v1/workspaces/default/objectives/"+job+"/feedback", `{"metadata": {}, "data": {"score": 0.5}}`)

	items := list(t, c.must(200, "GET", rewardsPath(job), ""), "items")
	if len(items) != 4 {
		t.Fatalf("%d items, want a report, a feedback and 2 judged rewards: %v", len(items), items)
	}
	expect(t, items[0], str(t, rep, "id"), "id")
	expect(t, items[1], str(t, fb, "metadata", "id"), "id")
	checkItem := items[2]
	expect(t, checkItem, str(t, check, "id"), "id")
	expect(t, checkItem, job, "job_id")
	expect(t, checkItem, "check", "kind")
	expect(t, checkItem, "judge", "scorer")
	expect(t, checkItem, 0.75, "value")
	expect(t, checkItem, 1.0, "weight")
	expect(t, checkItem, false, "gate")
	expect(t, checkItem, nil, "turn_id")
	expect(t, checkItem, nil, "trace_id")
	expect(t, checkItem, "acme/refund", "detail_json", "task_id")
	expect(t, checkItem, builtinTV, "detail_json", "task_version")
	expect(t, checkItem, "j1", "detail_json", "judge_version")
	expect(t, checkItem, "scored", "detail_json", "status")
	if f := list(t, checkItem, "detail_json", "flags"); len(f) != 0 {
		t.Errorf("flags %v, want []", f)
	}
	expect(t, checkItem, str(t, check, "created_at"), "created_at")
	expect(t, checkItem, str(t, check, "scored_at"), "updated_at")

	judged := items[3]
	expect(t, judged, str(t, pending.json(t), "id"), "id")
	expect(t, judged, job, "job_id")
	expect(t, judged, "model_judge", "kind")
	expect(t, judged, "judge", "scorer")
	expect(t, judged, nil, "value")
	expect(t, judged, 1.0, "weight")
	expect(t, judged, judgeTV, "detail_json", "task_version")
	expect(t, judged, "pending", "detail_json", "status")

	// Scored: its value is the reward.
	close(release)
	if g := c.request("GET", "/v1/rewards/"+str(t, judged, "id"), "", map[string]string{"Prefer": "wait=5"}); g.status != 200 {
		t.Fatalf("GET with Prefer: wait=5: %d %s", g.status, g.body)
	}
	items = list(t, c.must(200, "GET", rewardsPath("external_id:job-1"), ""), "items")
	expect(t, items[3], "scored", "detail_json", "status")
	expect(t, items[3], 1.0, "value")

	// Failed: listed with a null value and its failure.
	h.clk.Advance(time.Second)
	failed := c.request("POST", "/v1/rewards", reward(`{"id": "acme/tone"}`, "no judge for me", `"episode_id": "`+job+`"`), map[string]string{"Prefer": "wait=10"})
	if failed.status != 201 {
		t.Fatalf("failing reward: %d %s", failed.status, failed.body)
	}
	expect(t, failed.json(t), "failed", "status")
	items = list(t, c.must(200, "GET", rewardsPath(job), ""), "items")
	if len(items) != 5 {
		t.Fatalf("%d items, want 5: %v", len(items), items)
	}
	expect(t, items[4], str(t, failed.json(t), "id"), "id")
	expect(t, items[4], "model_judge", "kind")
	expect(t, items[4], nil, "value")
	expect(t, items[4], "failed", "detail_json", "status")
	expect(t, items[4], "judge_error", "detail_json", "failure")

	// The other job lists its own reward only.
	otherItems := list(t, c.must(200, "GET", rewardsPath(other), ""), "items")
	if len(otherItems) != 1 || str(t, otherItems[0], "kind") != "check" || str(t, otherItems[0], "job_id") != other {
		t.Fatalf("other job's evidence %v, want its one check reward", otherItems)
	}
}

// TestEvidenceIndexesOlderRewards: rewards stored before the episode index
// existed (no judging/episode/ entries, no completion marker) are indexed
// at the next start and listed on their job.
func TestEvidenceIndexesOlderRewards(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	c.must(201, "POST", "/v1/tasks", builtinTask)
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "old"}`), "id")
	job := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`), "id")
	rw := str(t, c.must(201, "POST", "/v1/rewards", reward(`{"id": "acme/refund"}`, "refund", `"episode_id": "`+job+`"`)), "id")
	before := c.must(200, "GET", rewardsPath(job), "")
	if items := list(t, before, "items"); len(items) != 1 {
		t.Fatalf("evidence %v, want the reward", items)
	}

	// Make the store look like one written before the index.
	indexKey := []byte("judging/episode/default/" + job + "/" + rw)
	marker := []byte("judging/meta/episode-index")
	for _, k := range [][]byte{indexKey, marker} {
		if _, err := h.store.Get(k); err != nil {
			t.Fatalf("key %s: %v", k, err)
		}
	}
	if err := h.store.Put(persist.KV{Key: indexKey}, persist.KV{Key: marker}); err != nil {
		t.Fatal(err)
	}
	if items := list(t, c.must(200, "GET", rewardsPath(job), ""), "items"); len(items) != 0 {
		t.Fatalf("without its index entry the reward is still listed: %v", items)
	}

	h.restart()
	c = h.client(adminKey)
	after := c.must(200, "GET", rewardsPath(job), "")
	if string(mustJSON(t, after)) != string(mustJSON(t, before)) {
		t.Fatalf("after the restart: %v\nwant %v", after, before)
	}
	if _, err := h.store.Get(marker); err != nil {
		t.Fatalf("the index is not marked complete: %v", err)
	}
}
