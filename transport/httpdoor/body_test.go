package httpdoor

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKeyCheckedBeforeBody: a request without a valid key is answered 401
// in its path's error shape as soon as its headers are in; the body it
// declares is not waited for (5 bytes of a declared 1 MiB arrive, then
// nothing), and the connection is closed after the answer, since the rest
// of that body is never read.
func TestKeyCheckedBeforeBody(t *testing.T) {
	e := newDoorEnv(t, Config{BodyTimeout: 10 * time.Second}, true)
	for _, tc := range []struct {
		name, auth, path string
		sh               shape
		code             any
	}{
		{"no key on /api/v1", "", "/api/v1/agents", jsonShape, "unauthenticated"},
		{"unknown key on /api/v1", "Authorization: Bearer pl_no_such_key\r\n", "/api/v1/agents", jsonShape, "unauthenticated"},
		{"no key on /v1/workspaces", "", "/v1/workspaces", rpcShape, 16.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := e.raw(t, "POST "+tc.path+" HTTP/1.1\r\nHost: plaudit.test\r\nContent-Type: application/json\r\n"+tc.auth+
				"Content-Length: 1048576\r\n\r\n{\"a\":")
			expectError(t, r, 401, tc.sh, tc.code, "")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("answered after %v: the door waited for the body", d)
			}
			if !r.close {
				t.Error("the connection stays open over an unread body (no Connection: close)")
			}
		})
	}
}

// TestBodyBudget: bodies being read take their declared size from a budget
// shared by all connections. One that does not fit is refused unread with
// 503 overloaded and Retry-After, in the error shape; bodies small enough
// to have arrived with their headers take nothing from it. A body gives
// its share back once read or failed: when its client goes away mid-body,
// and when it misses its deadline (then it is answered 400).
func TestBodyBudget(t *testing.T) {
	const maxBody = 32 << 10
	// The held bodies must outlast the steps below, or their shares come
	// back early: at 1 s, a loaded CI machine took longer, and the budget
	// was never spent again.
	const bodyTimeout = 5 * time.Second
	e := newDoorEnv(t, Config{MaxBody: maxBody, BodyBudget: 2 * maxBody, BodyTimeout: bodyTimeout}, true)
	// hold starts a request whose body (maxBody declared) stalls after
	// more than fasthttp's pre-read, so that the door is reading it.
	hold := func(t *testing.T) net.Conn {
		t.Helper()
		c, err := e.dial()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_, err = io.WriteString(c, "POST /api/v1/agents HTTP/1.1\r\nHost: plaudit.test\r\nAuthorization: Bearer "+adminKey+
			"\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(maxBody)+"\r\n\r\n{"+strings.Repeat(" ", 2*preRead))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	large := `{"name": "large"` + strings.Repeat(" ", maxBody-len(`{"name": "large"}`)) + "}"
	post := func(t *testing.T, body string) response {
		return e.do(t, adminKey, "POST", "/api/v1/agents", body, nil)
	}
	// until posts large until it is answered status.
	until := func(t *testing.T, status int) response {
		t.Helper()
		// A bound on a wait, not a timing assertion: a loaded machine
		// reads the held bodies' first bytes late.
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := post(t, large)
			if r.status == status || time.Now().After(deadline) {
				return r
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	first, second := hold(t), hold(t)
	r := until(t, 503)
	expectError(t, r, 503, jsonShape, "overloaded", "request bodies")
	if ra := r.header.Get("Retry-After"); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
	if r := post(t, `{"name": "small"}`); r.status != 201 {
		t.Errorf("a small body while the budget is spent: %d %s, want 201", r.status, r.body)
	}

	first.Close()
	if r := until(t, 201); r.status != 201 {
		t.Fatalf("a client that went away mid-body kept its share: %d %s", r.status, r.body)
	}

	third := hold(t)
	if r := until(t, 503); r.status != 503 {
		t.Fatalf("budget not spent again: %d %s", r.status, r.body)
	}
	for _, c := range []net.Conn{second, third} {
		_ = c.SetReadDeadline(time.Now().Add(bodyTimeout + 5*time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("a body past its deadline: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		expectError(t, e.check(t, response{line: resp.Proto + " " + resp.Status, status: resp.StatusCode, header: resp.Header, body: b}),
			400, jsonShape, "invalid_request", "in time")
	}
	// Both answers were written after their shares were given back.
	if r := post(t, large); r.status != 201 {
		t.Errorf("bodies that missed their deadline kept their shares: %d %s", r.status, r.body)
	}
}
