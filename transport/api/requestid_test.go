package api

import (
	"strconv"
	"strings"
	"testing"
)

func TestRequestIDsAreFreshAndTakeOneAllocation(t *testing.T) {
	ids := newRequestIDs("req_0a1b2c3d")
	seen := map[string]bool{}
	for range 2000 {
		id := ids.Next()
		if !strings.HasPrefix(id, "req_0a1b2c3d_") || len(id) != len("req_0a1b2c3d_")+16 || seen[id] {
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

// Two ids a tenant is given do not say how many requests came between:
// consecutive ids are not a fixed step apart, nor ordered, and two
// generators number the same sequence differently.
func TestRequestIDsDoNotCountRequests(t *testing.T) {
	number := func(id string) uint64 {
		t.Helper()
		n, err := strconv.ParseUint(id[strings.LastIndexByte(id, '_')+1:], 16, 64)
		if err != nil {
			t.Fatalf("request id %q: %v", id, err)
		}
		return n
	}
	a, b := newRequestIDs("req_a"), newRequestIDs("req_a")
	prev := number(a.Next())
	steps, rising, same := map[uint64]bool{}, 0, 0
	const n = 1000
	for range n {
		cur := number(a.Next())
		steps[cur-prev] = true
		if cur > prev {
			rising++
		}
		if cur == number(b.Next()) {
			same++
		}
		prev = cur
	}
	if len(steps) < n/2 || rising > n*6/10 || rising < n*4/10 || same > 1 {
		t.Errorf("of %d consecutive ids, %d distinct steps, %d rising, %d the same as another generator's: they count requests",
			n, len(steps), rising, same)
	}
}
