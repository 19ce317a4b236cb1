package pebblelog

import (
	"bytes"
	"cmp"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/plaudit/plaudit/persist"
)

// keyFilter holds, in memory, a Bloom filter of the directory keys stored
// under Options.FilterPrefixes, so that a Get of such a key that was never
// stored is answered without reading Pebble. It is meant for a key space
// read mostly for absence: an Idempotency-Key is looked up before every
// keyed write and is nearly always new, and Pebble answers that by reading
// the index and filter blocks of every table that may hold it, tables that
// flushes and compactions keep replacing.
//
// The filter never answers "absent" for a key that is stored: a key is
// added before the commit that stores it (a failed commit leaves a false
// positive, which only costs a Pebble read). Deleted keys stay in it until
// it is rebuilt from a scan of the stored keys, which happens when it has
// taken as many keys as it was sized for; until the first build finishes,
// every Get reads Pebble.
type keyFilter struct {
	prefixes [][]byte
	seed     maphash.Seed
	minKeys  int64 // the smallest filter built
	// active answers Gets; nil until the first build. building is the
	// filter being filled by a scan; every added key goes to both.
	active, building atomic.Pointer[bloom]
	rebuilding       atomic.Bool
	// gate is read-held by a write of covered keys from before it adds
	// them until its commit returns, and write-held by a rebuild while it
	// takes the view it scans: every key is then either in that view or
	// added to the new filter.
	gate   sync.RWMutex
	absent atomic.Uint64 // Gets answered by the filter alone
}

const defaultFilterMinKeys = 1 << 16

func newKeyFilter(o Options) *keyFilter {
	if len(o.FilterPrefixes) == 0 {
		return nil
	}
	return &keyFilter{prefixes: o.FilterPrefixes, seed: maphash.MakeSeed(),
		minKeys: cmp.Or(o.filterMinKeys, defaultFilterMinKeys)}
}

func (f *keyFilter) covers(key []byte) bool {
	for _, p := range f.prefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// coversAny reports whether a write of kvs must hold the gate.
func (f *keyFilter) coversAny(kvs []persist.KV) bool {
	if f == nil {
		return false
	}
	for _, kv := range kvs {
		if kv.Value != nil && f.covers(kv.Key) {
			return true
		}
	}
	return false
}

// add records key before the commit that stores it, and reports whether
// the filter answering Gets is full (time to rebuild it). The caller holds
// the gate for reading from before add until its commit returns.
func (f *keyFilter) add(key []byte) (full bool) {
	if !f.covers(key) {
		return false
	}
	h := maphash.Bytes(f.seed, key)
	// building before active: a rebuild stores active before it clears
	// building, so one of the two loads sees the new filter.
	b, a := f.building.Load(), f.active.Load()
	if b != nil {
		b.add(h)
	}
	if a != nil && a != b {
		full = a.add(h)
	}
	return full
}

// absentFor reports whether key is certainly not stored.
func (f *keyFilter) absentFor(key []byte) bool {
	a := f.active.Load()
	if a == nil || !f.covers(key) || a.has(maphash.Bytes(f.seed, key)) {
		return false
	}
	f.absent.Add(1)
	return true
}

// rebuildFilter builds a new filter from a scan of the stored keys, sized
// for twice the keys the present one has taken, and puts it in its place;
// again, four times larger, while the scan finds more keys than that. It
// runs on its own goroutine, one at a time (rebuilding).
func (s *Store) rebuildFilter() {
	f := s.filter
	defer f.rebuilding.Store(false)
	for {
		keys := f.minKeys
		if a := f.active.Load(); a != nil {
			keys = max(keys, 2*a.added.Load())
		}
		err := s.fillFilter(newBloom(keys))
		for errors.Is(err, errFilterFull) { // more keys stored than guessed
			keys *= 4
			err = s.fillFilter(newBloom(keys))
		}
		if errors.Is(err, persist.ErrClosed) {
			return
		}
		if err != nil {
			s.logger.Warn("key filter not rebuilt: Gets read the store", "component", "pebblelog", "err", err)
			return
		}
		n := f.active.Load()
		if n.added.Load() < n.capacity {
			return
		}
	}
}

var errFilterFull = errors.New("key filter full before its scan ended")

// fillFilter fills n with the stored keys and makes it the active filter.
func (s *Store) fillFilter(n *bloom) error {
	s.mu.RLock() // Close waits for the scan
	defer s.mu.RUnlock()
	if s.closed {
		return persist.ErrClosed
	}
	f := s.filter
	f.gate.Lock()
	f.building.Store(n)
	view := s.db.NewSnapshot()
	f.gate.Unlock()
	defer view.Close()
	for _, p := range f.prefixes {
		lower := dirKey(p)
		it, err := view.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
		if err != nil {
			f.building.Store(nil)
			return err
		}
		full := false
		for valid := it.First(); valid && !full; valid = it.Next() {
			full = n.add(maphash.Bytes(f.seed, it.Key()[2:]))
		}
		if err := it.Close(); err != nil || full {
			f.building.Store(nil)
			return cmp.Or(err, errFilterFull)
		}
	}
	f.active.Store(n)
	f.building.Store(nil)
	return nil
}

// startFilterRebuild starts a rebuild unless one is running.
func (s *Store) startFilterRebuild() {
	if s.filter.rebuilding.CompareAndSwap(false, true) {
		go s.rebuildFilter()
	}
}

// bloom is a blocked Bloom filter: each key sets bloomProbes bits in one
// 512-bit block (one cache line), 10 bits a key, about 1 % false
// positives at capacity. Adds and lookups are atomic, so it needs no lock.
type bloom struct {
	words    []atomic.Uint64 // blocks of 8 words
	blocks   uint64
	capacity int64
	added    atomic.Int64
}

const (
	bloomBitsPerKey = 10
	bloomProbes     = 7
)

func newBloom(keys int64) *bloom {
	blocks := uint64(keys*bloomBitsPerKey+511) / 512
	return &bloom{words: make([]atomic.Uint64, 8*blocks), blocks: blocks, capacity: keys}
}

// probe returns the first word of h's block and the bits to test in it,
// 9 bits of a second, mixed hash each.
func (b *bloom) probe(h uint64) (uint64, uint64) {
	block := (h >> 32) * b.blocks >> 32 // h's top half scaled to [0, blocks)
	return block * 8, h * 0x9e3779b97f4a7c15
}

func (b *bloom) add(h uint64) (full bool) {
	w, bits := b.probe(h)
	for i := range bloomProbes {
		bit := (bits >> (9 * i)) & 511
		b.words[w+bit>>6].Or(1 << (bit & 63))
	}
	return b.added.Add(1) >= b.capacity
}

func (b *bloom) has(h uint64) bool {
	w, bits := b.probe(h)
	for i := range bloomProbes {
		bit := (bits >> (9 * i)) & 511
		if b.words[w+bit>>6].Load()&(1<<(bit&63)) == 0 {
			return false
		}
	}
	return true
}
