package natsdoor

import (
	"strings"
	"testing"
)

// TestConnectionAccountNamesSignedInACluster: with an IdentityKey, a
// connection account's name reads back as its workspace and key on any
// server holding the same key; a name with another key's MAC, a changed
// part, or no MAC reads as nothing, and without a key nothing is read.
func TestConnectionAccountNamesSignedInACluster(t *testing.T) {
	a := &Embedded{IdentityKey: IdentityKey("route-secret")}
	b := &Embedded{IdentityKey: IdentityKey("route-secret")}
	other := &Embedded{IdentityKey: IdentityKey("another secret")}
	for _, tc := range []struct{ ws, n, key string }{
		{"default", "abcdefgh1", "key_01JAAAAAAAAAAAAAAAAAAAAAAA"},
		{"wsa-c1", "zz9", "key_c"}, // a workspace id shaped like an account name
		{"ws_01JBBBBBBBBBBBBBBBBBBBBBBB", "t42", "key_x"},
	} {
		name := a.connAccountName(tc.ws, tc.n, tc.key)
		if ws, key, ok := b.parseConnAccount(name); !ok || ws != tc.ws || key != tc.key {
			t.Errorf("%s read back as %q, %q, %v; want %q, %q", name, ws, key, ok, tc.ws, tc.key)
		}
		if _, _, ok := other.parseConnAccount(name); ok {
			t.Errorf("%s read back under another cluster's key", name)
		}
		if _, _, ok := (&Embedded{}).parseConnAccount(name); ok {
			t.Errorf("%s read back by a server of no cluster", name)
		}
	}
	signed := a.connAccountName("default", "n1", "key_a")
	flipped := "0"
	if signed[len(signed)-1] == '0' {
		flipped = "1"
	}
	forged := []string{
		signed[:len(signed)-1] + flipped,
		"default-cn1-key_admin-" + a.accountMAC("default", "n1", "key_a"),
		"wsb-cn1-key_a-" + a.accountMAC("default", "n1", "key_a"),
		"default-cn1-key_a",
		"PLAUDIT", "$G", "",
	}
	for _, name := range forged {
		if ws, key, ok := b.parseConnAccount(name); ok {
			t.Errorf("%q read back as %q, %q", name, ws, key)
		}
	}
}

// FuzzParseConnAccount: no name parses but one a server of the cluster
// signed, and parsing never panics.
func FuzzParseConnAccount(f *testing.F) {
	e := &Embedded{IdentityKey: IdentityKey("route-secret")}
	for _, s := range []string{e.connAccountName("default", "t1", "key_a"), "default-ct1-key_a-00", "-c--", "a-c-b-c", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		ws, key, ok := e.parseConnAccount(name)
		if !ok {
			return
		}
		rest, found := strings.CutPrefix(name, ws+"-c")
		i := strings.LastIndex(rest, "-"+key+"-")
		if !found || i < 0 || e.connAccountName(ws, rest[:i], key) != name {
			t.Fatalf("%q parsed as workspace %q, key %q, which do not name it", name, ws, key)
		}
	})
}
