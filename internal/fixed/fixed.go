// Package fixed caches values that never change once stored (a run's
// agent, a task version), so that hot lookups skip the store. A Cache is
// bounded: a shard that fills is emptied, the cheapest eviction that keeps
// memory flat, and a miss costs only the read it would have saved.
package fixed

import (
	"hash/maphash"
	"sync"
)

// shardSize bounds a shard: 16 × 4,096 entries in all.
const shardSize = 4096

// Cache maps keys to values that must not change after Put, nor be
// changed by the callers of Get. The zero value is not usable; call New.
type Cache[V any] struct {
	seed   maphash.Seed
	shards [16]shard[V]
}

type shard[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

// New returns an empty cache.
func New[V any]() *Cache[V] { return &Cache[V]{seed: maphash.MakeSeed()} }

func (c *Cache[V]) shard(key []byte) *shard[V] {
	return &c.shards[maphash.Bytes(c.seed, key)%uint64(len(c.shards))]
}

// Get returns key's value, if cached.
func (c *Cache[V]) Get(key []byte) (V, bool) {
	sh := c.shard(key)
	sh.mu.Lock()
	v, ok := sh.m[string(key)]
	sh.mu.Unlock()
	return v, ok
}

// Put caches key → v.
func (c *Cache[V]) Put(key []byte, v V) {
	sh := c.shard(key)
	sh.mu.Lock()
	if sh.m == nil || len(sh.m) >= shardSize {
		sh.m = make(map[string]V, 64)
	}
	sh.m[string(key)] = v
	sh.mu.Unlock()
}

// Len is the number of values cached.
func (c *Cache[V]) Len() int {
	n := 0
	for i := range c.shards {
		c.shards[i].mu.Lock()
		n += len(c.shards[i].m)
		c.shards[i].mu.Unlock()
	}
	return n
}
