package server

import "testing"

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
