package actors

import (
	"fmt"
	"testing"
)

// TestFixedCacheIsBounded: what was put is found until its shard fills,
// and no number of puts holds more than the bound.
func TestFixedCacheIsBounded(t *testing.T) {
	c := newFixedCache()
	for i := range 100_000 {
		k := fmt.Appendf(nil, "r/run_%06d", i)
		c.put(k, []byte("agt"))
		if v, ok := c.get(k); !ok || string(v) != "agt" {
			t.Fatalf("get(%s) just after put = %q, %v", k, v, ok)
		}
	}
	held := 0
	for i := range c.shards {
		held += len(c.shards[i].m)
	}
	if held > len(c.shards)*fixedShardSize {
		t.Fatalf("%d entries held, want at most %d", held, len(c.shards)*fixedShardSize)
	}
}
