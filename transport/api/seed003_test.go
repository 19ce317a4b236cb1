package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// The seed-003 example task: an id with a slash, one must criterion, one
// model judge.
const exampleTask = `{"id": "aicme/example-001", "prompt": "Summarise the ticket.",
	"rubric": {"criteria": [
		{"id": "mentions-refund", "must": true, "weight": 2, "check": {"type": "contains", "value": "refund"}},
		{"id": "short", "check": {"type": "max_chars", "value": 400}},
		{"id": "tone", "check": {"judge": "tone"}}]},
	"soft_cap_chars": 2000}`

// TestSeed003TaskVersions: a task's version is named by its content, the
// same content (however written) is the same version (200), new content a
// new one (201); the task lists its versions oldest first, the newest
// current, and each reads back by id and version.
func TestSeed003TaskVersions(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	first := c.must(201, "POST", "/v1/tasks", exampleTask)
	tv1 := str(t, first, "version")
	if !strings.HasPrefix(tv1, "tv_") || len(tv1) != 3+16 {
		t.Fatalf("version %q is not tv_ + 16 hex", tv1)
	}
	expect(t, first, "aicme/example-001", "id")
	expect(t, first, 1.0, "seq")
	expect(t, first, 1.0, "task", "rubric", "criteria", 1, "weight") // the default, filled in

	// The same content, keys reordered and defaults spelled out: the same version.
	same := `{"soft_cap_chars": 2000, "rubric": {"criteria": [
		{"check": {"value": "refund", "type": "contains"}, "weight": 2, "must": true, "id": "mentions-refund"},
		{"id": "short", "must": false, "weight": 1, "check": {"type": "max_chars", "value": 400}},
		{"id": "tone", "check": {"judge": "tone"}}]}, "prompt": "Summarise the ticket.", "id": "aicme/example-001"}`
	if again := c.must(200, "POST", "/v1/tasks", same); str(t, again, "version") != tv1 || num(t, again, "seq") != 1 {
		t.Fatalf("the same content answered %v", again)
	}
	h.clk.Advance(1)
	second := c.must(201, "POST", "/v1/tasks", strings.Replace(exampleTask, `"weight": 2`, `"weight": 3`, 1))
	tv2 := str(t, second, "version")
	if tv2 == tv1 {
		t.Fatal("changed content kept its version")
	}
	for _, path := range []string{"/v1/tasks/aicme/example-001", "/v1/tasks/" + url.PathEscape("aicme/example-001")} {
		task := c.must(200, "GET", path, "")
		items := list(t, task, "items")
		if len(items) != 2 || str(t, items[0], "version") != tv1 || str(t, items[1], "version") != tv2 {
			t.Fatalf("GET %s lists %v", path, items)
		}
		expect(t, task, tv2, "current")
	}
	got := c.must(200, "GET", "/v1/tasks/aicme/example-001/versions/"+tv1, "")
	expect(t, got, 2.0, "task", "rubric", "criteria", 0, "weight")
	expect(t, got, "tone", "task", "rubric", "criteria", 2, "check", "judge")

	// The list: by id, each with its newest version. A task whose id is
	// the front of another's is a task of its own.
	h.clk.Advance(1)
	c.must(201, "POST", "/v1/tasks", `{"id": "aicme/example", "rubric": {"criteria": [{"id": "c", "check": {"type": "contains", "value": "x"}}]}}`)
	tasks := list(t, c.must(200, "GET", "/v1/tasks", ""), "items")
	if len(tasks) != 2 {
		t.Fatalf("GET /v1/tasks lists %v, want 2 tasks", tasks)
	}
	expect(t, tasks[0], "task", "object")
	expect(t, tasks[0], "aicme/example", "id")
	expect(t, tasks[0], 1.0, "versions")
	expect(t, tasks[0], "", "prompt")
	expect(t, tasks[1], "aicme/example-001", "id")
	expect(t, tasks[1], tv2, "current")
	expect(t, tasks[1], 2.0, "versions")
	expect(t, tasks[1], "Summarise the ticket.", "prompt")
	expect(t, tasks[1], str(t, first, "created_at"), "created_at")
	expect(t, tasks[1], str(t, second, "created_at"), "updated_at")
	if str(t, first, "created_at") == str(t, second, "created_at") {
		t.Fatal("both versions have one created_at: a useless test")
	}
	expect(t, tasks[1], false, "prompt_truncated")
	// A long prompt is listed by its first 500 characters (runes, not
	// bytes); its version holds the whole.
	long := strings.Repeat("é", 499) + "xyz"
	c.must(201, "POST", "/v1/tasks", `{"id": "aicme/long", "prompt": "`+long+`", "rubric": {"criteria": [{"id": "c", "check": {"type": "contains", "value": "x"}}]}}`)
	tasks = list(t, c.must(200, "GET", "/v1/tasks", ""), "items")
	expect(t, tasks[2], "aicme/long", "id")
	expect(t, tasks[2], long[:len(long)-2], "prompt")
	expect(t, tasks[2], true, "prompt_truncated")
	expect(t, c.must(200, "GET", "/v1/tasks/aicme/long", ""), long, "items", 0, "task", "prompt")

	apiError(t, c.request("GET", "/v1/tasks/aicme/other", "", nil), 404, "not_found", "aicme/other")
	apiError(t, c.request("GET", "/v1/tasks/aicme/example-001/versions/tv_0000000000000000", "", nil), 404, "not_found", "tv_0000000000000000")

	// Tasks are the workspace's: another workspace's key finds none.
	ws := str(t, c.must(201, "POST", "/v1/workspaces", `{"name": "other"}`), "id")
	other := h.client(str(t, c.must(201, "POST", "/v1/workspaces/"+ws+"/api-keys", `{"name": "k"}`), "key"))
	apiError(t, other.request("GET", "/v1/tasks/aicme/example-001", "", nil), 404, "not_found", "")
	if items := list(t, other.must(200, "GET", "/v1/tasks", ""), "items"); len(items) != 0 {
		t.Errorf("another workspace lists %v", items)
	}

	h.restart()
	c = h.client(adminKey)
	if task := c.must(200, "GET", "/v1/tasks/aicme/example-001", ""); len(list(t, task, "items")) != 2 {
		t.Fatalf("after a restart: %v", task)
	}
	if again := list(t, c.must(200, "GET", "/v1/tasks", ""), "items"); fmt.Sprint(again) != fmt.Sprint(tasks) {
		t.Fatalf("after a restart the list is %v, was %v", again, tasks)
	}
}

