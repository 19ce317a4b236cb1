package api

import (
	"strings"
	"testing"
)

func TestRequestIDsAreFreshAndTakeOneAllocation(t *testing.T) {
	s := &Service{reqPrefix: "req_0a1b2c3d"}
	seen := map[string]bool{}
	for range 2000 {
		id := s.RequestID()
		if !strings.HasPrefix(id, "req_0a1b2c3d_") || seen[id] {
			t.Fatalf("request id %q: not fresh, or not the service's", id)
		}
		seen[id] = true
	}
	var id string
	if n := testing.AllocsPerRun(100, func() { id = s.RequestID() }); n > 1 {
		t.Errorf("RequestID took %v allocations, want 1 (%s)", n, id)
	}
}
