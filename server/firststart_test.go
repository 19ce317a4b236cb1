package server

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/plaudit/plaudit/internal/freeport"
)

// TestFirstStartOnATakenPort: a first start that finds a port taken fails
// at once, naming the address, and leaves the data directory so that the
// next start makes an admin key, shows it, and the key works.
func TestFirstStartOnATakenPort(t *testing.T) {
	cases := []struct {
		name string
		take func(cfg *Config, addr string)
	}{
		{"http", func(cfg *Config, addr string) { cfg.HTTPAddr = addr }},
		{"embedded nats", func(cfg *Config, addr string) { cfg.NATSListen = addr }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			cfg := Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0"}
			failing := cfg
			c.take(&failing, taken.Addr().String())
			began := time.Now()
			s, err := Start(failing)
			if err == nil {
				_ = s.Close()
				t.Fatal("started on a taken port")
			}
			if took := time.Since(began); took > 3*time.Second {
				t.Errorf("failed after %v, want at once", took)
			}
			for _, want := range []string{taken.Addr().String(), "already in use"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q, want it to contain %q", err, want)
				}
			}

			s, err = Start(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.AdminKey == "" {
				t.Fatal("the start after the failed first start showed no admin key")
			}
			newClient(t, s, s.AdminKey).must(200, "GET", "/v1/workspaces", "")
		})
	}
}

// TestKeysLastUsed: the key list tells when each key last authenticated,
// on either door, and a restart keeps it (Close saves it).
func TestKeysLastUsed(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := startServer(t, Config{DataDir: dir, Now: clk.Now})
	admin := newClient(t, s, adminKey)
	created := admin.must(201, "POST", "/v1/workspaces/default/api-keys", `{"name": "ci"}`)
	id := str(t, created, "id")
	lastUsed := func(c *client) any {
		t.Helper()
		for _, k := range list(t, c.must(200, "GET", "/v1/workspaces/default/api-keys", ""), "items") {
			k := k.(map[string]any)
			if k["id"] == id {
				if _, ok := k["key"].(string); ok {
					t.Fatal("the list shows a secret")
				}
				return k["last_used_at"]
			}
		}
		t.Fatalf("key %s not listed", id)
		return nil
	}
	if got := lastUsed(admin); got != nil {
		t.Fatalf("a key never used: last_used_at %v", got)
	}
	clk.Advance(time.Hour)
	used := clk.Now().Format(time.RFC3339Nano)
	admin.as(str(t, created, "key")).must(200, "GET", "/v1/workspaces", "")
	if got := lastUsed(admin); got != used {
		t.Fatalf("last_used_at %v, want %s", got, used)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again := startServer(t, Config{DataDir: dir, Now: clk.Now})
	if got := lastUsed(newClient(t, again, adminKey)); got != used {
		t.Fatalf("after a restart: last_used_at %v, want %s", got, used)
	}
}

// TestANodeWaitingForItsPeersAnswers503: a cluster node whose peers have not
// started answers at once while it waits, /healthz and the API alike,
// instead of leaving requests in the listen backlog; a start that gives up
// closes the port.
func TestANodeWaitingForItsPeersAnswers503(t *testing.T) {
	addrs, err := freeport.Addrs(4)
	if err != nil {
		t.Fatal(err)
	}
	httpAddr, routes := addrs[0], addrs[1:]
	cfg := Config{DataDir: t.TempDir(), HTTPAddr: httpAddr, NATSListen: "127.0.0.1:0", BootstrapKey: adminKey,
		Cluster: &ClusterConfig{Name: "alone", Node: "n0", Listen: routes[0], Routes: routes, Secret: "route-secret",
			JoinTimeout: 4 * time.Second}}
	started := make(chan error, 1)
	go func() {
		s, err := Start(cfg)
		if err == nil {
			_ = s.Close()
		}
		started <- err
	}()
	hc := &http.Client{Timeout: 2 * time.Second}
	get := func(path string) (int, string, error) {
		resp, err := hc.Get("http://" + httpAddr + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), nil
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		code, body, err := get("/healthz")
		if err == nil {
			if code != 503 || body != `{"status":"starting"}` {
				t.Fatalf("/healthz while joining: %d %s", code, body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz while joining: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, body, err := get("/api/v1/agents")
	if err != nil || code != 503 || !strings.Contains(body, "joining cluster alone") {
		t.Fatalf("the API while joining: %d %s %v", code, body, err)
	}
	if err := <-started; err == nil {
		t.Fatal("a node with no peers joined its cluster")
	}
	if _, _, err := get("/healthz"); err == nil {
		t.Fatal("the port still answers after the start failed")
	}
}
