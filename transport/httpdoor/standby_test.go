package httpdoor

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// sendRaw writes one raw request to addr and reads its answer.
func sendRaw(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return resp
}

func TestAStandbyAnswers503UntilTheDoorTakesItsListenerOver(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sb, err := StartStandby(ln, "joining cluster prod", nil)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	for _, tc := range []struct {
		name, raw string
		want      string // a member the body must hold
	}{
		{"health", "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", `"status":"starting"`},
		{"api, no key", "GET /api/v1/agents HTTP/1.1\r\nHost: x\r\n\r\n", `"code":"unavailable"`},
		// A body is never read: the answer comes before it is sent.
		{"api, a body announced", "POST /api/v1/agents HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{",
			`"message":"the server is starting: joining cluster prod"`},
		{"seed 004's shape", "GET /v1/workspaces HTTP/1.1\r\nHost: x\r\n\r\n", `"code":14`},
		{"a malformed head", "GET\r\n\r\n", `"code":"unavailable"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := sendRaw(t, addr, tc.raw)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 503 || !strings.Contains(string(body), tc.want) || !json.Valid(body) {
				t.Fatalf("%d %s, want 503 holding %s", resp.StatusCode, body, tc.want)
			}
			if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("X-Request-Id") == "" ||
				resp.Header.Get("Content-Type") != "application/json" || !resp.Close {
				t.Errorf("headers %v: want Retry-After 1, a request id, JSON, Connection: close", resp.Header)
			}
		})
	}
	sb.Stop()
	sb.Stop() // a second Stop changes nothing
	// The listener is still open, its deadline cleared: the door's server
	// accepts on it.
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString("door") }}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown()
	time.Sleep(50 * time.Millisecond) // past any deadline left set
	resp := sendRaw(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	if body, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(body) != "door" {
		t.Fatalf("after Stop: %d %s, want the door's 200", resp.StatusCode, body)
	}
}

func TestAStandbyNeedsAListenerItCanHandOver(t *testing.T) {
	if _, err := StartStandby(nonTCPListener{}, "x", nil); err == nil {
		t.Fatal("a listener without SetDeadline was taken")
	}
}

type nonTCPListener struct{ net.Listener }