func TestSeed003InvalidTasks(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	for _, tc := range []struct{ name, body, path string }{
		{"no id", `{"rubric": {"criteria": [{"id": "a", "check": {"type": "json_valid"}}]}}`, "id:"},
		{"no criteria", `{"id": "t", "rubric": {"criteria": []}}`, "rubric.criteria:"},
		{"bad regex", `{"id": "t", "rubric": {"criteria": [{"id": "a", "check": {"type": "regex", "value": "("}}]}}`, "rubric.criteria[0].check.value:"},
		{"unknown check", `{"id": "t", "rubric": {"criteria": [{"id": "a", "check": {"type": "sounds_good"}}]}}`, "rubric.criteria[0].check.type:"},
		{"weight not positive", `{"id": "t", "rubric": {"criteria": [{"id": "a", "weight": 0, "check": {"type": "json_valid"}}]}}`, "rubric.criteria[0].weight:"},
		{"duplicate criterion", `{"id": "t", "rubric": {"criteria": [{"id": "a", "check": {"type": "json_valid"}}, {"id": "a", "check": {"type": "json_valid"}}]}}`, "rubric.criteria[1].id:"},
		// As every other body: an empty one lacks its members, a non-object
		// one is no body.
		{"empty body", ``, "id: is required"},
		{"an array", `[]`, "body must be a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hdr map[string]string
			if tc.body == "" {
				hdr = map[string]string{"Content-Type": "application/json"}
			}
			apiError(t, c.request("POST", "/v1/tasks", tc.body, hdr), 400, "invalid_request", tc.path)
		})
	}
	json := map[string]string{"Content-Type": "application/json"}
	apiError(t, c.request("PUT", "/v1/judge-versions/j2", ``, json), 400, "invalid_request", "judges: is required")
	apiError(t, c.request("PUT", "/v1/judge-versions/j2", `"x"`, nil), 400, "invalid_request", "body must be a JSON object")
	apiError(t, c.request("POST", "/v1/rewards", `[1]`, nil), 400, "invalid_request", "body must be a JSON object")
}

// TestSeed003JudgeVersions: j1 exists from the start and maps every judge
// to the subject of its name; a published version is fixed: the same
// mapping again is 200, another 409.
func TestSeed003JudgeVersions(t *testing.T) {
	h := newHarness(t, config{})
	c := h.client(adminKey)
	items := list(t, c.must(200, "GET", "/v1/judge-versions", ""), "items")
	if len(items) != 1 || str(t, items[0], "name") != "j1" || len(at(t, items[0], "judges").(map[string]any)) != 0 {
		t.Fatalf("judge versions at the start: %v", items)
	}
	j2 := c.must(201, "PUT", "/v1/judge-versions/j2", `{"judges": {"tone": "tone-v2"}}`)
	expect(t, j2, "tone-v2", "judges", "tone")
	c.must(200, "PUT", "/v1/judge-versions/j2", `{"judges": {"tone": "tone-v2"}}`)
	apiError(t, c.request("PUT", "/v1/judge-versions/j2", `{"judges": {"tone": "tone-v3"}}`, nil), 409, "conflict", "j2")
	apiError(t, c.request("PUT", "/v1/judge-versions/j1", `{"judges": {"tone": "tone-v3"}}`, nil), 409, "conflict", "j1")
	c.must(201, "PUT", "/v1/judge-versions/j10", `{"judges": {}}`)
	apiError(t, c.request("PUT", "/v1/judge-versions/v2", `{"judges": {}}`, nil), 400, "invalid_request", "judge_version")
	apiError(t, c.request("PUT", "/v1/judge-versions/j3", `{"judges": {"tone": "a.b"}}`, nil), 400, "invalid_request", "judges.tone")
	apiError(t, c.request("PUT", "/v1/judge-versions/j3", `{}`, nil), 400, "invalid_request", "judges")
	h.restart()
	c = h.client(adminKey)
	items = list(t, c.must(200, "GET", "/v1/judge-versions", ""), "items")
	if len(items) != 3 || str(t, items[1], "name") != "j2" || str(t, items[2], "name") != "j10" {
		t.Fatalf("judge versions after a restart: %v", items)
	}
}
