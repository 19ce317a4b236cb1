package api_test

import (
	"strings"
	"testing"
)

// calibrationItem checks one item of GET /v1/tasks/{id}/calibration.
func calibrationItem(t *testing.T, item any, tv, jv string, pairs, agreement float64, kappa any, mae float64, tp, tn, fp, fn float64) {
	t.Helper()
	expect(t, item, tv, "task_version")
	expect(t, item, jv, "judge_version")
	expect(t, item, pairs, "pairs")
	expect(t, item, agreement, "agreement")
	if kappa == nil {
		expect(t, item, nil, "kappa")
	} else {
		expect(t, item, kappa, "kappa")
	}
	expect(t, item, mae, "mae")
	expect(t, item, tp, "confusion", "tp")
	expect(t, item, tn, "confusion", "tn")
	expect(t, item, fp, "confusion", "fp")
	expect(t, item, fn, "confusion", "fn")
	if n := len(item.(map[string]any)); n != 7 {
		t.Errorf("item has %d fields, want 7: %v", n, item)
	}
}

// TestCalibration: a job with a scored judged reward (episode_id) and a
// review report is a pair; pairs are grouped by task version and judge
// version, and each group's agreement, κ, MAE and confusion counts are the
// hand-computed ones. builtinTask (weights: refund 2 must, short ≤ 40
// chars 1, polite "thanks" 1) scores every answer in the request.
func TestCalibration(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	tv1 := str(t, c.must(201, "POST", "/v1/tasks", builtinTask), "version")
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "bot"}`), "id")
	job := func(ext string) string {
		return str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"external_id": "`+ext+`"}`), "id")
	}
	judged := func(run, answer, extra string, want float64) {
		t.Helper()
		e := `"episode_id": "` + run + `"`
		if extra != "" {
			e += ", " + extra
		}
		rw := c.must(201, "POST", "/v1/rewards", reward(`{"id": "acme/refund"}`, answer, e))
		expect(t, rw, want, "scores", "reward")
	}
	review := func(run, body string) { t.Helper(); c.must(201, "POST", "/v1/jobs/"+run+"/rewards", body) }

	jobs := map[string]string{}
	for _, ext := range []string{"job1", "job2", "job3", "job4", "job5", "job6", "job7"} {
		jobs[ext] = job(ext)
	}
	// Under j1 (the task's first reward pins tv1 and j1):
	// job1: 0 first, then (later) 1: the latest scored counts. Review 1.  TP, |1−1| = 0
	judged(jobs["job1"], "Thanks, no money back.", "", 0)
	h.clk.Advance(1e9)
	judged(jobs["job1"], "Thanks, refund sent.", "", 1)
	review(jobs["job1"], `{"kind": "review", "value": 1}`)
	// job2: 0.75 (refund, short); review 0.                            FP, 0.75
	judged(jobs["job2"], "We will refund you.", "", 0.75)
	review(jobs["job2"], `{"kind": "review", "value": 0}`)
	// job3: 0 (no refund); review 0; an external report "ci.tests" = 1
	// is no review.                                                     TN, 0
	judged(jobs["job3"], "Thanks, money is on its way.", "", 0)
	review(jobs["job3"], `{"kind": "review", "value": 0}`)
	review(jobs["job3"], `{"scorer": "ci.tests", "value": 1}`)
	// job4: 0.5 (refund only, too long); reviews 0 on turn a and 0.5 on
	// turn b, after 1 on turn a was replaced by 0: the mean of the standing
	// ones is 0.25, a fail.                                             FP, 0.25
	judged(jobs["job4"], "No refund, sorry, and we will not discuss it further.", "", 0.5)
	review(jobs["job4"], `{"kind": "review", "value": 1, "turn_id": "a"}`)
	review(jobs["job4"], `{"kind": "review", "value": 0, "turn_id": "a"}`)
	review(jobs["job4"], `{"value": {"kind": "review", "value": 0.5, "turn_id": "b"}}`)
	// job5: 0 (no refund); review 1.                                    FN, 1
	judged(jobs["job5"], "Thanks, it is done.", "", 0)
	review(jobs["job5"], `{"kind": "review", "value": 1}`)
	// job6: a reward, no review; job7: a review, no reward; and a reward
	// with no episode: none is a pair.
	judged(jobs["job6"], "refund", "", 0.75)
	review(jobs["job7"], `{"kind": "review", "value": 1}`)
	c.must(201, "POST", "/v1/rewards", reward(`{"id": "acme/refund"}`, "refund, thanks", ""))
	// (tv1, j1): TP 1, TN 1, FP 2, FN 1, n 5. agreement 2/5 = 0.4.
	// judge pass 3, fail 2; review pass 2, fail 3: S = 3·2 + 2·3 = 12,
	// κ = (5·2 − 12)/(25 − 12) = −2/13. MAE = (0 + 0.75 + 0 + 0.25 + 1)/5 = 0.4.

	// Under j2: job1 1 (review 1, TP), job2 0.75 (review 0, FP). n 2,
	// agreement 0.5; judge pass 2, fail 0; review pass 1, fail 1:
	// S = 2·1 + 0 = 2, κ = (2·1 − 2)/(4 − 2) = 0. MAE = (0 + 0.75)/2 = 0.375.
	c.must(201, "PUT", "/v1/judge-versions/j2", `{"judges": {}}`)
	judged(jobs["job1"], "Thanks, refund sent.", `"judge_version": "j2"`, 1)
	judged(jobs["job2"], "We will refund you.", `"judge_version": "j2"`, 0.75)

	// A second task version, j1: job1 only, 1 against 1. Every label a
	// pass: κ undefined (null); agreement 1, MAE 0.
	tv2 := str(t, c.must(201, "POST", "/v1/tasks", strings.Replace(builtinTask, `"weight": 2`, `"weight": 3`, 1)), "version")
	rw := c.must(201, "POST", "/v1/rewards", reward(`{"id": "acme/refund", "version": "`+tv2+`"}`, "Thanks, refund sent.",
		`"episode_id": "external_id:job1"`))
	expect(t, rw, tv2, "task", "version")
	expect(t, rw, 1.0, "scores", "reward")

	check := func(c *client) {
		t.Helper()
		cal := c.must(200, "GET", "/v1/tasks/acme/refund/calibration", "")
		expect(t, cal, "acme/refund", "task")
		items := list(t, cal, "items")
		if len(items) != 3 {
			t.Fatalf("items %v, want 3 groups", items)
		}
		calibrationItem(t, items[0], tv1, "j1", 5, 0.4, -2.0/13, 0.4, 1, 1, 2, 1)
		calibrationItem(t, items[1], tv1, "j2", 2, 0.5, 0.0, 0.375, 1, 0, 1, 0)
		calibrationItem(t, items[2], tv2, "j1", 1, 1, nil, 0, 1, 0, 0, 0)

		// judge_version keeps that judge version's groups.
		items = list(t, c.must(200, "GET", "/v1/tasks/acme/refund/calibration?judge_version=j2", ""), "items")
		if len(items) != 1 {
			t.Fatalf("j2: items %v", items)
		}
		calibrationItem(t, items[0], tv1, "j2", 2, 0.5, 0.0, 0.375, 1, 0, 1, 0)
		items = list(t, c.must(200, "GET", "/v1/tasks/acme/refund/calibration?judge_version=j1", ""), "items")
		if len(items) != 2 || str(t, items[0], "task_version") != tv1 || str(t, items[1], "task_version") != tv2 {
			t.Fatalf("j1: items %v", items)
		}
	}
	check(c)

	// A judge version with no pairs lists none; an unknown one is 404.
	c.must(201, "PUT", "/v1/judge-versions/j3", `{"judges": {}}`)
	if items := list(t, c.must(200, "GET", "/v1/tasks/acme/refund/calibration?judge_version=j3", ""), "items"); len(items) != 0 {
		t.Errorf("j3: items %v", items)
	}
	apiError(t, c.request("GET", "/v1/tasks/acme/refund/calibration?judge_version=j9", "", nil), 404, "not_found", "j9")

	// A task with rewards but no reviewed episode: 200, no items.
	c.must(201, "POST", "/v1/tasks", strings.Replace(builtinTask, "acme/refund", "acme/quiet", 1))
	c.must(201, "POST", "/v1/rewards", reward(`{"id": "acme/quiet"}`, "refund", `"episode_id": "`+jobs["job6"]+`"`))
	empty := c.must(200, "GET", "/v1/tasks/acme/quiet/calibration", "")
	expect(t, empty, "acme/quiet", "task")
	if items := list(t, empty, "items"); len(items) != 0 {
		t.Errorf("acme/quiet: items %v", items)
	}
	// An unknown task is 404; GET /v1/tasks/{id} still reads the task.
	apiError(t, c.request("GET", "/v1/tasks/acme/nope/calibration", "", nil), 404, "not_found", "acme/nope")
	c.must(200, "GET", "/v1/tasks/acme/refund", "")

	// Tenancy: another workspace sees no task of ours, cannot make our
	// runs its episodes, and its own pairs of the same task id stay its.
	ws := str(t, c.must(201, "POST", "/v1/workspaces", `{"name": "other"}`), "id")
	other := h.client(str(t, c.must(201, "POST", "/v1/workspaces/"+ws+"/api-keys", `{"name": "k"}`), "key"))
	apiError(t, other.request("GET", "/v1/tasks/acme/refund/calibration", "", nil), 404, "not_found", "acme/refund")
	otherTV := str(t, other.must(201, "POST", "/v1/tasks", builtinTask), "version")
	apiError(t, other.request("POST", "/v1/rewards", reward(`{"id": "acme/refund"}`, "refund", `"episode_id": "`+jobs["job1"]+`"`), nil),
		404, "not_found", jobs["job1"])
	oa := str(t, other.must(201, "POST", "/api/v1/agents", `{"name": "bot"}`), "id")
	orun := str(t, other.must(201, "POST", "/api/v1/agents/"+oa+"/runs", `{}`), "id")
	other.must(201, "POST", "/v1/rewards", reward(`{"id": "acme/refund"}`, "Thanks, refund sent.", `"episode_id": "`+orun+`"`))
	other.must(201, "POST", "/v1/jobs/"+orun+"/rewards", `{"kind": "review", "value": 0}`)
	items := list(t, other.must(200, "GET", "/v1/tasks/acme/refund/calibration", ""), "items")
	if len(items) != 1 {
		t.Fatalf("other workspace: items %v", items)
	}
	calibrationItem(t, items[0], otherTV, "j1", 1, 0, 0.0, 1, 0, 0, 1, 0)
	check(c)

	// Computed on read from durable records: the same after a restart.
	h.restart()
	check(h.client(adminKey))
}

