package tenancy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/plaudit/plaudit/persist"
)

// Apply takes in directory writes made elsewhere (by another node of a
// cluster, whose directory this node mirrors): the tenancy's records among
// kvs update what is kept in memory, and other keys are ignored. A key
// revoked elsewhere runs the OnRevoke hooks here too (its connections to
// this node close). Records that do not decode are skipped: the node that
// wrote them checked them.
func (t *Tenancy) Apply(kvs []persist.KV) {
	var revoked []Principal
	t.mu.Lock()
	for _, kv := range kvs {
		k := string(kv.Key)
		switch {
		case k == accountKey && kv.Value != nil:
			t.account = string(kv.Value)
		case strings.HasPrefix(k, wsPrefix):
			if kv.Value == nil {
				delete(t.workspaces, k[len(wsPrefix):])
			} else if ws, err := decodeWorkspace(kv.Value); err == nil {
				t.workspaces[ws.ID] = ws
			}
		case strings.HasPrefix(k, keyPrefix) && kv.Value != nil:
			var h [sha256.Size]byte
			if hexHash := k[len(keyPrefix):]; len(hexHash) != hex.EncodedLen(sha256.Size) {
				continue
			} else if _, err := hex.Decode(h[:], []byte(hexHash)); err != nil {
				continue
			}
			p, err := decodeKey(kv.Value)
			if err != nil {
				continue
			}
			p.hash = h
			old, known := t.keys[h]
			p.use = old.use
			if !known {
				p.use = new(usage)
			}
			if !p.RevokedAt.IsZero() && old.RevokedAt.IsZero() {
				revoked = append(revoked, p)
			}
			t.index(p)
		case strings.HasPrefix(k, usedPrefix) && kv.Value != nil:
			// Another node's save, or this node's own coming back.
			if p, ok := t.keys[t.byID[k[len(usedPrefix):]]]; ok {
				_ = p.use.recorded(kv.Value) // a record that does not parse shows nothing
			}
		}
	}
	hooks := t.onRevoke
	t.mu.Unlock()
	for _, p := range revoked {
		for _, fn := range hooks {
			fn(p)
		}
	}
}

// CatchUpOnMiss makes an API key that is not known here wait for fn, then
// be looked up again: in a cluster fn brings this node's copy of the
// directory up to date, so a key made on another node a moment ago
// authenticates here too. Concurrent misses share one call of fn. Set it
// before serving.
func (t *Tenancy) CatchUpOnMiss(fn func() error) { t.catchUp = fn }

// caughtUp returns once a call of catchUp that began after caughtUp was
// called has ended. Misses that arrive while a call runs share the next
// one, so a flood of unknown keys costs one call at a time, not one each.
func (t *Tenancy) caughtUp() {
	t.catchMu.Lock()
	defer t.catchMu.Unlock()
	if t.catchCond == nil {
		t.catchCond = sync.NewCond(&t.catchMu)
	}
	want := t.catchStarted + 1 // the first call to start from now on
	for t.catchDone < want {
		if t.catchRunning {
			t.catchCond.Wait()
			continue
		}
		t.catchRunning = true
		t.catchStarted++
		n := t.catchStarted
		t.catchMu.Unlock()
		_ = t.catchUp() // on failure the key is unknown as far as this node can tell
		t.catchMu.Lock()
		t.catchRunning, t.catchDone = false, n
		t.catchCond.Broadcast()
	}
}

// Refresh reads the tenancy's records from the store again, as Apply takes
// them in: for a node whose directory mirror applied writes between Load
// and the moment it began passing them to Apply.
func (t *Tenancy) Refresh() error {
	var kvs []persist.KV
	collect := func(k, v []byte) error {
		kvs = append(kvs, persist.KV{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)})
		return nil
	}
	if v, err := t.store.Get([]byte(accountKey)); err == nil {
		kvs = append(kvs, persist.KV{Key: []byte(accountKey), Value: v})
	}
	for _, prefix := range []string{wsPrefix, keyPrefix, usedPrefix} {
		if err := t.store.Scan([]byte(prefix), collect); err != nil {
			return err
		}
	}
	t.Apply(kvs)
	return nil
}
