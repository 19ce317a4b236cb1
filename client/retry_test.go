package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/nats-io/nats.go"

	"github.com/plaudit/plaudit/client"
	"github.com/plaudit/plaudit/internal/freeport"
	"github.com/plaudit/plaudit/persist/faultfs"
	"github.com/plaudit/plaudit/server"
)

// lossyProxy is a TCP proxy in front of an HTTP server that loses the
// answer of the first connection it serves: it passes the request on, waits
// for the first bytes of the answer, then closes both sides, as a network
// failing after the server acted would. Later connections pass whole. It
// records the Idempotency-Key of every request it passes.
type lossyProxy struct {
	ln, target string
	mu         sync.Mutex
	keys       []string
	firstID    string // X-Request-Id of the lost answer
	conns      int
}

var (
	keyHeader = regexp.MustCompile(`(?i)\r\nIdempotency-Key: ([^\r]*)\r\n`)
	idHeader  = regexp.MustCompile(`(?i)\r\nX-Request-Id: ([^\r]*)\r\n`)
)

func newLossyProxy(t *testing.T, target string) *lossyProxy {
	return listenLossy(t, target, (*lossyProxy).serve)
}

// listenLossy accepts connections for a proxy to target, each served by
// serve, told whether it is the first (the one to lose an answer on).
func listenLossy(t *testing.T, target string, serve func(p *lossyProxy, client net.Conn, lose bool)) *lossyProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	p := &lossyProxy{ln: ln.Addr().String(), target: target}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns++
			first := p.conns == 1
			p.mu.Unlock()
			go serve(p, conn, first)
		}
	}()
	return p
}

func (p *lossyProxy) serve(client net.Conn, lose bool) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() { _, _ = io.Copy(server, &recorder{r: client, p: p}) }()
	if !lose {
		_, _ = io.Copy(client, server)
		return
	}
	buf := make([]byte, 4096)
	n, _ := io.ReadAtLeast(server, buf, 1) // the server answered: it acted
	if m := idHeader.FindSubmatch(buf[:n]); m != nil {
		p.mu.Lock()
		p.firstID = string(m[1])
		p.mu.Unlock()
	}
}

// recorder reads a client's bytes and records the Idempotency-Keys in
// them (a request's headers arrive in one read from loopback).
type recorder struct {
	r io.Reader
	p *lossyProxy
}

func (r *recorder) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	for _, m := range keyHeader.FindAllSubmatch(b[:n], -1) {
		r.p.mu.Lock()
		r.p.keys = append(r.p.keys, string(m[1]))
		r.p.mu.Unlock()
	}
	return n, err
}

// TestLostAnswerRetriedUnderTheSameKey: the first answer of each write is
// lost after the server acted; the client retries under the same
// Idempotency-Key, gets the first answer replayed (its request id too), and
// the write is done once. A read whose answer is lost is retried too.
func TestLostAnswerRetriedUnderTheSameKey(t *testing.T) {
	s := startServer(t, server.Config{})
	h, agent, _ := setup(t, s)
	ctx := context.Background()
	run, err := h.Select(ctx, agent, client.SelectRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		write bool
		call  func(c *client.Client) (requestID string, err error)
		check func(t *testing.T)
	}{
		{"signal", true, func(c *client.Client) (string, error) {
			sig, err := c.Signal(ctx, agent, client.SignalRequest{Kind: "human.rating", Value: 1, RunID: run.ID})
			return sig.RequestID, err
		}, func(t *testing.T) {
			if n := signalCount(t, h, agent, run.ID); n != 1 {
				t.Fatalf("the run has %d signals, want 1", n)
			}
		}},
		{"select", true, func(c *client.Client) (string, error) {
			r, err := c.Select(ctx, agent, client.SelectRequest{Version: "lost"})
			return r.RequestID, err
		}, func(t *testing.T) {
			var sum struct{ Runs int }
			if err := h.Do(ctx, "GET", "/api/v1/agents/"+agent+"/versions/lost/rewards", nil, &sum); err != nil || sum.Runs != 1 {
				t.Fatalf("version lost has %d runs (%v), want 1", sum.Runs, err)
			}
		}},
		{"reward", false, func(c *client.Client) (string, error) {
			rw, err := c.Reward(ctx, agent, run.ID)
			return rw.RequestID, err
		}, func(*testing.T) {}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newLossyProxy(t, s.HTTPAddr())
			var retries []client.Retry
			c := client.NewHTTP("http://"+p.ln, adminKey, client.OnRetry(func(r client.Retry) { retries = append(retries, r) }))
			defer c.Close()
			id, err := tc.call(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(retries) != 1 {
				t.Fatalf("%d retries, want 1: %+v", len(retries), retries)
			}
			p.mu.Lock()
			keys, firstID := p.keys, p.firstID
			p.mu.Unlock()
			if !tc.write {
				if len(keys) != 0 {
					t.Fatalf("a read carried Idempotency-Keys %q", keys)
				}
				return
			}
			if len(keys) != 2 || keys[0] != keys[1] || keys[0] != retries[0].IdempotencyKey {
				t.Fatalf("attempts carried Idempotency-Keys %q, want one key twice (%q)", keys, retries[0].IdempotencyKey)
			}
			if firstID == "" || id != firstID {
				t.Fatalf("answer's request id %q, want the lost first answer's %q (a replay)", id, firstID)
			}
			tc.check(t)
		})
	}
}

