package pebblelog

import (
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/persisttest"
)

// The store keeps its whole contract with every directory key filtered.
func TestContractWithEveryKeyFiltered(t *testing.T) {
	persisttest.RunContract(t, func(t *testing.T) persist.Store {
		s, err := Open(t.TempDir(), Options{FilterPrefixes: [][]byte{{}}, filterMinKeys: 4})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func openFiltered(t *testing.T, dir string, minKeys int64) *Store {
	t.Helper()
	s, err := Open(dir, Options{FilterPrefixes: [][]byte{[]byte("idem/r/")}, filterMinKeys: minKeys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// waitFilter waits until the store's key filter is built and no rebuild runs.
func waitFilter(t *testing.T, s *Store) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.filter.active.Load() == nil || s.filter.rebuilding.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("key filter not built in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestKeyFilterAnswersKeysNeverStoredWithoutReadingPebble(t *testing.T) {
	dir := t.TempDir()
	s := openFiltered(t, dir, 0)
	must(t, s.Put(persist.KV{Key: []byte("idem/r/put"), Value: []byte("1")}))
	must(t, s.Append(persist.Batch{Agent: "a", First: 1, Events: persisttest.Events("a", 1, 1),
		Index: []persist.KV{{Key: []byte("idem/r/appended"), Value: []byte("2")}}}))
	waitFilter(t, s)
	for _, tc := range []struct {
		key         string
		want        string // "" for not found
		byTheFilter bool
	}{
		{"idem/r/put", "1", false},
		{"idem/r/appended", "2", false},
		{"idem/r/never", "", true},
		{"other/never", "", false}, // not filtered: Pebble answers
	} {
		before := s.filter.absent.Load()
		v, err := s.Get([]byte(tc.key))
		switch {
		case tc.want == "" && !errors.Is(err, persist.ErrNotFound):
			t.Errorf("Get(%s) = %q, %v; want not found", tc.key, v, err)
		case tc.want != "" && (err != nil || string(v) != tc.want):
			t.Errorf("Get(%s) = %q, %v; want %q", tc.key, v, err, tc.want)
		}
		if by := s.filter.absent.Load() > before; by != tc.byTheFilter {
			t.Errorf("Get(%s) answered by the filter alone: %v, want %v", tc.key, by, tc.byTheFilter)
		}
	}

	// Reopened, the filter is built from the stored keys.
	must(t, s.Close())
	s = openFiltered(t, dir, 0)
	waitFilter(t, s)
	for _, k := range []string{"idem/r/put", "idem/r/appended"} {
		if _, err := s.Get([]byte(k)); err != nil {
			t.Errorf("after reopening, Get(%s): %v", k, err)
		}
	}
	if _, err := s.Get([]byte("idem/r/never")); !errors.Is(err, persist.ErrNotFound) || s.filter.absent.Load() != 1 {
		t.Errorf("after reopening, Get of a key never stored: %v, answered by the filter %d times, want once", err, s.filter.absent.Load())
	}
}

// A key whose write has returned is found by every Get after it, while
// writers on many goroutines keep the filter filling up and being rebuilt.
func TestKeyFilterNeverHidesAStoredKeyWhileItIsRebuilt(t *testing.T) {
	s := openFiltered(t, t.TempDir(), 16)
	// Keys stored before the first build, which the first scan must find
	// and outgrow (the filter is sized for 16).
	for i := range 100 {
		must(t, s.Put(persist.KV{Key: fmt.Appendf(nil, "idem/r/early/%d", i), Value: []byte("v")}))
	}
	const writers, each = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := fmt.Appendf(nil, "idem/r/%d/%d", w, i)
				var err error
				if i%2 == 0 {
					err = s.Put(persist.KV{Key: key, Value: []byte("v")})
				} else {
					agent := fmt.Sprintf("a%d", w)
					err = s.Append(persist.Batch{Agent: agent, First: uint64(i/2 + 1),
						Events: persisttest.Events(agent, uint64(i/2+1), 1), Index: []persist.KV{{Key: key, Value: []byte("v")}}})
				}
				if err == nil {
					_, err = s.Get(key)
				}
				if err == nil {
					_, err = s.Get(fmt.Appendf(nil, "idem/r/early/%d", i%100))
				}
				if err != nil {
					errs <- fmt.Errorf("key %s: %w", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitFilter(t, s)
	if a := s.filter.active.Load(); a.capacity < writers*each+100 {
		t.Errorf("filter sized for %d keys after %d were stored: it was not rebuilt as it filled", a.capacity, writers*each+100)
	}
}

// A rebuild that starts while a write of a filtered key is between adding
// it to the old filter and committing it does not take the view it scans
// until that commit is done: the new filter would not hold the key, and a
// Get after the write returned would be told it is absent.
func TestKeyFilterRebuildWaitsForAWriteBetweenItsAddAndItsCommit(t *testing.T) {
	s := openFiltered(t, t.TempDir(), 0)
	waitFilter(t, s)
	var armed atomic.Bool
	committing, release := make(chan struct{}), make(chan struct{})
	s.beforeCommit = func() {
		if armed.CompareAndSwap(true, false) {
			close(committing)
			<-release
		}
	}
	armed.Store(true)
	put := make(chan error, 1)
	go func() { put <- s.Put(persist.KV{Key: []byte("idem/r/k"), Value: []byte("v")}) }()
	<-committing // added to the filter, not yet committed
	s.startFilterRebuild()
	for deadline := time.Now().Add(200 * time.Millisecond); s.filter.rebuilding.Load() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	close(release)
	must(t, <-put)
	waitFilter(t, s)
	if _, err := s.Get([]byte("idem/r/k")); err != nil {
		t.Fatalf("Get of a key whose Put returned, after a rebuild that began during that Put: %v", err)
	}
}

// A rebuild leaves out the keys deleted since the last one.
func TestKeyFilterRebuildDropsDeletedKeys(t *testing.T) {
	s := openFiltered(t, t.TempDir(), 64)
	for i := range 40 {
		must(t, s.Put(persist.KV{Key: fmt.Appendf(nil, "idem/r/%d", i), Value: []byte("v")}))
	}
	for i := range 40 {
		must(t, s.Put(persist.KV{Key: fmt.Appendf(nil, "idem/r/%d", i)})) // deleted
	}
	waitFilter(t, s)
	s.startFilterRebuild()
	waitFilter(t, s)
	if n := s.filter.active.Load().added.Load(); n != 0 {
		t.Errorf("rebuilt filter holds %d keys; all were deleted", n)
	}
}

func TestBloomHasNoFalseNegativesAndFewFalsePositives(t *testing.T) {
	const keys = 100_000
	b := newBloom(keys)
	seed := maphash.MakeSeed()
	for i := range keys {
		b.add(maphash.Bytes(seed, fmt.Appendf(nil, "in/%d", i)))
	}
	for i := range keys {
		if !b.has(maphash.Bytes(seed, fmt.Appendf(nil, "in/%d", i))) {
			t.Fatalf("key in/%d added but not found", i)
		}
	}
	fp := 0
	for i := range keys {
		if b.has(maphash.Bytes(seed, fmt.Appendf(nil, "out/%d", i))) {
			fp++
		}
	}
	// 10 bits a key in 512-bit blocks: about 1 %; 2 % allows for the seed.
	if rate := float64(fp) / keys; rate > 0.02 {
		t.Errorf("false positive rate at capacity %.2f%%, want at most 2%%", 100*rate)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// A rebuild sizes the new filter for twice the keys the old one took (and
// never below the smallest), so that it does not fill up again at once.
func TestARebuiltFilterIsSizedForTwiceTheKeysTaken(t *testing.T) {
	s := openFiltered(t, t.TempDir(), 16)
	waitFilter(t, s)
	for i := range 10 {
		must(t, s.Put(persist.KV{Key: fmt.Appendf(nil, "idem/r/%d", i), Value: []byte("v")}))
	}
	s.startFilterRebuild()
	waitFilter(t, s)
	if a := s.filter.active.Load(); a.capacity != 20 || a.added.Load() != 10 {
		t.Fatalf("rebuilt after 10 keys: sized for %d, holding %d; want 20 and 10", a.capacity, a.added.Load())
	}
	s.startFilterRebuild()
	waitFilter(t, s)
	if a := s.filter.active.Load(); a.capacity != 20 {
		t.Fatalf("rebuilt again: sized for %d, want 20", a.capacity)
	}
}

// A store opened on many stored keys builds its filter in a few scans,
// each stopped once its filter is full: none of those filters ever answers
// a Get, so no stored key is reported absent while the build goes on.
func TestAFilterBuiltFromManyStoredKeysNeverHidesOne(t *testing.T) {
	dir := t.TempDir()
	s := openFiltered(t, dir, 0)
	const keys = 20_000
	for i := 0; i < keys; i += 1000 {
		var kvs []persist.KV
		for j := i; j < i+1000; j++ {
			kvs = append(kvs, persist.KV{Key: fmt.Appendf(nil, "idem/r/%05d", j), Value: []byte("v")})
		}
		must(t, s.Put(kvs...))
	}
	must(t, s.Close())
	s = openFiltered(t, dir, 16) // 16, 64, 256, … until a scan finds them all
	for i := 0; s.filter.active.Load() == nil || s.filter.rebuilding.Load() || i < keys; i++ {
		key := fmt.Appendf(nil, "idem/r/%05d", keys-1-i%keys) // the last scanned first
		if _, err := s.Get(key); err != nil {
			t.Fatalf("Get(%s) while the filter is built: %v", key, err)
		}
	}
	if a := s.filter.active.Load(); a.added.Load() != keys {
		t.Fatalf("the built filter holds %d keys, want %d", a.added.Load(), keys)
	}
}

// A scan that stops because its filter is full leaves the filter that
// answers Gets in place: the partial one never answers, so no stored key
// past where the scan stopped is reported absent.
func TestAScanStoppedByAFullFilterLeavesTheActiveOne(t *testing.T) {
	s := openFiltered(t, t.TempDir(), 0)
	var kvs []persist.KV
	for i := range 100 {
		kvs = append(kvs, persist.KV{Key: fmt.Appendf(nil, "idem/r/%03d", i), Value: []byte("v")})
	}
	must(t, s.Put(kvs...))
	waitFilter(t, s)
	old := s.filter.active.Load()
	if err := s.fillFilter(newBloom(16)); !errors.Is(err, errFilterFull) {
		t.Fatalf("a scan of 100 keys into a filter of 16: %v, want errFilterFull", err)
	}
	if s.filter.active.Load() != old || s.filter.building.Load() != nil {
		t.Fatal("the scan's full filter took the place of the active one")
	}
	for _, kv := range kvs {
		if _, err := s.Get(kv.Key); err != nil {
			t.Fatalf("Get(%s): %v", kv.Key, err)
		}
	}
}

// A write while the first filter after a start is being built, when none
// answers Gets yet, goes into the one being built.
func TestAWriteDuringTheFirstBuildGoesIntoTheFilterBeingBuilt(t *testing.T) {
	s := openFiltered(t, t.TempDir(), 0)
	waitFilter(t, s)
	building := newBloom(64)
	s.filter.active.Store(nil) // as at a start, until the first build is done
	s.filter.building.Store(building)
	key := []byte("idem/r/during-the-build")
	must(t, s.Put(persist.KV{Key: key, Value: []byte("v")}))
	if !building.has(maphash.Bytes(s.filter.seed, key)) || building.added.Load() != 1 {
		t.Fatalf("the filter being built holds %d keys, not the one written", building.added.Load())
	}
	if _, err := s.Get(key); err != nil {
		t.Fatalf("Get before any filter answers: %v", err)
	}
}
