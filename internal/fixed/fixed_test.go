package fixed

import (
	"fmt"
	"testing"
)

// TestCacheIsBounded: what was put is found until its shard fills, and no
// number of puts holds more than the bound.
func TestCacheIsBounded(t *testing.T) {
	c := New[string]()
	for i := range 100_000 {
		k := fmt.Appendf(nil, "r/run_%06d", i)
		c.Put(k, "agt")
		if v, ok := c.Get(k); !ok || v != "agt" {
			t.Fatalf("Get(%s) just after Put = %q, %v", k, v, ok)
		}
	}
	if n := c.Len(); n > len(c.shards)*shardSize {
		t.Fatalf("%d entries held, want at most %d", n, len(c.shards)*shardSize)
	}
	if _, ok := c.Get([]byte("never put")); ok {
		t.Fatal("Get found a key never put")
	}
}
