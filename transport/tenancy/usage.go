package tenancy

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/plaudit/plaudit/persist"
)

// A key's last use is kept in memory as it authenticates and written to
// the store only by SaveUsage, which the server calls once a minute and at
// shutdown. Writing it on every request would add a synced write to every
// request for a value whose use — telling which keys are idle before
// revoking them — needs minutes, not nanoseconds; a crash loses at most
// the last interval of it, and it grants nothing. It lives in records of
// its own (usedPrefix), so a save never rewrites a key record and cannot
// race a revocation.

// In a cluster the records are the directory's: every node writes the
// uses it saw, and takes in the ones other nodes write (Apply), keeping the
// later of its own and theirs, so each node answers the key's last use
// anywhere, as of the others' last save.

// usage is one key's last use.
type usage struct {
	at    atomic.Int64 // Unix nanoseconds of the last authentication; 0 never
	saved atomic.Int64 // the latest use on record in the store, by this node or another
}

// storeMax raises v to n, never lowers it.
func storeMax(v *atomic.Int64, n int64) {
	for {
		cur := v.Load()
		if n <= cur || v.CompareAndSwap(cur, n) {
			return
		}
	}
}

// recorded takes in a use on record in the store (written by this node or
// another): the key's last use is the later of it and the one known here.
func (u *usage) recorded(v []byte) error {
	at, err := time.Parse(time.RFC3339Nano, string(v))
	if err != nil {
		return err
	}
	storeMax(&u.at, at.UnixNano())
	storeMax(&u.saved, at.UnixNano())
	return nil
}

// touchEvery is how far apart two recorded uses of a key are at least:
// within it a key's many concurrent requests only read the shared word.
const touchEvery = int64(time.Second)

func (u *usage) touch(now time.Time) {
	if u == nil {
		return
	}
	n := now.UnixNano()
	if n-u.at.Load() >= touchEvery {
		u.at.Store(n)
	}
}

// LastUsed is when the key last authenticated, to about a second; zero if
// never. Uses before the last SaveUsage survive a restart.
func (p Principal) LastUsed() time.Time {
	if p.use == nil {
		return time.Time{}
	}
	n := p.use.at.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// SaveUsage writes the last use of every key used since the last one on
// record, in one synced write.
func (t *Tenancy) SaveUsage() error {
	t.saveMu.Lock()
	defer t.saveMu.Unlock()
	var (
		kvs   []persist.KV
		uses  []*usage
		times []int64
	)
	t.mu.RLock()
	for _, p := range t.keys {
		at := p.use.at.Load()
		if at <= p.use.saved.Load() {
			continue // on record already, here or by another node
		}
		kvs = append(kvs, persist.KV{Key: []byte(usedPrefix + p.KeyID),
			Value: []byte(time.Unix(0, at).UTC().Format(time.RFC3339Nano))})
		uses, times = append(uses, p.use), append(times, at)
	}
	t.mu.RUnlock()
	if len(kvs) == 0 {
		return nil
	}
	if err := t.store.Put(kvs...); err != nil {
		return fmt.Errorf("save key usage: %w", err)
	}
	for i, u := range uses {
		storeMax(&u.saved, times[i])
	}
	return nil
}

// loadUsage restores the saved last uses; the keys are loaded.
func (t *Tenancy) loadUsage() error {
	return t.store.Scan([]byte(usedPrefix), func(k, v []byte) error {
		p, ok := t.keys[t.byID[string(k[len(usedPrefix):])]]
		if !ok {
			return nil // usage of a key not on record: nothing to show it on
		}
		if err := p.use.recorded(v); err != nil {
			return fmt.Errorf("load usage %q: %w", k, err)
		}
		return nil
	})
}
