package server

import (
	"testing"
	"time"
)

// TestHealthzAfterStart: /healthz answers 200 once Start returns (Start
// marks the service ready). The door's /healthz before and after ready is
// tested in transport/httpdoor; the behaviour of the service behind the
// doors, in process, in transport/api.
func TestHealthzAfterStart(t *testing.T) {
	s := startServer(t, Config{})
	res := newClient(t, s, "").request("GET", "/healthz", "", nil)
	if res.status != 200 {
		t.Fatalf("/healthz: %d %s, want 200", res.status, res.body)
	}
}

// TestCloseRightAfterStart: a server closed as soon as Start returns (a
// SIGTERM at startup) stops, rather than waiting on a listener fasthttp
// has not registered yet.
func TestCloseRightAfterStart(t *testing.T) {
	for i := range 20 {
		cfg := Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", NATSListen: "127.0.0.1:0", BootstrapKey: adminKey}
		s, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Close() }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("round %d: Close: %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Close right after Start did not return", i)
		}
	}
}
