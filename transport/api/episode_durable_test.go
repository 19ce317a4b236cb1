package api_test

import (
	"testing"
	"time"
)

// TestAJudgedRewardWaitsForItsEpisodeToBeDurable: a run is answered
// before it is durable, and a judged reward is stored outside the run's
// agent; so the reward is answered only once the run it names is durable,
// or a crash could keep the reward and lose its episode.
func TestAJudgedRewardWaitsForItsEpisodeToBeDurable(t *testing.T) {
	h := newHarness(t, config{SelectSyncWindow: time.Hour})
	c := h.client(adminKey)
	c.must(201, "POST", "/v1/tasks", `{"id": "acme/tone", "rubric": {"criteria": [{"id": "tone", "check": {"judge": "tone"}}]}}`)
	agent := c.must(201, "POST", "/api/v1/agents", `{"name": "judged"}`)["id"].(string)
	logged := func() uint64 {
		t.Helper()
		rec, err := h.store.Load(agent)
		if err != nil {
			t.Fatal(err)
		}
		return rec.LastSeq
	}
	before := logged()
	c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"external_id": "ep-1"}`)
	if logged() != before {
		t.Fatal("the run was logged before anything waited for it: this test shows nothing")
	}
	c.must(202, "POST", "/v1/rewards", `{"task": {"id": "acme/tone"}, "answer": "fine", "episode_id": "external_id:ep-1"}`)
	if logged() == before {
		t.Fatal("the judged reward was answered while its episode was not durable")
	}
}
