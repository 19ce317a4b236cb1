package tenancy

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// recordingStore passes writes to a store and keeps them, so a test can
// carry them to another node's store as a cluster's directory would.
type recordingStore struct {
	Store
	puts [][]persist.KV
}

func (s *recordingStore) Put(kvs ...persist.KV) error {
	s.puts = append(s.puts, kvs)
	return s.Store.Put(kvs...)
}

func TestWritesMadeOnAnotherNodeAreTakenIn(t *testing.T) {
	aStore, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = aStore.Close() })
	rec := &recordingStore{Store: aStore}
	a, adminKey, err := Open(rec, "", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := openTenancy(t, t.TempDir(), "")
	revokedOnB := map[string]bool{}
	b.OnRevoke(func(p Principal) { revokedOnB[p.KeyID] = true })
	carry := func() {
		for _, kvs := range rec.puts {
			if err := b.store.Put(kvs...); err != nil {
				t.Fatal(err)
			}
			b.Apply(kvs)
		}
		rec.puts = nil
	}
	admin, err := a.Authenticate("Bearer " + adminKey)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := a.CreateWorkspace(admin, "team")
	if err != nil {
		t.Fatal(err)
	}
	p, secret, err := a.CreateKey(admin, ws.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	carry()
	if _, ok := b.Workspace(ws.ID); !ok {
		t.Fatal("b does not know the workspace a created")
	}
	got, err := b.AuthenticateKey(secret)
	if err != nil || got.KeyID != p.KeyID || got.Home != ws.ID {
		t.Fatalf("b authenticates a's new key as %+v, %v", got, err)
	}
	if _, err := b.AuthenticateKey(adminKey); err != nil {
		t.Fatalf("b authenticates a's admin key: %v", err)
	}
	used := got.LastUsed()
	if _, err := a.RevokeKey(admin, ws.ID, p.KeyID); err != nil {
		t.Fatal(err)
	}
	carry()
	if _, err := b.AuthenticateKey(secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("b authenticates a key a revoked: %v", err)
	}
	if !revokedOnB[p.KeyID] {
		t.Error("b's OnRevoke hooks did not run for the key a revoked")
	}
	bp, _ := b.Profile(p.ProfileID)
	if bp.LastUsed() != used {
		t.Errorf("taking in the revocation lost the key's last use on b: %v, want %v", bp.LastUsed(), used)
	}
}

func TestRefreshTakesInWhatTheStoreGotBehindTheTenancysBack(t *testing.T) {
	a, adminKey := openTenancy(t, t.TempDir(), "")
	b, _ := openTenancy(t, t.TempDir(), "")
	admin, err := a.Authenticate("Bearer " + adminKey)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := a.CreateKey(admin, DefaultWorkspace, "ci")
	if err != nil {
		t.Fatal(err)
	}
	// Every tenancy record of a, written into b's store directly.
	err = a.store.Scan([]byte("tenancy/"), func(k, v []byte) error {
		return b.store.Put(persist.KV{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AuthenticateKey(secret); err == nil {
		t.Fatal("b authenticated a key before taking it in")
	}
	if err := b.Refresh(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AuthenticateKey(secret); err != nil {
		t.Fatalf("after Refresh: %v", err)
	}
	if b.AccountID() != a.AccountID() {
		t.Errorf("b's account %s after Refresh, want a's %s", b.AccountID(), a.AccountID())
	}
}

func TestAnUnknownKeyWaitsForTheDirectoryToCatchUpOnce(t *testing.T) {
	ten, _ := openTenancy(t, t.TempDir(), "")
	var calls atomic.Int32
	release := make(chan struct{})
	ten.CatchUpOnMiss(func() error {
		calls.Add(1)
		<-release
		return nil
	})
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := ten.AuthenticateKey("pl_unknown"); !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("unknown key: %v", err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // the misses arrive while the first call runs
	close(release)
	wg.Wait()
	// The first miss's call, and one more for those that came during it
	// (a few more if the scheduler held some back): far from one each.
	if n := calls.Load(); n < 1 || n >= 10 {
		t.Fatalf("20 misses made %d catch-up calls, want them to share a few", n)
	}
}