// TestFullDiskRetried fills the server's disk: a write is answered 503
// storage_full with Retry-After 10. A call whose deadline comes before
// that gives up at once with the *Error; a call that may wait retries
// under one Idempotency-Key until the disk has room, and the write is done
// once, under that key.
func TestFullDiskRetried(t *testing.T) {
	fs := faultfs.NewQuota(vfs.NewMem(), 64<<20)
	s := startServer(t, server.Config{DataDir: "data", FS: fs, MinFreeBytes: 2 << 20, BallastBytes: 1 << 20})
	h, agent, _ := setup(t, s)
	ctx := context.Background()
	run, err := h.Select(ctx, agent, client.SelectRequest{})
	if err != nil {
		t.Fatal(err)
	}
	once := client.NewHTTP("http://"+s.HTTPAddr(), adminKey, client.MaxAttempts(1))
	defer once.Close()
	// fill takes the disk's room away and writes until it counts as full.
	fill := func(t *testing.T) {
		t.Helper()
		fs.SetCapacity(fs.Used() + 256<<10)
		for i := 0; ; i++ {
			_, err := once.Signal(ctx, agent, client.SignalRequest{Kind: "fill", Value: 1, RunID: run.ID})
			var e *client.Error
			if errors.As(err, &e) && e.Code == "storage_full" {
				if e.Status != 503 || e.RetryAfter != 10*time.Second {
					t.Fatalf("full disk: %#v, want 503 with Retry-After 10s", e)
				}
				return
			}
			if err != nil || i > 50000 {
				t.Fatalf("filling the disk: signal %d: %v", i, err)
			}
		}
	}
	fill(t)

	for _, d := range doors {
		t.Run(d.name+"/deadline first", func(t *testing.T) {
			c := d.open(t, s)
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.Signal(ctx, agent, client.SignalRequest{Kind: "late", Value: 1, RunID: run.ID})
			var e *client.Error
			if !errors.As(err, &e) || e.Code != "storage_full" || e.RetryAfter != 10*time.Second {
				t.Fatalf("err = %v, want the 503 storage_full", err)
			}
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Fatalf("gave up after %v; Retry-After was past the deadline, so at once", took)
			}
		})
	}

	for i, d := range doors {
		t.Run(d.name+"/retried", func(t *testing.T) {
			fill(t)
			filled := signalCount(t, h, agent, run.ID)
			var keys []string
			c := d.open(t, s, client.MaxWait(20*time.Millisecond), client.MaxAttempts(1000), client.Timeout(20*time.Second),
				client.OnRetry(func(r client.Retry) {
					var e *client.Error
					if !errors.As(r.Err, &e) || e.Status != 503 {
						t.Errorf("retry after %v, want after a 503", r.Err)
					}
					if len(keys) == 0 {
						fs.SetCapacity(64 << 20) // an operator makes room
					}
					keys = append(keys, r.IdempotencyKey)
				}))
			sig, err := c.Signal(ctx, agent, client.SignalRequest{Kind: "after", Value: float64(i), RunID: run.ID})
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) == 0 {
				t.Fatal("no retry: the disk was not full")
			}
			for _, k := range keys {
				if k != keys[0] || k == "" {
					t.Fatalf("retries carried Idempotency-Keys %q, want one", keys)
				}
			}
			if n := signalCount(t, h, agent, run.ID); n != filled+1 {
				t.Fatalf("the run has %d signals, want %d: the write done once", n, filled+1)
			}
			// The key on the wire was keys[0]: sent again, the write is replayed.
			again, err := c.Signal(ctx, agent, client.SignalRequest{Kind: "after", Value: float64(i), RunID: run.ID, IdempotencyKey: keys[0]})
			if err != nil || again.ID != sig.ID || again.RequestID != sig.RequestID {
				t.Fatalf("the same signal under the retries' key = %+v, %v; want the replay of %+v", again, err, sig)
			}
			if n := signalCount(t, h, agent, run.ID); n != filled+1 {
				t.Fatalf("the run has %d signals after the replay, want %d", n, filled+1)
			}
		})
	}
}