// TestCalibrationCountsJobsLinkedByTheSameAnswer: the same answer sent
// with another job's episode_id links that job to the first reward (its
// evidence lists the reward, its episode gets the judge.* signals), so its
// review pairs with the reward's verdict too.
func TestCalibrationCountsJobsLinkedByTheSameAnswer(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	tv := str(t, c.must(201, "POST", "/v1/tasks", builtinTask), "version")
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "bot"}`), "id")
	first := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`), "id")
	linked := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`), "id")
	rw := c.must(201, "POST", "/v1/rewards", reward(`{"id": "acme/refund"}`, "We will refund you.", `"episode_id": "`+first+`"`))
	again := c.must(200, "POST", "/v1/rewards", reward(`{"id": "acme/refund"}`, "We will refund you.", `"episode_id": "`+linked+`"`))
	if str(t, again, "id") != str(t, rw, "id") {
		t.Fatalf("the same answer again: %v, want the first reward", again)
	}
	c.must(201, "POST", "/v1/jobs/"+first+"/rewards", `{"kind": "review", "value": 1}`)
	c.must(201, "POST", "/v1/jobs/"+linked+"/rewards", `{"kind": "review", "value": 0}`)
	// 0.75 against 1 (TP, 0.25) and against 0 (FP, 0.75): agreement 0.5;
	// judge pass 2, review pass 1 fail 1: κ = (2·1 − 2)/(4 − 2) = 0.
	items := list(t, c.must(200, "GET", "/v1/tasks/acme/refund/calibration", ""), "items")
	if len(items) != 1 {
		t.Fatalf("items %v, want one group", items)
	}
	calibrationItem(t, items[0], tv, "j1", 2, 0.5, 0.0, 0.5, 1, 0, 1, 0)
}
