package api_test

import (
	"strings"
	"testing"
)

// Workspaces and their API keys (SPEC §1).

// TestTenancyIsolation: a workspace key acts in its own workspace; other
// workspaces' agents are 404 (no existence leak) on /api/v1, and a
// /v1/workspaces path of another workspace is 403 google.rpc.Status.
func TestTenancyIsolation(t *testing.T) {
	admin := newHarness(t, config{}).client(adminKey)

	ws := admin.must(201, "POST", "/v1/workspaces", `{"name": "acme"}`)
	wsID := str(t, ws, "id")
	if !strings.HasPrefix(wsID, "ws_") {
		t.Errorf("workspace id %q lacks ws_ prefix", wsID)
	}
	expect(t, ws, "acme", "name")
	key := admin.must(201, "POST", "/v1/workspaces/"+wsID+"/api-keys", `{"name": "acme-ci"}`)
	secret := str(t, key, "key")
	acme := admin.as(secret)

	agent := acme.must(201, "POST", "/api/v1/agents", `{"name": "acme-bot"}`)
	agentID := str(t, agent, "id")
	expect(t, agent, wsID, "workspace_id")
	acme.must(200, "GET", "/api/v1/agents/"+agentID, "")

	// The admin's home is default: the acme agent does not exist there.
	res := admin.request("GET", "/api/v1/agents/"+agentID, "", nil)
	if res.status != 404 {
		t.Fatalf("admin GET of another workspace's agent: %d %s, want 404", res.status, res.body)
	}
	expect(t, res.json(t), "not_found", "error", "code")
	if items := list(t, admin.must(200, "GET", "/api/v1/agents", ""), "items"); len(items) != 0 {
		t.Errorf("admin's default workspace lists %d agents, want 0", len(items))
	}
	res = admin.request("POST", "/api/v1/agents/"+agentID+"/runs", `{}`, nil)
	if res.status != 404 {
		t.Errorf("admin POST run on another workspace's agent: %d, want 404", res.status)
	}

	// A workspace key on another workspace's admin path: 403, google.rpc.Status.
	res = acme.request("POST", "/v1/workspaces/default/api-keys", `{"name": "sneaky"}`, nil)
	if res.status != 403 {
		t.Fatalf("acme key creating a default key: %d %s, want 403", res.status, res.body)
	}
	st := res.json(t)
	expect(t, st, 7.0, "code")
	if str(t, st, "message") == "" {
		t.Error("google.rpc.Status message is empty")
	}
	if d := list(t, st, "details"); len(d) != 0 {
		t.Errorf("details = %v, want []", d)
	}
	if _, has := st["error"]; has {
		t.Errorf("workspace door answered the /api/v1 error shape: %s", res.body)
	}

	// The workspace door answers a missing key as google.rpc.Status too.
	res = admin.as("").request("GET", "/v1/workspaces", "", nil)
	if res.status != 401 {
		t.Errorf("GET /v1/workspaces without a key: %d, want 401", res.status)
	} else {
		expect(t, res.json(t), 16.0, "code")
	}

	// Only admins create workspaces.
	res = acme.request("POST", "/v1/workspaces", `{"name": "mine"}`, nil)
	if res.status != 403 {
		t.Errorf("acme key creating a workspace: %d, want 403", res.status)
	}

	ids := func(c *client) []string {
		var out []string
		for _, it := range list(t, c.must(200, "GET", "/v1/workspaces", ""), "items") {
			out = append(out, str(t, it, "id"))
		}
		return out
	}
	if got := ids(acme); len(got) != 1 || got[0] != wsID {
		t.Errorf("acme key lists workspaces %v, want [%s]", got, wsID)
	}
	if got := ids(admin); len(got) != 2 {
		t.Errorf("admin lists workspaces %v, want default and %s", got, wsID)
	}
}

// TestAPIKeySecretIsShownOnce: a key creation retried with its
// Idempotency-Key makes no second key and never shows the secret again.
func TestAPIKeySecretIsShownOnce(t *testing.T) {
	h := newHarness(t, config{})
	admin := h.client(adminKey)
	post := func() (int, map[string]any) {
		r, err := admin.rawSend("POST", "/v1/workspaces/default/api-keys", `{"name": "ci"}`, withKey("make-ci-key"))
		if err != nil {
			t.Fatal(err)
		}
		return r.status, r.json(t)
	}
	status, first := post()
	secret, _ := first["key"].(string)
	if status != 201 || !strings.HasPrefix(secret, "pl_") {
		t.Fatalf("first answer %d %v", status, first)
	}
	status, again := post()
	if status != 201 || again["key"] != nil || again["id"] != first["id"] {
		t.Fatalf("replay %d %v: want the same key id with key null", status, again)
	}
	// The secret works, and is not anywhere a replay can reach.
	c := h.client(secret)
	c.must(200, "GET", "/v1/workspaces", "")
}
