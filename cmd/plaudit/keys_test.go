package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/plaudit/plaudit/server"
)

const keysTestAdmin = "pl_keys_test_admin_0123456789abcdef"

// startServer runs a real server in a temp dir on loopback ports.
func startServer(t *testing.T) *server.Server {
	t.Helper()
	s, err := server.Start(server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0",
		NATSListen: "127.0.0.1:0", BootstrapKey: keysTestAdmin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// status is the HTTP status of GET /v1/workspaces with key.
func status(t *testing.T, s *server.Server, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+s.HTTPAddr()+"/v1/workspaces", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// row is the table line of the key named name.
func row(t *testing.T, table, name string) string {
	t.Helper()
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[1] == name {
			return l
		}
	}
	t.Fatalf("no row for %q in\n%s", name, table)
	return ""
}

// TestKeysCommands: create, list and revoke through `plaudit keys` against
// a running server; the revoked key is refused on HTTP and its open NATS
// connection is closed.
func TestKeysCommands(t *testing.T) {
	s := startServer(t)
	unsetenv(t, "PLAUDIT_SERVER")
	unsetenv(t, "PLAUDIT_KEY")
	keys := func(t *testing.T, args ...string) string {
		t.Helper()
		code, stdout, stderr := runArgs(append([]string{"keys", "--server", "http://" + s.HTTPAddr(), "--key", keysTestAdmin}, args...)...)
		if code != 0 {
			t.Fatalf("keys %v: exit %d: %s", args, code, stderr)
		}
		return stdout
	}

	out := keys(t, "create", "ci-runner")
	secret := regexp.MustCompile(`key \(shown once, keep it\): (pl_\S+)`).FindStringSubmatch(out)
	if secret == nil {
		t.Fatalf("create printed no secret:\n%s", out)
	}
	id := strings.Fields(row(t, out, "ci-runner"))[0]
	if !strings.HasPrefix(id, "key_") {
		t.Fatalf("key id %q", id)
	}
	if l := row(t, keys(t, "list"), "ci-runner"); !strings.Contains(l, "never") || !strings.Contains(l, " workspace ") {
		t.Fatalf("an unused workspace key's row: %q", l)
	}

	if got := status(t, s, secret[1]); got != 200 {
		t.Fatalf("the new key: %d", got)
	}
	listed := keys(t, "list")
	if l := row(t, listed, "ci-runner"); strings.Contains(l, "never") || !strings.Contains(l, time.Now().UTC().Format("2006-01-02")) {
		t.Fatalf("a used key's row: %q", l)
	}
	if strings.Contains(listed, secret[1]) || strings.Contains(listed, keysTestAdmin) {
		t.Fatal("list shows a secret")
	}

	var asJSON struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal([]byte(keys(t, "list", "--json")), &asJSON); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range asJSON.Items {
		if k["id"] == id {
			found = true
			if k["key"] != nil || k["last_used_at"] == nil {
				t.Fatalf("--json row %v", k)
			}
		}
	}
	if !found {
		t.Fatalf("--json lists no %s: %+v", id, asJSON)
	}

	open, err := nats.Connect(s.NATSURL(), nats.Token(secret[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if l := row(t, keys(t, "revoke", id), "ci-runner"); strings.HasSuffix(strings.TrimSpace(l), "-") {
		t.Fatalf("revoke's row shows no revocation: %q", l)
	}
	if got := status(t, s, secret[1]); got != 401 {
		t.Fatalf("the revoked key: %d, want 401", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for open.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if open.IsConnected() {
		t.Fatal("the revoked key's NATS connection is still open")
	}

	// Revoking the last admin key says what that means and how to get
	// one back; it is done all the same.
	l := row(t, keys(t, "list"), "admin")
	if !strings.Contains(l, " admin ") {
		t.Fatalf("the admin key's row: %q", l)
	}
	admin := strings.Fields(l)[0]
	code, _, stderr := runArgs("keys", "--server", "http://"+s.HTTPAddr(), "--key", keysTestAdmin, "revoke", admin)
	if code != 0 || !strings.Contains(stderr, "last admin key") || !strings.Contains(stderr, "PLAUDIT_BOOTSTRAP_KEY") {
		t.Fatalf("revoking the last admin key: exit %d, stderr %q; want 0 and a warning", code, stderr)
	}
	if got := status(t, s, keysTestAdmin); got != 401 {
		t.Fatalf("the revoked admin key: %d, want 401", got)
	}
}

// TestKeysCommandsReadTheEnvironment: $PLAUDIT_SERVER and $PLAUDIT_KEY
// stand for --server and --key; a wrong key is the server's 401, exit 1.
func TestKeysCommandsReadTheEnvironment(t *testing.T) {
	s := startServer(t)
	t.Setenv("PLAUDIT_SERVER", "http://"+s.HTTPAddr())
	cases := []struct {
		name, key string
		code      int
		want      string
	}{
		{"an admin key", keysTestAdmin, 0, "admin"},
		{"a wrong key", "pl_wrong", 1, "401 Unauthorized: missing or unknown API key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PLAUDIT_KEY", c.key)
			code, stdout, stderr := runArgs("keys", "list")
			if code != c.code || !strings.Contains(stdout+stderr, c.want) {
				t.Fatalf("exit %d, want %d and %q\nstdout: %s\nstderr: %s", code, c.code, c.want, stdout, stderr)
			}
		})
	}
}

// TestKeysTableQuotesUnprintableNames: a name holding an escape sequence
// or a newline (stored before names were checked) is printed quoted, on
// its own row, so it cannot colour the terminal or forge a row.
func TestKeysTableQuotesUnprintableNames(t *testing.T) {
	var out bytes.Buffer
	keys := []apiKey{{ID: "key_1", Name: "evil\x1b[31mRED\nkey_FAKE  admin  admin"}, {ID: "key_2", Name: "ci runner é"}}
	if err := writeKeys(&out, keys); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || strings.ContainsRune(out.String(), '\x1b') {
		t.Fatalf("table:\n%s\nwant a header and two rows, no escape character", out.String())
	}
	if !strings.Contains(lines[1], `"evil\x1b[31mRED\nkey_FAKE  admin  admin"`) || !strings.Contains(lines[2], "ci runner é ") {
		t.Errorf("rows %q, %q: want the first name quoted, the second as it is", lines[1], lines[2])
	}
}
