package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAPIKeySecretIsShownOnce: a key creation retried with its
// Idempotency-Key makes no second key and never shows the secret again.
func TestAPIKeySecretIsShownOnce(t *testing.T) {
	s := startServer(t, Config{})
	post := func() (int, map[string]any) {
		req, _ := http.NewRequest("POST", "http://"+s.HTTPAddr()+"/v1/workspaces/default/api-keys", strings.NewReader(`{"name": "ci"}`))
		req.Header.Set("Authorization", "Bearer "+adminKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "make-ci-key")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s", b)
		}
		return resp.StatusCode, m
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
	c := newClient(t, s, secret)
	c.must(200, "GET", "/v1/workspaces", "")
}
