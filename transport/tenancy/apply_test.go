package tenancy

import (
	"errors"
	"slices"
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

func TestOnlyARevocationTakenInRunsTheRevokeHooks(t *testing.T) {
	a, adminKey := openTenancy(t, t.TempDir(), "")
	b, _ := openTenancy(t, t.TempDir(), "")
	hooks := 0
	b.OnRevoke(func(Principal) { hooks++ })
	admin, err := a.Authenticate("Bearer " + adminKey)
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := a.CreateKey(admin, DefaultWorkspace, "ci")
	if err != nil {
		t.Fatal(err)
	}
	record := func() []persist.KV {
		var kvs []persist.KV
		err := a.store.Scan([]byte(keyPrefix), func(k, v []byte) error {
			kvs = append(kvs, persist.KV{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return kvs
	}
	b.Apply(record())
	b.Apply(record()) // the same records again
	if hooks != 0 {
		t.Fatalf("keys in use taken in ran the revoke hooks %d times", hooks)
	}
	if _, err := a.RevokeKey(admin, DefaultWorkspace, p.KeyID); err != nil {
		t.Fatal(err)
	}
	b.Apply(record())
	b.Apply(record())
	if hooks != 1 {
		t.Fatalf("one revocation taken in twice ran the hooks %d times, want once", hooks)
	}
}

// catchUpFrom makes ten's catch-up copy into its store the records of the
// source store that were there when the call began, as a directory mirror
// reaching the stream's end would; started receives once per call.
func catchUpFrom(t *testing.T, ten *Tenancy, src Store, started chan<- struct{}, hold <-chan struct{}) *atomic.Int32 {
	var calls atomic.Int32
	ten.CatchUpOnMiss(func() error {
		calls.Add(1)
		var kvs []persist.KV
		for _, prefix := range []string{wsPrefix, keyPrefix} {
			err := src.Scan([]byte(prefix), func(k, v []byte) error {
				kvs = append(kvs, persist.KV{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)})
				return nil
			})
			if err != nil {
				return err
			}
		}
		if started != nil {
			started <- struct{}{}
		}
		if hold != nil {
			<-hold
		}
		if err := ten.store.Put(kvs...); err != nil {
			return err
		}
		ten.Apply(kvs)
		return nil
	})
	return &calls
}

func TestEachMissCatchesUpWithKeysMadeBeforeIt(t *testing.T) {
	a, adminKey := openTenancy(t, t.TempDir(), "")
	b, _ := openTenancy(t, t.TempDir(), "")
	calls := catchUpFrom(t, b, a.store, nil, nil)
	admin, err := a.Authenticate("Bearer " + adminKey)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		_, secret, err := a.CreateKey(admin, DefaultWorkspace, "ci")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.AuthenticateKey(secret); err != nil {
			t.Fatalf("key %d, made before its first use on b: %v", i, err)
		}
		if n := calls.Load(); n != int32(i+1) {
			t.Fatalf("after %d misses, %d catch-up calls; want one each", i+1, n)
		}
	}
}

// Lists read on one node hold the workspaces and keys made on another
// before them, and a workspace made there is found here at once.
func TestListsHoldWhatOtherNodesMadeBeforeThem(t *testing.T) {
	a, adminKey := openTenancy(t, t.TempDir(), "")
	b, _ := openTenancy(t, t.TempDir(), "")
	catchUpFrom(t, b, a.store, nil, nil)
	admin, err := a.Authenticate("Bearer " + adminKey)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := a.CreateWorkspace(admin, "made-on-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Workspace(ws.ID); !ok {
		t.Fatalf("workspace %s made on a is not found on b", ws.ID)
	}
	key, _, err := a.CreateKey(admin, ws.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	bAdmin := admin // the same key, as every node knows its bootstrap key
	keys, err := b.Keys(bAdmin, ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].KeyID != key.KeyID {
		t.Errorf("b lists keys %v of %s, want the one made on a", keys, ws.ID)
	}
	second, err := a.CreateWorkspace(admin, "second")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(b.Workspaces(bAdmin), func(w Workspace) bool { return w.ID == second.ID }) {
		t.Errorf("b lists %v, want %s made on a among them", b.Workspaces(bAdmin), second.ID)
	}
}

// A miss that arrives while a catch-up runs waits for the next one: the
// running call began before the key was made.
func TestAMissDuringACatchUpWaitsForTheNext(t *testing.T) {
	a, adminKey := openTenancy(t, t.TempDir(), "")
	b, _ := openTenancy(t, t.TempDir(), "")
	started, hold := make(chan struct{}, 4), make(chan struct{})
	calls := catchUpFrom(t, b, a.store, started, hold)
	admin, err := a.Authenticate("Bearer " + adminKey)
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { _, err := b.AuthenticateKey("pl_unknown"); first <- err }()
	<-started // the first call has read the source
	_, secret, err := a.CreateKey(admin, DefaultWorkspace, "late")
	if err != nil {
		t.Fatal(err)
	}
	second := make(chan error, 1)
	go func() { _, err := b.AuthenticateKey(secret); second <- err }()
	time.Sleep(50 * time.Millisecond) // the second miss waits behind the first call
	close(hold)
	if err := <-first; !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("the unknown key: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("a key made while a catch-up ran, used during it: %v", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d catch-up calls, want 2", n)
	}
}

// TestALastUseOnAnotherNodeIsTakenIn: in a cluster each node saves the uses
// it saw and takes in the others' saves, keeping the later: a key used
// only through one node shows that use on every node once it is saved, and
// an older save arriving late lowers nothing.
func TestALastUseOnAnotherNodeIsTakenIn(t *testing.T) {
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time { return clock }
	open := func() (*Tenancy, *recordingStore, string) {
		s, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		rec := &recordingStore{Store: s}
		ten, key, err := Open(rec, "", now)
		if err != nil {
			t.Fatal(err)
		}
		return ten, rec, key
	}
	a, aRec, key := open()
	b, bRec, _ := open()
	stores := map[*Tenancy]*recordingStore{a: aRec, b: bRec}
	carry := func(from *recordingStore, to *Tenancy) {
		for _, kvs := range from.puts {
			if err := stores[to].Store.Put(kvs...); err != nil { // as the directory's mirror writes
				t.Fatal(err)
			}
			to.Apply(kvs)
		}
		from.puts = nil
	}
	bRec.puts = nil // its own start's
	carry(aRec, b)
	p, err := a.AuthenticateKey(key) // the key used through a only
	if err != nil {
		t.Fatal(err)
	}
	usedOnA := clock
	lastUsed := func(ten *Tenancy) time.Time { // read without a use
		q, ok := ten.Profile(p.ProfileID)
		if !ok {
			t.Fatal("the key is not known")
		}
		return q.LastUsed()
	}
	if err := a.SaveUsage(); err != nil {
		t.Fatal(err)
	}
	carry(aRec, b)
	if got := lastUsed(b); !got.Equal(usedOnA) {
		t.Fatalf("b shows the key last used %v, want a's %v", got, usedOnA)
	}
	if err := b.SaveUsage(); err != nil {
		t.Fatal(err)
	}
	if n := len(bRec.puts); n != 0 {
		t.Fatalf("b saved %d writes of a use it only took in", n)
	}
	// A later use through b is saved by b, and a takes it in; a's older
	// record, carried again, lowers it on neither.
	clock = clock.Add(time.Hour)
	if _, err := b.AuthenticateKey(key); err != nil {
		t.Fatal(err)
	}
	usedOnB := clock
	if err := b.SaveUsage(); err != nil {
		t.Fatal(err)
	}
	carry(bRec, a)
	older := []persist.KV{{Key: []byte(usedPrefix + p.KeyID), Value: []byte(usedOnA.Format(time.RFC3339Nano))}}
	for name, ten := range map[string]*Tenancy{"a": a, "b": b} {
		ten.Apply(older)
		if got := lastUsed(ten); !got.Equal(usedOnB) {
			t.Fatalf("%s shows the key last used %v, want b's %v", name, got, usedOnB)
		}
	}
}
