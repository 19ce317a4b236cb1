package httpdoor

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestExpectContinueIsRefusedBeforeTheBody: a request sent with "Expect:
// 100-continue" that will be refused (no key: 401; a body declared over
// the limit: 413) is answered so at once, in JSON, and never told to go
// on; one that will be served is told 100 Continue, then answered.
func TestExpectContinueIsRefusedBeforeTheBody(t *testing.T) {
	e := newTCPDoorEnv(t, Config{MaxBody: 1 << 10})
	body := `{"name": "expect"}`
	for _, tc := range []struct {
		name, auth string
		length     int
		status     int
		code       string
	}{
		{"no key", "", len(body), 401, "unauthenticated"},
		{"an unknown key", "Bearer pl_nope", len(body), 401, "unauthenticated"},
		{"a body over the limit", "Bearer " + adminKey, 2 << 10, 413, "body_too_large"},
		{"served", "Bearer " + adminKey, len(body), 201, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := e.dial()
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			head := fmt.Sprintf("POST /api/v1/agents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n", tc.length)
			if tc.auth != "" {
				head += "Authorization: " + tc.auth + "\r\n"
			}
			if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.status == 201 {
				if resp.StatusCode != 100 {
					t.Fatalf("first answer %s, want 100 Continue", resp.Status)
				}
				if _, err := io.WriteString(conn, body); err != nil {
					t.Fatal(err)
				}
				if resp, err = http.ReadResponse(br, nil); err != nil {
					t.Fatal(err)
				}
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("answered %s %s, want %d", resp.Status, got, tc.status)
			}
			if tc.code == "" {
				return
			}
			var answer struct {
				Error struct {
					Code      string `json:"code"`
					RequestID string `json:"request_id"`
				}
			}
			if err := json.Unmarshal(got, &answer); err != nil || answer.Error.Code != tc.code ||
				answer.Error.RequestID != resp.Header.Get("X-Request-Id") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Errorf("answer %s %q (%v), want JSON with code %s and the request id", resp.Header, got, err, tc.code)
			}
		})
	}
}

// TestARefusedBodyStillBeingSentGetsItsAnswer: a body declared over the
// limit, sent whole without waiting (no Expect), is answered 413 in JSON,
// and a client that sends its whole body before it reads (as curl does)
// gets to read it: the door reads and drops the rest for a moment before
// it closes, rather than closing with the body unread (the kernel answers
// what comes after with a reset, and the client's send fails).
func TestARefusedBodyStillBeingSentGetsItsAnswer(t *testing.T) {
	e := newTCPDoorEnv(t, Config{MaxBody: 1 << 10})
	const size = 4 << 20
	for try := range 3 {
		conn, err := e.dial()
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		sent := make(chan error, 1)
		go func() {
			_, err := fmt.Fprintf(conn, "POST /api/v1/agents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", adminKey, size)
			if err == nil {
				_, err = conn.Write(make([]byte, size))
			}
			sent <- err
		}()
		// As curl does: the whole body first, then the answer.
		if err := <-sent; err != nil {
			conn.Close()
			t.Fatalf("try %d: sending the body: %v", try, err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			conn.Close()
			t.Fatalf("try %d: no answer: %v", try, err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 413 || !strings.Contains(string(got), `"body_too_large"`) {
			t.Errorf("try %d: %s %q %v, want 413 body_too_large", try, resp.Status, got, err)
		}
		conn.Close()
	}
}
