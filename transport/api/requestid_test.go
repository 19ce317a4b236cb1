package api

import (
	"strings"
	"testing"
)

func TestRequestIDsAreFreshAndTakeOneAllocation(t *testing.T) {
	ids := &RequestIDs{prefix: "req_0a1b2c3d"}
	seen := map[string]bool{}
	for range 2000 {
		id := ids.Next()
		if !strings.HasPrefix(id, "req_0a1b2c3d_") || seen[id] {
			t.Fatalf("request id %q: not fresh, or not the generator's", id)
		}
		seen[id] = true
	}
	var id string
	if n := testing.AllocsPerRun(100, func() { id = ids.Next() }); n > 1 {
		t.Errorf("Next took %v allocations, want 1 (%s)", n, id)
	}
	if a, b := NewRequestIDs(), NewRequestIDs(); a.prefix == b.prefix {
		t.Errorf("two generators share the prefix %s", a.prefix)
	}
}
