package tenancy

import (
	"testing"
	"time"

	"github.com/plaudit/plaudit/persist/pebblelog"
)

// TestLoadWritesNothingUntilBootstrap: a start that loads the tenancy and
// then fails leaves the store as it found it, so the next start bootstraps
// afresh and shows its admin key.
func TestLoadWritesNothingUntilBootstrap(t *testing.T) {
	dir := t.TempDir()
	store, err := pebblelog.Open(dir, pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ten, err := Load(store, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if ten.AccountID() != "" {
		t.Fatalf("Load made account %q", ten.AccountID())
	}
	if err := store.Close(); err != nil { // the failed start
		t.Fatal(err)
	}
	again, key := openTenancy(t, dir, "")
	if key == "" {
		t.Fatal("the start after a failed first start showed no admin key")
	}
	if p, err := again.AuthenticateKey(key); err != nil || !p.Admin {
		t.Fatalf("admin key = %+v, %v", p, err)
	}
}

// TestBootstrapKeyRecoversALostAdminKey: on a bootstrapped store a new
// PLAUDIT_BOOTSTRAP_KEY is added as an admin key, and nothing is shown.
func TestBootstrapKeyRecoversALostAdminKey(t *testing.T) {
	dir := t.TempDir()
	store, err := pebblelog.Open(dir, pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(store, "", time.Now); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	ten, shown := openTenancy(t, dir, "recovery-key")
	if shown != "" {
		t.Fatalf("showed %q", shown)
	}
	if p, err := ten.AuthenticateKey("recovery-key"); err != nil || !p.Admin {
		t.Fatalf("recovery key = %+v, %v", p, err)
	}
}

func TestLastUsed(t *testing.T) {
	dir := t.TempDir()
	store, err := pebblelog.Open(dir, pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := func() time.Time { return clock }
	ten, admin, err := Open(store, "", now)
	if err != nil {
		t.Fatal(err)
	}
	ap, _ := ten.AuthenticateKey(admin)
	created, secret, err := ten.CreateKey(ap, DefaultWorkspace, "ci")
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func(tn *Tenancy) time.Time {
		t.Helper()
		keys, err := tn.Keys(ap, DefaultWorkspace)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			if k.KeyID == created.KeyID {
				return k.LastUsed()
			}
		}
		t.Fatal("key not listed")
		return time.Time{}
	}
	first := clock
	steps := []struct {
		name    string
		advance time.Duration
		use     bool
		want    time.Time
	}{
		{"never used", 0, false, time.Time{}},
		{"first use", 0, true, first},
		{"a use within a second is not recorded", 500 * time.Millisecond, true, first},
		{"a use a second later is", 700 * time.Millisecond, true, first.Add(1200 * time.Millisecond)},
		{"time passing alone changes nothing", time.Hour, false, first.Add(1200 * time.Millisecond)},
	}
	for _, s := range steps {
		clock = clock.Add(s.advance)
		if s.use {
			if _, err := ten.AuthenticateKey(secret); err != nil {
				t.Fatal(err)
			}
		}
		if got := lastUsed(ten); !got.Equal(s.want) {
			t.Fatalf("%s: last used %v, want %v", s.name, got, s.want)
		}
	}
	saved := lastUsed(ten)
	if err := ten.SaveUsage(); err != nil {
		t.Fatal(err)
	}
	// A use after the last save is lost by a stop without one.
	clock = clock.Add(time.Minute)
	if _, err := ten.AuthenticateKey(secret); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	again, _ := openTenancy(t, dir, "")
	if got := lastUsed(again); !got.Equal(saved) {
		t.Fatalf("after reopen: last used %v, want the saved %v", got, saved)
	}
}
