package actors

import (
	"hash/maphash"
	"sync"
)

// pendingIndex holds directory entries published ahead of their append
// (see agentActor.answerEarly), for lookups from every door meanwhile. Each
// selection stores and then deletes one or two entries: a map per shard
// under a mutex does it without the allocations a sync.Map makes (the key
// and the value boxed, a node per entry), three of a selection's 36. It is
// not a fixed.Cache: an entry must stay until its append lands, never be
// evicted.
type pendingIndex struct {
	seed   maphash.Seed
	shards [16]pendingShard
}

type pendingShard struct {
	mu sync.Mutex
	m  map[string][]byte
}

func newPendingIndex() *pendingIndex { return &pendingIndex{seed: maphash.MakeSeed()} }

func (p *pendingIndex) shard(key string) *pendingShard {
	return &p.shards[maphash.String(p.seed, key)%uint64(len(p.shards))]
}

// get returns the value published under key, if any.
func (p *pendingIndex) get(key []byte) ([]byte, bool) {
	sh := &p.shards[maphash.Bytes(p.seed, key)%uint64(len(p.shards))]
	sh.mu.Lock()
	v, ok := sh.m[string(key)]
	sh.mu.Unlock()
	return v, ok
}

// put publishes key → v; v must not change while published.
func (p *pendingIndex) put(key string, v []byte) {
	sh := p.shard(key)
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[string][]byte)
	}
	sh.m[key] = v
	sh.mu.Unlock()
}

// drop unpublishes key.
func (p *pendingIndex) drop(key string) {
	sh := p.shard(key)
	sh.mu.Lock()
	delete(sh.m, key)
	sh.mu.Unlock()
}

// len is the number of entries published.
func (p *pendingIndex) len() int {
	n := 0
	for i := range p.shards {
		p.shards[i].mu.Lock()
		n += len(p.shards[i].m)
		p.shards[i].mu.Unlock()
	}
	return n
}