// TestLostNATSReplyRetried: the connection breaks as the reply to the
// first request arrives, after the server acted. The attempt times out,
// nats.go reconnects, and the retry under the same Idempotency-Key gets
// the first answer replayed: the run is created once.
func TestLostNATSReplyRetried(t *testing.T) {
	s := startServer(t, server.Config{})
	h, agent, _ := setup(t, s)
	p := newLossyNATSProxy(t, strings.TrimPrefix(s.NATSURL(), "nats://"))
	nc, err := nats.Connect("nats://"+p.ln, nats.Token(adminKey), nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var retries []client.Retry
	c := client.NewNATS(nc, client.AttemptTimeout(500*time.Millisecond), client.OnRetry(func(r client.Retry) { retries = append(retries, r) }))
	run, err := c.Select(context.Background(), agent, client.SelectRequest{Version: "natslost"})
	if err != nil {
		t.Fatal(err)
	}
	if len(retries) != 1 || !errors.Is(retries[0].Err, context.DeadlineExceeded) {
		t.Fatalf("retries %+v, want one after the attempt timed out", retries)
	}
	p.mu.Lock()
	keys, firstID := p.keys, p.firstID
	p.mu.Unlock()
	if len(keys) != 2 || keys[0] != keys[1] || keys[0] != retries[0].IdempotencyKey {
		t.Fatalf("attempts carried Idempotency-Keys %q, want one key twice", keys)
	}
	if firstID == "" || run.RequestID != firstID {
		t.Fatalf("answer's request id %q, want the lost reply's %q (a replay)", run.RequestID, firstID)
	}
	var sum struct{ Runs int }
	if err := h.Do(context.Background(), "GET", "/api/v1/agents/"+agent+"/versions/natslost/rewards", nil, &sum); err != nil || sum.Runs != 1 {
		t.Fatalf("version natslost has %d runs (%v), want 1", sum.Runs, err)
	}
}

// newLossyNATSProxy is a TCP proxy in front of a NATS server that breaks
// its first connection when the first reply (an HMSG to an _INBOX) comes
// from the server, before passing it on. It records the Idempotency-Keys
// of the requests it passes and the request id of the reply it lost.
func newLossyNATSProxy(t *testing.T, target string) *lossyProxy {
	return listenLossy(t, target, (*lossyProxy).serveNATS)
}

func (p *lossyProxy) serveNATS(client net.Conn, lose bool) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() { _, _ = io.Copy(server, &recorder{r: client, p: p}) }()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if err != nil {
			return
		}
		chunk := buf[:n]
		if lose && bytes.Contains(chunk, []byte("HMSG _INBOX.")) {
			if m := idHeader.FindSubmatch(chunk); m != nil {
				p.mu.Lock()
				p.firstID = string(m[1])
				p.mu.Unlock()
			}
			return
		}
		if _, err := client.Write(chunk); err != nil {
			return
		}
	}
}

// TestACallRidesOutARestart: with the default retries, a call made while
// the server is down (a restart) succeeds once the server is back a second
// later; five attempts gave up after 0.75 s.
func TestACallRidesOutARestart(t *testing.T) {
	addrs, err := freeport.Addrs(2)
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	c := client.NewHTTP("http://"+addrs[0], adminKey)
	t.Cleanup(func() { _ = c.Close() })
	started := make(chan *server.Server, 1)
	time.AfterFunc(time.Second, func() {
		s, err := server.Start(server.Config{DataDir: data, HTTPAddr: addrs[0], NATSListen: addrs[1], BootstrapKey: adminKey})
		if err != nil {
			t.Error(err)
			close(started)
			return
		}
		started <- s
	})
	_, err = c.CreateAgent(context.Background(), client.AgentRequest{Name: "after-restart"})
	if s := <-started; s != nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	if err != nil {
		t.Fatalf("a call while the server starts a second later: %v", err)
	}
}
