package tenancy

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

func openTenancy(t *testing.T, dir, bootstrap string) (*Tenancy, string) {
	t.Helper()
	store, err := pebblelog.Open(dir, pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ten, key, err := Open(store, bootstrap, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return ten, key
}

func TestFirstStartMakesAccountWorkspaceAndAdminKey(t *testing.T) {
	ten, key := openTenancy(t, t.TempDir(), "")
	if !strings.HasPrefix(ten.AccountID(), "account_") || !strings.HasPrefix(key, "pl_") || len(key) < 40 {
		t.Fatalf("account %q, key %q", ten.AccountID(), key)
	}
	p, err := ten.Authenticate("Bearer " + key)
	if err != nil || !p.Admin || p.Home != DefaultWorkspace || !strings.HasPrefix(p.ProfileID, "profile_") {
		t.Fatalf("admin principal = %+v, %v", p, err)
	}
	if _, ok := ten.Workspace(DefaultWorkspace); !ok {
		t.Fatal("no default workspace")
	}
}

// TestBearerScheme: a header authenticates when it names the Bearer scheme,
// in any case, then one or more spaces and the key (RFC 7235); anything
// else is ErrUnauthenticated.
func TestBearerScheme(t *testing.T) {
	ten, key := openTenancy(t, t.TempDir(), "")
	for _, tc := range []struct {
		header string
		ok     bool
	}{
		{"Bearer " + key, true}, {"bearer " + key, true}, {"BEARER " + key, true}, {"Bearer  " + key, true},
		{"Bearer ", false}, {"Bearer", false}, {"", false}, {key, false}, {"Bearer " + key + "x", false},
		{"Bearer\t" + key, false}, {"Basic " + key, false}, {"Bearer" + key, false},
	} {
		p, err := ten.AuthenticateHeader([]byte(tc.header))
		if tc.ok && (err != nil || !p.Admin) {
			t.Errorf("%q: %+v, %v; want the admin key", tc.header, p, err)
		}
		if !tc.ok && !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%q: %+v, %v; want %v", tc.header, p, err, ErrUnauthenticated)
		}
	}
}

func TestBootstrapKeyIsNotPrinted(t *testing.T) {
	ten, printed := openTenancy(t, t.TempDir(), "my-admin-key")
	if printed != "" {
		t.Fatalf("a given bootstrap key was printed back: %q", printed)
	}
	if p, err := ten.Authenticate("Bearer my-admin-key"); err != nil || !p.Admin {
		t.Fatalf("bootstrap key: %+v, %v", p, err)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	store, err := pebblelog.Open(dir, pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ten, admin, err := Open(store, "", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := ten.Authenticate("Bearer " + admin)
	ws, err := ten.CreateWorkspace(p, "team")
	if err != nil {
		t.Fatal(err)
	}
	wp, secret, err := ten.CreateKey(p, ws.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	account := ten.AccountID()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	again, printed := openTenancy(t, dir, "")
	if printed != "" || again.AccountID() != account {
		t.Fatalf("reopen printed %q, account %q (was %q)", printed, again.AccountID(), account)
	}
	got, err := again.Authenticate("Bearer " + secret)
	if err != nil || got.KeyID != wp.KeyID || got.Home != ws.ID || got.Admin {
		t.Fatalf("workspace key after reopen = %+v, %v", got, err)
	}
	if _, err := again.Authenticate("Bearer " + admin); err != nil {
		t.Fatalf("admin key after reopen: %v", err)
	}
	if _, ok := again.Workspace(ws.ID); !ok {
		t.Fatal("workspace lost on reopen")
	}
}

func TestAuthorisation(t *testing.T) {
	ten, admin := openTenancy(t, t.TempDir(), "")
	ap, _ := ten.Authenticate("Bearer " + admin)
	ws, _ := ten.CreateWorkspace(ap, "team")
	wp, _, err := ten.CreateKey(ap, ws.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"unknown key", func() error { _, err := ten.Authenticate("Bearer pl_nope"); return err }(), ErrUnauthenticated},
		{"no bearer", func() error { _, err := ten.Authenticate(admin); return err }(), ErrUnauthenticated},
		{"empty", func() error { _, err := ten.Authenticate(""); return err }(), ErrUnauthenticated},
		{"non-admin creates a workspace", func() error { _, err := ten.CreateWorkspace(wp, "x"); return err }(), ErrForbidden},
		{"key for another workspace", func() error { _, _, err := ten.CreateKey(wp, DefaultWorkspace, "x"); return err }(), ErrForbidden},
		{"key for no workspace", func() error { _, _, err := ten.CreateKey(ap, "ws_missing", "x"); return err }(), engine.ErrNotFound},
		{"nameless workspace", func() error { _, err := ten.CreateWorkspace(ap, ""); return err }(), field.ErrInvalid},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, c.err, c.want)
		}
	}
	if got := ten.Workspaces(wp); len(got) != 1 || got[0].ID != ws.ID {
		t.Errorf("a workspace key sees %v", got)
	}
	if got := ten.Workspaces(ap); len(got) != 2 {
		t.Errorf("the admin sees %v", got)
	}
}

func TestRevokedKeyAuthenticatesNoMore(t *testing.T) {
	dir := t.TempDir()
	store, err := pebblelog.Open(dir, pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ten, _, err := Open(store, "boot-key", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := ten.Authenticate("Bearer boot-key")
	ws, _ := ten.CreateWorkspace(admin, "team")
	wp, secret, _ := ten.CreateKey(admin, ws.ID, "ci")
	other, _, _ := ten.CreateKey(admin, ws.ID, "other")

	cases := []struct {
		name string
		by   Principal
		ws   string
		key  string
		want error
	}{
		{"a key of another workspace", wp, DefaultWorkspace, admin.KeyID, ErrForbidden},
		{"a key not of this workspace", admin, ws.ID, admin.KeyID, engine.ErrNotFound},
		{"an unknown key", admin, ws.ID, "key_nope", engine.ErrNotFound},
		{"no such workspace", admin, "ws_nope", wp.KeyID, engine.ErrNotFound},
	}
	for _, c := range cases {
		if _, err := ten.RevokeKey(c.by, c.ws, c.key); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	// A workspace key may revoke a key of its own workspace, itself included.
	got, err := ten.RevokeKey(other, ws.ID, wp.KeyID)
	if err != nil || got.RevokedAt.IsZero() {
		t.Fatalf("revoke = %+v, %v", got, err)
	}
	if _, err := ten.AuthenticateKey(secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("revoked key authenticates: %v", err)
	}
	if _, ok := ten.Key(wp.KeyID); ok {
		t.Fatal("Key finds a revoked key")
	}
	if again, err := ten.RevokeKey(admin, ws.ID, wp.KeyID); err != nil || !again.RevokedAt.Equal(got.RevokedAt) {
		t.Fatalf("revoking again = %+v, %v", again, err)
	}
	if _, err := ten.RevokeKey(other, DefaultWorkspace, admin.KeyID); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a workspace key revoked an admin key: %v", err)
	}
	if _, err := ten.RevokeKey(admin, DefaultWorkspace, admin.KeyID); err != nil {
		t.Fatal(err)
	}
	keys, err := ten.Keys(admin, ws.ID)
	if err != nil || len(keys) != 2 {
		t.Fatalf("keys of the workspace = %+v, %v", keys, err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	// Revocations survive a restart, and a revoked bootstrap key given again
	// is not made anew.
	again, _ := openTenancy(t, dir, "boot-key")
	if _, err := again.AuthenticateKey(secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("revoked key authenticates after reopen: %v", err)
	}
	if _, err := again.Authenticate("Bearer boot-key"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("a revoked bootstrap key came back: %v", err)
	}
}

// TestListsComeInIDOrder: workspaces and keys are listed by id (their
// creation order: ids are ULIDs), the same order on every call.
func TestListsComeInIDOrder(t *testing.T) {
	ten, key := openTenancy(t, t.TempDir(), "")
	admin, err := ten.Authenticate("Bearer " + key)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if _, err := ten.CreateWorkspace(admin, fmt.Sprintf("ws%d", i)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := ten.CreateKey(admin, DefaultWorkspace, fmt.Sprintf("k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	wss := ten.Workspaces(admin)
	if len(wss) != 7 || !slices.IsSortedFunc(wss, func(a, b Workspace) int { return strings.Compare(a.ID, b.ID) }) {
		t.Fatalf("workspaces not in id order: %+v", wss)
	}
	keys, err := ten.Keys(admin, DefaultWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 7 || !slices.IsSortedFunc(keys, func(a, b Principal) int { return strings.Compare(a.KeyID, b.KeyID) }) {
		t.Fatalf("keys not in id order: %+v", keys)
	}
}

// TestNamesUpTo200Characters: a workspace's and a key's name may be 1 to
// 200 bytes long, both bounds included, with no control character (the
// CLI prints names in tables, where an escape sequence or a newline could
// forge a row); other characters, spaces and emoji included, are fine.
func TestNamesUpTo200Characters(t *testing.T) {
	ten, key := openTenancy(t, t.TempDir(), "")
	admin, err := ten.Authenticate("Bearer " + key)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{{"", false}, {"a", true}, {strings.Repeat("n", 200), true}, {strings.Repeat("n", 201), false},
		{"ci runner é 🚀", true}, {"evil\x1b[31mRED", false}, {"a\nkey_FAKE  admin", false}, {"tab\there", false},
		{"c1 \u0085", false}, {"del\x7f", false}} {
		_, wsErr := ten.CreateWorkspace(admin, c.name)
		_, _, keyErr := ten.CreateKey(admin, DefaultWorkspace, c.name)
		for what, err := range map[string]error{"workspace": wsErr, "key": keyErr} {
			if (err == nil) != c.ok {
				t.Errorf("%s named %q: err = %v, want ok=%v", what, c.name, err, c.ok)
			}
		}
	}
}

// TestStoredKeyWithABadHashIsRefusedOnOpen: a key record whose name is not
// the 64 hex digits of a SHA-256 (short, long, or not hex: a damaged store)
// makes Open fail with the key named, rather than panic or index a key
// under a hash no secret has.
func TestStoredKeyWithABadHashIsRefusedOnOpen(t *testing.T) {
	good := strings.Repeat("ab", sha256.Size)
	for _, tc := range []struct{ name, hash string }{
		{"short", good[:62]},
		{"long", good + "ab"},
		{"not hex", good[:63] + "z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store, err := pebblelog.Open(dir, pebblelog.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			if _, _, err := Open(store, "", time.Now); err != nil {
				t.Fatal(err)
			}
			var record []byte
			err = store.Scan([]byte(keyPrefix), func(_, v []byte) error {
				record = append([]byte(nil), v...)
				return nil
			})
			if err != nil || record == nil {
				t.Fatalf("no stored key record: %v", err)
			}
			if err := store.Put(persist.KV{Key: []byte(keyPrefix + tc.hash), Value: record}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := Open(store, "", time.Now); !errors.Is(err, errBadKeyHash) || !strings.Contains(err.Error(), tc.hash) {
				t.Fatalf("Open with a key named %q: %v; want errBadKeyHash naming it", tc.hash, err)
			}
		})
	}
}
