package actors

import (
	"hash/maphash"
	"sync"
)

// fixedCache keeps directory values that never change once durable — a
// run's agent, the run an external id names — so the lookups that route
// every request about a run skip Pebble (a tenth of a feedback's CPU).
// It is bounded: a shard that fills is emptied, the cheapest eviction that
// keeps memory flat, and a miss costs only the Pebble read it saves.
type fixedCache struct {
	seed   maphash.Seed
	shards [16]fixedShard
}

type fixedShard struct {
	mu sync.Mutex
	m  map[string][]byte
}

// fixedShardSize bounds a shard: 16 × 4,096 entries, a few MB at most.
const fixedShardSize = 4096

func newFixedCache() *fixedCache { return &fixedCache{seed: maphash.MakeSeed()} }

func (c *fixedCache) shard(key []byte) *fixedShard {
	return &c.shards[maphash.Bytes(c.seed, key)%uint64(len(c.shards))]
}

func (c *fixedCache) get(key []byte) ([]byte, bool) {
	sh := c.shard(key)
	sh.mu.Lock()
	v, ok := sh.m[string(key)]
	sh.mu.Unlock()
	return v, ok
}

// put keeps key → v; v must not be changed afterwards.
func (c *fixedCache) put(key, v []byte) {
	sh := c.shard(key)
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= fixedShardSize {
		sh.m = make(map[string][]byte, 64)
	}
	sh.m[string(key)] = v
	sh.mu.Unlock()
}
