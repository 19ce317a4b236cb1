package natsdoor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"
)

// wait bounds every wait of these tests; nothing sleeps, except polling the
// server for a closed connection to leave its account (idle).
const wait = 2 * time.Second

// keys is the fake key store: token -> {key id, workspace}.
var keys = map[string][2]string{
	"kadmin": {"key_admin", "wsa"}, // an admin key (adminKeys)
	"ka":     {"key_a", "wsa"},
	"ka2":    {"key_a2", "wsa"},
	"kb":     {"key_b", "wsb"},
	// A workspace id shaped like a connection account name of wsa.
	"kc": {"key_c", "wsa-c1"},
	// Known keys whose workspace id must never name an account.
	"kplaudit": {"key_p", ServiceAccount},
	"kglobal":  {"key_g", "$G"},
	"ksys":     {"key_s", "$SYS"},
	"kdot":     {"key_d", "wsa.x"},
	"kwild":    {"key_w", "*"},
	"knoid":    {"", "wsa"},
	// Revoked: known, but KeyAuth says no.
	"krevoked": {"key_r", "wsa"},
}

func fakeAuth(token string) (Key, bool) {
	k, ok := keys[token]
	if !ok || token == "krevoked" {
		return Key{}, false
	}
	return Key{ID: k[0], Workspace: k[1], Admin: token == "kadmin"}, true
}

// echo is the test service's answer: the subject and requester it saw.
type echo struct {
	Subject   string `json:"subject"`
	Workspace string `json:"workspace"`
	KeyID     string `json:"key_id"`
	OK        bool   `json:"ok"`
	InfoHdrs  int    `json:"info_hdrs"` // values of Nats-Request-Info
	Auth      string `json:"auth"`      // the Authorization header, echoed
}

type fixture struct {
	e   *Embedded
	srv *server.Server
	url string
	nc  *nats.Conn // Plaudit's own connection

	mu   sync.Mutex
	seen []echo // requests the service answered
}

// start runs an embedded server guarded by an Embedded and, on Plaudit's own
// connection, a micro service "plaudit" echoing plaudit.v1.*.*.signal
// (default queue group).
func start(t *testing.T) *fixture {
	t.Helper()
	e, err := NewEmbedded(fakeAuth)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.Start(e.Options("127.0.0.1", server.RANDOM_PORT))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	f := &fixture{e: e, srv: s, url: s.ClientURL()}
	f.nc, err = nats.Connect(f.url, append(e.ConnectOptions(), nats.Name("plaudit"))...)
	if err != nil {
		t.Fatalf("plaudit connection: %v", err)
	}
	t.Cleanup(f.nc.Close)
	svc, err := micro.AddService(f.nc, micro.Config{Name: ServiceName, Version: "0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	err = svc.AddEndpoint("signal", micro.HandlerFunc(func(req micro.Request) {
		ws, key, ok := f.e.Requester(req.Subject(), req.Headers())
		ec := echo{Subject: req.Subject(), Workspace: ws, KeyID: key, OK: ok,
			InfoHdrs: len(req.Headers().Values(server.ClientInfoHdr)), Auth: req.Headers().Get("Authorization")}
		f.mu.Lock()
		f.seen = append(f.seen, ec)
		f.mu.Unlock()
		_ = req.RespondJSON(ec)
	}), micro.WithEndpointSubject("plaudit.v1.*.*.signal"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return f
}

// served returns what the service answered on subjects of workspace ws.
func (f *fixture) served(ws string) []echo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []echo
	for _, ec := range f.seen {
		if strings.HasPrefix(ec.Subject, "plaudit.v1."+ws+".") {
			out = append(out, ec)
		}
	}
	return out
}

// asyncErrs collects a connection's asynchronous errors.
type asyncErrs chan error

func (ch asyncErrs) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	select {
	case ch <- err:
	default:
	}
}

// violation waits for a permissions violation whose text contains want.
func (ch asyncErrs) violation(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case err := <-ch:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), want) {
				return
			}
		case <-deadline:
			t.Fatalf("no permissions violation containing %s", want)
		}
	}
}

// tenant connects with token, collecting the connection's async errors.
func (f *fixture) tenant(t *testing.T, token string) (*nats.Conn, asyncErrs) {
	t.Helper()
	errs := make(asyncErrs, 256)
	nc, err := nats.Connect(f.url, nats.Token(token), nats.ErrorHandler(errs.handler), nats.MaxReconnects(0))
	if err != nil {
		t.Fatalf("connect with token %q: %v", token, err)
	}
	t.Cleanup(nc.Close)
	return nc, errs
}

// signal requests subject and returns the service's echo.
func signal(t *testing.T, nc *nats.Conn, subject string, hdr nats.Header) echo {
	t.Helper()
	rep, err := nc.RequestMsg(&nats.Msg{Subject: subject, Header: hdr, Data: []byte(`{}`)}, wait)
	if err != nil {
		t.Fatalf("request %s: %v", subject, err)
	}
	var ec echo
	if err := json.Unmarshal(rep.Data, &ec); err != nil {
		t.Fatalf("reply %q: %v", rep.Data, err)
	}
	return ec
}

// pending is the number of messages a sync subscription holds.
func pending(t *testing.T, sub *nats.Subscription) int {
	t.Helper()
	n, _, err := sub.Pending()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func flush(t *testing.T, ncs ...*nats.Conn) {
	t.Helper()
	for _, nc := range ncs {
		if err := nc.FlushTimeout(wait); err != nil {
			t.Fatal(err)
		}
	}
}

// accountOf is the name of the account nc landed in, as the server says.
func (f *fixture) accountOf(t *testing.T, nc *nats.Conn) string {
	t.Helper()
	cid, err := nc.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	cz, err := f.srv.Connz(&server.ConnzOptions{CID: cid, Username: true})
	if err != nil || len(cz.Conns) != 1 {
		t.Fatalf("connz of client %d: %v %+v", cid, err, cz)
	}
	return cz.Conns[0].Account
}

// connAccount is Embedded's record of the account named name.
func (f *fixture) connAccount(t *testing.T, name string) *connAccount {
	t.Helper()
	f.e.mu.RLock()
	defer f.e.mu.RUnlock()
	ca := f.e.accounts[name]
	if ca == nil {
		t.Fatalf("%q is not a connection account", name)
	}
	return ca
}

// pool is the number of connection accounts of key keyID of ws.
func (f *fixture) pool(ws, keyID string) int {
	f.e.mu.RLock()
	defer f.e.mu.RUnlock()
	return len(f.e.pools[poolKey{ws, keyID}])
}

// idle waits until the account named name has no connection: the server
// removes a closed client from its account when it reads the close.
func (f *fixture) idle(t *testing.T, name string) {
	t.Helper()
	acc := f.connAccount(t, name).acc
	for deadline := time.Now().Add(wait); acc.NumLocalConnections() != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("account %s still has %d connections", name, acc.NumLocalConnections())
		}
		time.Sleep(time.Millisecond)
	}
}

// received is how many messages a subscription got: those its handler
// took and those still queued. After a flush of its connection, it counts
// every message the server sent before.
func received(t *testing.T, sub *nats.Subscription) int {
	t.Helper()
	d, err := sub.Delivered()
	if err != nil {
		t.Fatal(err)
	}
	return int(d) + pending(t, sub)
}

// 1. Only a known key or Plaudit's own nkey gets in.
func TestRefused(t *testing.T) {
	f := start(t)
	rogue, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	roguePub, _ := rogue.PublicKey()
	cases := []struct {
		name string
		opts []nats.Option
	}{
		{"no credentials", nil},
		{"wrong token", []nats.Option{nats.Token("nope")}},
		{"revoked key", []nats.Option{nats.Token("krevoked")}},
		{"user and password", []nats.Option{nats.UserInfo("key_a", "ka")}},
		{"random nkey", []nats.Option{nats.Nkey(roguePub, rogue.Sign)}},
		{"plaudit's public nkey, wrong signature", []nats.Option{nats.Nkey(f.e.pub, rogue.Sign)}},
		{"valid token with plaudit's nkey", []nats.Option{nats.Token("ka"), nats.Nkey(f.e.pub, f.e.kp.Sign)}},
		{"workspace named like the service account", []nats.Option{nats.Token("kplaudit")}},
		{"workspace $G", []nats.Option{nats.Token("kglobal")}},
		{"workspace $SYS", []nats.Option{nats.Token("ksys")}},
		{"workspace with a dot", []nats.Option{nats.Token("kdot")}},
		{"workspace wildcard", []nats.Option{nats.Token("kwild")}},
		{"key without id", []nats.Option{nats.Token("knoid")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(f.url, append(tc.opts, nats.MaxReconnects(0), nats.Timeout(wait))...)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("err = %v, want %v", err, nats.ErrAuthorization)
			}
		})
	}
	f.e.mu.RLock()
	n := len(f.e.accounts)
	f.e.mu.RUnlock()
	if n != 0 {
		t.Errorf("%d connection accounts exist; no accepted key asked for one", n)
	}
	for _, name := range []string{"wsa", "wsa-c1", "wsa.x-c1", "*-c1", "$G-c1"} {
		if _, err := f.srv.LookupAccount(name); err == nil {
			t.Errorf("account %q exists; no accepted key asked for it", name)
		}
	}
}

// 2. A workspace's request reaches the service, which learns the workspace
// and the key from Nats-Request-Info through Requester; a client cannot
// forge that header.
func TestRequestCarriesRequester(t *testing.T) {
	f := start(t)
	a, _ := f.tenant(t, "ka")
	a2, _ := f.tenant(t, "ka2")
	b, _ := f.tenant(t, "kb")
	c, _ := f.tenant(t, "kc") // workspace wsa-c1
	accA2, accB, accC := f.accountOf(t, a2), f.accountOf(t, b), f.accountOf(t, c)

	t.Run("key_a", func(t *testing.T) {
		got := signal(t, a, "plaudit.v1.wsa.agt_1.signal", nil)
		want := echo{Subject: "plaudit.v1.wsa.agt_1.signal", Workspace: "wsa", KeyID: "key_a", OK: true, InfoHdrs: 1}
		if got != want {
			t.Fatalf("service saw %+v, want %+v", got, want)
		}
	})
	t.Run("another key of the workspace", func(t *testing.T) {
		got := signal(t, a2, "plaudit.v1.wsa.agt_1.signal", nil)
		if got.Workspace != "wsa" || got.KeyID != "key_a2" || !got.OK {
			t.Fatalf("service saw %+v, want wsa/key_a2", got)
		}
	})
	t.Run("workspace named like a connection account", func(t *testing.T) {
		got := signal(t, c, "plaudit.v1.wsa-c1.agt_1.signal", nil)
		if got.Workspace != "wsa-c1" || got.KeyID != "key_c" || !got.OK {
			t.Fatalf("service saw %+v, want wsa-c1/key_c", got)
		}
	})
	t.Run("client-set header is replaced", func(t *testing.T) {
		for _, forged := range []string{
			`{"acc":"` + accB + `","user":"key_b"}`,
			`{"acc":"` + accA2 + `","user":"key_a2"}`,
			`{"acc":"wsa","user":"key_a2"}`,
		} {
			hdr := nats.Header{server.ClientInfoHdr: {forged, forged}}
			got := signal(t, a, "plaudit.v1.wsa.agt_1.signal", hdr)
			if got.Workspace != "wsa" || got.KeyID != "key_a" || got.InfoHdrs != 1 {
				t.Fatalf("forged %s: service saw %+v, want wsa/key_a in one header", forged, got)
			}
		}
	})
	t.Run("raw header with a bare LF line", func(t *testing.T) {
		// The server leaves the forged line (not at a CRLF) and appends its
		// own; nats.go sees both, Requester takes the server's, the last.
		got := rawRequest(t, f.url, "ka", "plaudit.v1.wsa.agt_1.signal",
			"NATS/1.0\r\nX-A: 1\n"+server.ClientInfoHdr+`: {"acc":"`+accA2+`","user":"key_a2"}`+"\r\n\r\n")
		if got.KeyID != "key_a" || got.InfoHdrs != 2 {
			t.Fatalf("service saw %+v, want key_a from the last of 2 headers", got)
		}
	})
	t.Run("raw header ended early by bare LFs cannot cross workspaces", func(t *testing.T) {
		for _, claim := range []string{
			`{"acc":"` + accB + `","user":"key_b"}`,  // wsb's connection
			`{"acc":"` + accC + `","user":"key_c"}`,  // wsa-c1's connection, a name starting with wsa-c
			`{"acc":"wsb","user":"key_b"}`,           // a workspace id
			`{"acc":"` + accA2 + `","user":"key_b"}`, // wsa's account with another workspace's key
			`{"acc":"` + accA2 + `","user":"key_a"}`, // wsa's account with a key it was not handed to
			`{"acc":"PLAUDIT","user":"plaudit"}`,     // the service
		} {
			got := rawRequest(t, f.url, "ka", "plaudit.v1.wsa.agt_1.signal",
				"NATS/1.0\r\nX-A: 1\n"+server.ClientInfoHdr+": "+claim+"\n\nZ: z\r\n\r\n")
			if got.OK {
				t.Fatalf("claim %s: service accepted %+v", claim, got)
			}
		}
	})
	t.Run("known limitation: raw header ended early claims another connection of the workspace", func(t *testing.T) {
		// Documented on Requester: nats.go stops reading the header block
		// at the bare "\n\n", before the server's own Nats-Request-Info.
		got := rawRequest(t, f.url, "ka", "plaudit.v1.wsa.agt_1.signal",
			"NATS/1.0\r\nX-A: 1\n"+server.ClientInfoHdr+`: {"acc":"`+accA2+`","user":"key_a2"}`+"\n\nZ: z\r\n\r\n")
		if got.Workspace != "wsa" || got.KeyID != "key_a2" || !got.OK {
			t.Fatalf("service saw %+v; if the forgery no longer works, update Requester's doc and this test", got)
		}
	})
}

// rawRequest sends one HPUB with a hand-written header block on a raw
// connection authenticated with token, and returns the service's echo.
func rawRequest(t *testing.T, url, token, subject, hdr string) echo {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(url, "nats://"), wait)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(wait))
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil { // INFO
		t.Fatal(err)
	}
	const body = "{}"
	fmt.Fprintf(conn, "CONNECT {\"auth_token\":%q,\"headers\":true,\"verbose\":false,\"protocol\":1}\r\n"+
		"SUB _INBOX.raw 1\r\nHPUB %s _INBOX.raw %d %d\r\n%s%s\r\n",
		token, subject, len(hdr), len(hdr)+len(body), hdr, body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("raw read: %v", err)
		}
		switch {
		case strings.HasPrefix(line, "PING"):
			fmt.Fprint(conn, "PONG\r\n")
		case strings.HasPrefix(line, "-ERR"):
			t.Fatalf("server: %s", line)
		case strings.HasPrefix(line, "HMSG"), strings.HasPrefix(line, "MSG"):
			fields := strings.Fields(line)
			size, _ := strconv.Atoi(fields[len(fields)-1])
			buf := make([]byte, size+2)
			if _, err := io.ReadFull(r, buf); err != nil {
				t.Fatal(err)
			}
			payload := string(buf[:size])
			if _, after, ok := strings.Cut(payload, "\r\n\r\n"); ok && strings.HasPrefix(line, "HMSG") {
				payload = after
			}
			var ec echo
			if err := json.Unmarshal([]byte(payload), &ec); err != nil {
				t.Fatalf("raw reply %q: %v", payload, err)
			}
			return ec
		}
	}
}

// 3. A workspace connection subscribes and publishes only where allowed.
func TestPermissions(t *testing.T) {
	f := start(t)
	a, errs := f.tenant(t, "ka")
	a2, _ := f.tenant(t, "ka2")
	_, _ = f.tenant(t, "kb") // wsb exists, so its imports would be there to abuse

	t.Run("subscribe denied", func(t *testing.T) {
		var subs []*nats.Subscription
		for _, subj := range []string{">", "plaudit.v1.>", "plaudit.v1.wsa.>", "plaudit.judge.>", "plaudit.judge.wsb.>",
			"plaudit.judgeconn.>", "$SRV.>"} {
			sub, err := a.SubscribeSync(subj) // accepted client-side; the server answers -ERR
			if err != nil {
				t.Fatalf("subscribe %s: %v", subj, err)
			}
			subs = append(subs, sub)
			errs.violation(t, fmt.Sprintf("Subscription to %q", subj))
		}
		// The denied subscriptions get nothing of traffic they would match.
		signal(t, a2, "plaudit.v1.wsa.agt_1.signal", nil)
		if _, err := f.e.JudgeRequest(f.nc, "wsb", "tone", nil, wait); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("judge request without workers: %v", err)
		}
		flush(t, a)
		for _, sub := range subs {
			if n := pending(t, sub); n != 0 {
				t.Errorf("denied subscription %s received %d messages", sub.Subject, n)
			}
		}
	})
	t.Run("publish denied", func(t *testing.T) {
		for _, subj := range []string{"plaudit.v1.wsb.agt_1.signal", "plaudit.judge.wsa.tone", "plaudit.judgeconn.1.tone",
			"$SRV.STATS.plaudit", "_INBOX.x"} {
			if err := a.PublishRequest(subj, a.NewRespInbox(), []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			errs.violation(t, fmt.Sprintf("Publish to %q", subj))
		}
		if got := f.served("wsb"); len(got) != 0 {
			t.Fatalf("service served wsb requests %+v", got)
		}
	})
	t.Run("connection survives violations", func(t *testing.T) {
		if got := signal(t, a, "plaudit.v1.wsa.agt_2.signal", nil); got.KeyID != "key_a" {
			t.Fatalf("service saw %+v", got)
		}
	})
}

// 4. A workspace connection cannot answer for the service.
func TestRogueResponder(t *testing.T) {
	f := start(t)
	rogue, errs := f.tenant(t, "ka")
	var stolen atomic.Int64
	steal := func(m *nats.Msg) { stolen.Add(1); _ = m.Respond([]byte(`{"subject":"rogue"}`)) }
	for _, subj := range []string{"plaudit.v1.*.*.signal", "plaudit.v1.wsa.*.signal"} {
		if _, err := rogue.QueueSubscribe(subj, "q", steal); err != nil {
			t.Fatal(err)
		}
		errs.violation(t, fmt.Sprintf("Subscription to %q using queue \"q\"", subj))
	}
	if _, err := rogue.Subscribe("plaudit.v1.wsa.agt_1.signal", steal); err != nil {
		t.Fatal(err)
	}
	errs.violation(t, `Subscription to "plaudit.v1.wsa.agt_1.signal"`)

	a, _ := f.tenant(t, "ka")
	for i := range 20 {
		if got := signal(t, a, "plaudit.v1.wsa.agt_1.signal", nil); got.Subject != "plaudit.v1.wsa.agt_1.signal" || got.KeyID != "key_a" {
			t.Fatalf("request %d answered %+v", i, got)
		}
	}
	flush(t, rogue)
	if n := stolen.Load(); n != 0 {
		t.Fatalf("rogue received %d requests", n)
	}
}

// 5. A workspace sees nothing of another's traffic.
func TestNoCrossTenantVisibility(t *testing.T) {
	f := start(t)
	spy, _ := f.tenant(t, "ka")
	inbox, err := spy.SubscribeSync("_INBOX.>")
	if err != nil {
		t.Fatal(err)
	}
	judge, err := spy.SubscribeSync("plaudit.judge.wsa.>")
	if err != nil {
		t.Fatal(err)
	}
	flush(t, spy)

	b, _ := f.tenant(t, "kb")
	worker, _ := f.tenant(t, "kb")
	if _, err := worker.QueueSubscribe("plaudit.judge.wsb.tone", "judges", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"met":true,"key":"kb"}`))
	}); err != nil {
		t.Fatal(err)
	}
	flush(t, worker)

	for range 50 {
		hdr := nats.Header{"Authorization": {"Bearer kb"}}
		if got := signal(t, b, "plaudit.v1.wsb.agt_1.signal", hdr); got.Workspace != "wsb" || got.KeyID != "key_b" || got.Auth != "Bearer kb" {
			t.Fatalf("service saw %+v", got)
		}
	}
	for range 20 {
		rep, err := f.e.JudgeRequest(f.nc, "wsb", "tone", []byte(`{"text":"hi kb"}`), wait)
		if err != nil || !strings.Contains(string(rep.Data), `"met":true`) {
			t.Fatalf("judge: %v %v", rep, err)
		}
	}

	// Every message for the spy was queued on its connection before the
	// replies above were; a ping round trip brings them all in.
	flush(t, spy)
	total := 0
	for _, sub := range []*nats.Subscription{inbox, judge} {
		n := pending(t, sub)
		total += n
		for range n {
			m, err := sub.NextMsg(wait)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(m.Data), "kb") || strings.Contains(fmt.Sprint(m.Header), "kb") {
				t.Errorf("spy got wsb's key in %s: %q %v", m.Subject, m.Data, m.Header)
			}
		}
	}
	if total != 0 {
		t.Fatalf("spy received %d messages of wsb's traffic", total)
	}

	// Control: the same subscriptions do see the spy's own traffic.
	signal(t, spy, "plaudit.v1.wsa.agt_1.signal", nil)
	if m, err := inbox.NextMsg(wait); err != nil || !strings.Contains(string(m.Data), "key_a") {
		t.Fatalf("spy's _INBOX.> missed the reply to its own request: %v", err)
	}
	go func() { // answer the judge request below from the spy's subscription
		if m, err := judge.NextMsg(wait); err == nil {
			_ = m.Respond([]byte(`{"met":false}`))
		}
	}()
	if rep, err := f.e.JudgeRequest(f.nc, "wsa", "tone", []byte(`{}`), wait); err != nil || string(rep.Data) != `{"met":false}` {
		t.Fatalf("spy's plaudit.judge.wsa.> missed wsa's judge request: %v %v", rep, err)
	}
}

// 6. Connections of one workspace, of one key or of two, see none of each
// other's replies: each has an account of its own.
func TestRepliesArePrivateWithinWorkspace(t *testing.T) {
	f := start(t)
	type spyConn struct {
		nc    *nats.Conn
		inbox *nats.Subscription
		all   *nats.Subscription
	}
	var spies []spyConn
	for _, token := range []string{"ka", "ka2"} { // of the requesters' key, and of another key
		nc, errs := f.tenant(t, token)
		inbox, err := nc.SubscribeSync("_INBOX.>")
		if err != nil {
			t.Fatal(err)
		}
		all, err := nc.SubscribeSync(">")
		if err != nil {
			t.Fatal(err)
		}
		errs.violation(t, `Subscription to ">"`)
		flush(t, nc)
		spies = append(spies, spyConn{nc, inbox, all})
	}
	tokens := []string{"ka", "ka", "ka2", "ka2"} // two of the same key, two of different keys
	requesters := make([]*nats.Conn, len(tokens))
	names := map[string]bool{f.accountOf(t, spies[0].nc): true, f.accountOf(t, spies[1].nc): true}
	for i, token := range tokens {
		requesters[i], _ = f.tenant(t, token)
		names[f.accountOf(t, requesters[i])] = true
	}
	if len(names) != 2+len(tokens) {
		t.Fatalf("6 connections share accounts: %v", names)
	}

	var wg sync.WaitGroup
	errs := make(chan error, len(requesters))
	for i, nc := range requesters {
		wg.Go(func() {
			for j := range 30 {
				rep, err := nc.Request("plaudit.v1.wsa.agt_1.signal", []byte(`{}`), wait)
				if err != nil {
					errs <- fmt.Errorf("requester %d, request %d: %w", i, j, err)
					return
				}
				var ec echo
				if err := json.Unmarshal(rep.Data, &ec); err != nil || ec.KeyID != keys[tokens[i]][0] || !ec.OK {
					errs <- fmt.Errorf("requester %d: service saw %s", i, rep.Data)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := len(f.served("wsa")); n != 30*len(requesters) {
		t.Fatalf("service served %d requests, want %d", n, 30*len(requesters))
	}
	for i, s := range spies {
		flush(t, s.nc)
		if n, m := pending(t, s.inbox), pending(t, s.all); n != 0 || m != 0 {
			t.Errorf("spy %d received %d replies on _INBOX.> and %d on >, of %d requests of others", i, n, m, 30*len(requesters))
		}
	}
	// Control: the spy's _INBOX.> does get the reply to its own request.
	signal(t, spies[0].nc, "plaudit.v1.wsa.agt_1.signal", nil)
	flush(t, spies[0].nc)
	if n := pending(t, spies[0].inbox); n != 1 {
		t.Fatalf("spy's _INBOX.> holds %d messages after its own request, want 1", n)
	}
}

// 7. Plaudit's judge requests for plaudit.judge.<ws>.<name> go, through
// JudgeRequest, to one connection of ws serving the subject at a time,
// taken in turn.
func TestJudgeRequests(t *testing.T) {
	f := start(t)
	type workerConn struct {
		nc  *nats.Conn
		sub *nats.Subscription
	}
	worker := func(token, subject string, queue bool, id string) workerConn {
		nc, _ := f.tenant(t, token)
		answer := func(m *nats.Msg) { _ = m.Respond([]byte(id)) }
		var sub *nats.Subscription
		var err error
		if queue { // as `nats reply` does
			sub, err = nc.QueueSubscribe(subject, "NATS-RPLY-22", answer)
		} else {
			sub, err = nc.Subscribe(subject, answer)
		}
		if err != nil {
			t.Fatal(err)
		}
		flush(t, nc)
		return workerConn{nc, sub}
	}

	t.Run("no worker", func(t *testing.T) {
		_, _ = f.tenant(t, "ka") // wsa has a connection, serving nothing
		for _, ws := range []string{"wsa", "wsc"} {
			begin := time.Now()
			if _, err := f.e.JudgeRequest(f.nc, ws, "tone", nil, wait); !errors.Is(err, nats.ErrNoResponders) {
				t.Fatalf("%s: err = %v, want %v", ws, err, nats.ErrNoResponders)
			}
			if d := time.Since(begin); d > wait/4 {
				t.Fatalf("%s: no responders after %v", ws, d)
			}
		}
	})
	t.Run("bad subject", func(t *testing.T) {
		for _, c := range [][2]string{{"wsa", ""}, {"wsa", "*"}, {"wsa", "a.>"}, {"wsa", "a..b"}, {"wsa", "a b"}, {"ws.a", "tone"}, {"PLAUDIT", "tone"}} {
			if _, err := f.e.JudgeRequest(f.nc, c[0], c[1], nil, wait); err == nil || errors.Is(err, nats.ErrNoResponders) {
				t.Errorf("JudgeRequest(%q, %q): err = %v", c[0], c[1], err)
			}
		}
	})

	workers := []workerConn{
		worker("ka", "plaudit.judge.wsa.tone", false, "w0"),
		worker("ka", "plaudit.judge.wsa.tone", false, "w1"),
		worker("ka2", "plaudit.judge.wsa.tone", true, "w2"),
	}
	wsbWorker := worker("kb", "plaudit.judge.wsb.tone", true, "wsb")
	otherWorker := worker("ka2", "plaudit.judge.wsa.other", false, "other")

	answers := map[string]int{}
	for i := range 60 {
		rep, err := f.e.JudgeRequest(f.nc, "wsa", "tone", []byte(`{"text":"hello"}`), wait)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		answers[string(rep.Data)]++
	}
	total := 0
	for i, w := range workers {
		flush(t, w.nc)
		got := received(t, w.sub)
		total += got
		// Turns are strict: three serving connections, 20 each.
		if id := fmt.Sprintf("w%d", i); got != 20 || answers[id] != 20 {
			t.Errorf("worker %s received %d requests and gave %d answers, want 20", id, got, answers[id])
		}
	}
	if total != 60 {
		t.Fatalf("workers received %d requests in all, want 60: some were sent to more than one", total)
	}
	for _, w := range []workerConn{wsbWorker, otherWorker} {
		flush(t, w.nc)
		if n := received(t, w.sub); n != 0 {
			t.Errorf("%s received %d of wsa's tone requests", w.sub.Subject, n)
		}
	}
	if rep, err := f.e.JudgeRequest(f.nc, "wsa", "other", nil, wait); err != nil || string(rep.Data) != "other" {
		t.Fatalf("plaudit.judge.wsa.other: %v %v", rep, err)
	}

	t.Run("a plain request on plaudit.judge reaches no one", func(t *testing.T) {
		// Plaudit's account has no import on plaudit.judge.>: only
		// JudgeRequest's per-connection subjects reach workers.
		if _, err := f.nc.Request("plaudit.judge.wsa.tone", nil, wait); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("err = %v, want %v", err, nats.ErrNoResponders)
		}
	})
	t.Run("an import whose connection does not serve the subject answers no responders", func(t *testing.T) {
		// What JudgeRequest meets if the worker leaves between its interest
		// check and the request.
		name := f.accountOf(t, otherWorker.nc)
		if _, err := f.nc.Request(f.connAccount(t, name).judge+"tone", nil, wait); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("err = %v, want %v", err, nats.ErrNoResponders)
		}
	})
	t.Run("workers that leave are skipped", func(t *testing.T) {
		gone := f.accountOf(t, workers[0].nc)
		workers[0].nc.Close()
		f.idle(t, gone)
		if err := workers[1].sub.Unsubscribe(); err != nil {
			t.Fatal(err)
		}
		flush(t, workers[1].nc)
		for i := range 10 {
			if rep, err := f.e.JudgeRequest(f.nc, "wsa", "tone", nil, wait); err != nil || string(rep.Data) != "w2" {
				t.Fatalf("request %d: %v %v, want w2's answer", i, rep, err)
			}
		}
	})
}

// 8. Connection accounts are pooled per key: reconnects reuse idle ones,
// and a connection never lands in an account a live connection has.
func TestAccountReuse(t *testing.T) {
	f := start(t)
	// A fake clock, so that waiting past the reuse delay takes no time.
	var elapsed atomic.Int64
	base := time.Now()
	f.e.mu.Lock()
	f.e.now = func() time.Time { return base.Add(time.Duration(elapsed.Load())) }
	f.e.mu.Unlock()
	pastDelay := func() { elapsed.Add(int64(f.e.reuseDelay)) }

	// live checks that name, the account of a new connection, has exactly
	// that connection, and that no other live connection is in it.
	live := map[*nats.Conn]string{}
	land := func(t *testing.T, token string) *nats.Conn {
		t.Helper()
		nc, _ := f.tenant(t, token)
		name := f.accountOf(t, nc)
		for other, n := range live {
			if n == name && !other.IsClosed() {
				t.Fatalf("new connection landed in %s, the account of a live connection", name)
			}
		}
		ca := f.connAccount(t, name)
		if got := ca.acc.NumLocalConnections(); got != 1 || ca.keyID != keys[token][0] || ca.ws != keys[token][1] {
			t.Fatalf("account %s: %d connections, key %s of %s", name, got, ca.keyID, ca.ws)
		}
		live[nc] = name
		return nc
	}
	leave := func(t *testing.T, nc *nats.Conn) {
		t.Helper()
		nc.Close()
		f.idle(t, live[nc])
		delete(live, nc)
	}

	t.Run("reconnects in a row", func(t *testing.T) {
		land(t, "ka")  // stays open throughout
		land(t, "ka2") // another key of the workspace, idle accounts not its own
		leave(t, land(t, "ka2"))
		pastDelay()
		seen := map[string]bool{}
		for i := range 20 {
			nc := land(t, "ka")
			seen[live[nc]] = true
			leave(t, nc)
			if i%2 == 0 { // half the time, reconnect at once
				pastDelay()
			}
		}
		// The live connection's, and two taking turns: one just handed out,
		// the other past the delay.
		if n := f.pool("wsa", "key_a"); n > 3 {
			t.Fatalf("key_a has %d accounts after 20 reconnects, want at most 3", n)
		}
		if len(seen) != 2 {
			t.Fatalf("20 reconnects used %d accounts, want 2: %v", len(seen), seen)
		}
		if n := f.pool("wsa", "key_a2"); n != 2 {
			t.Fatalf("key_a2 has %d accounts, want 2: its pool is its own", n)
		}
	})
	t.Run("a just handed out account is not reused", func(t *testing.T) {
		leave(t, land(t, "kb"))
		leave(t, land(t, "kb")) // the first is idle, but was handed out too recently
		if n := f.pool("wsb", "key_b"); n != 2 {
			t.Fatalf("key_b has %d accounts, want 2", n)
		}
	})
	t.Run("concurrent connections", func(t *testing.T) {
		pastDelay()
		const n = 10
		for round := range 3 {
			var (
				wg  sync.WaitGroup
				mu  sync.Mutex
				ncs []*nats.Conn
			)
			for range n {
				wg.Go(func() {
					nc, err := nats.Connect(f.url, nats.Token("ka2"), nats.MaxReconnects(0))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					ncs = append(ncs, nc)
					mu.Unlock()
				})
			}
			wg.Wait()
			if t.Failed() {
				t.FailNow()
			}
			names := map[string]bool{}
			for nc, name := range live {
				if !nc.IsClosed() {
					names[name] = true
				}
			}
			for _, nc := range ncs {
				name := f.accountOf(t, nc)
				if c := f.connAccount(t, name).acc.NumLocalConnections(); names[name] || c != 1 {
					t.Fatalf("round %d: account %s has %d connections", round, name, c)
				}
				names[name] = true
				live[nc] = name
			}
			for _, nc := range ncs {
				leave(t, nc)
			}
			pastDelay()
		}
		// key_a2's one open connection, and 10 reused in every round.
		if got := f.pool("wsa", "key_a2"); got > n+1 {
			t.Fatalf("key_a2 has %d accounts after 3 rounds of %d connections, want at most %d", got, n, n+1)
		}
	})
}

// 9. Discovery of the plaudit service works from a workspace.
func TestDiscovery(t *testing.T) {
	f := start(t)
	a, _ := f.tenant(t, "ka")
	for _, subj := range []string{"$SRV.PING", "$SRV.PING." + ServiceName} {
		rep, err := a.Request(subj, nil, wait)
		if err != nil {
			t.Fatalf("%s: %v", subj, err)
		}
		var ping micro.Ping
		if err := json.Unmarshal(rep.Data, &ping); err != nil || ping.Name != ServiceName {
			t.Fatalf("%s answered %q (%v)", subj, rep.Data, err)
		}
	}
	for _, subj := range []string{"$SRV.INFO", "$SRV.INFO." + ServiceName} {
		rep, err := a.Request(subj, nil, wait)
		if err != nil {
			t.Fatalf("%s: %v", subj, err)
		}
		var info micro.Info
		if err := json.Unmarshal(rep.Data, &info); err != nil || info.Name != ServiceName ||
			len(info.Endpoints) != 1 || info.Endpoints[0].Subject != "plaudit.v1.*.*.signal" {
			t.Fatalf("%s answered %q (%v)", subj, rep.Data, err)
		}
	}
}

// 9b. $SRV.STATS, which counts every workspace's requests, answers an admin
// key's connection only; a workspace key's publish to it is refused.
func TestStatsForAdminKeysOnly(t *testing.T) {
	f := start(t)
	admin, _ := f.tenant(t, "kadmin")
	for _, subj := range statsDiscovery {
		rep, err := admin.Request(subj, nil, wait)
		if err != nil {
			t.Fatalf("%s as an admin key: %v", subj, err)
		}
		var stats micro.Stats
		if err := json.Unmarshal(rep.Data, &stats); err != nil || stats.Name != ServiceName || len(stats.Endpoints) != 1 {
			t.Fatalf("%s answered %q (%v)", subj, rep.Data, err)
		}
	}
	a, errs := f.tenant(t, "ka")
	for _, subj := range statsDiscovery {
		if err := a.PublishRequest(subj, a.NewRespInbox(), nil); err != nil {
			t.Fatal(err)
		}
		errs.violation(t, fmt.Sprintf("Publish to %q", subj))
	}
}

// 10. Connections racing in get accounts of their own, each set up once,
// and are served as their key.
func TestConcurrentFirstConnections(t *testing.T) {
	f := start(t)
	tokens := []string{"ka", "ka2", "kb"}
	const n = 30
	var (
		wg, served sync.WaitGroup
		mu         sync.Mutex
		accounts   = map[string]int{}
	)
	served.Add(n)
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			token := tokens[i%len(tokens)]
			// 30 connections set up at once on a loaded CI machine: the
			// bounds are generous, what is checked is who answers.
			nc, err := nats.Connect(f.url, nats.Token(token), nats.MaxReconnects(0), nats.Timeout(5*wait))
			if err != nil {
				served.Done()
				errs <- fmt.Errorf("%s: %w", token, err)
				return
			}
			defer nc.Close()
			// Stay connected until every connection is served, so none
			// can reuse another's account.
			defer served.Wait()
			defer served.Done()
			ws := keys[token][1]
			rep, err := nc.Request("plaudit.v1."+ws+".agt_1.signal", nil, 5*wait)
			if err != nil {
				errs <- fmt.Errorf("%s: %w", token, err)
				return
			}
			var ec echo
			if err := json.Unmarshal(rep.Data, &ec); err != nil || ec.Workspace != ws || ec.KeyID != keys[token][0] {
				errs <- fmt.Errorf("%s: service saw %s", token, rep.Data)
			}
			cid, _ := nc.GetClientID()
			cz, err := f.srv.Connz(&server.ConnzOptions{CID: cid, Username: true})
			if err != nil || len(cz.Conns) != 1 {
				errs <- fmt.Errorf("%s: connz: %v", token, err)
				return
			}
			mu.Lock()
			accounts[cz.Conns[0].Account]++
			mu.Unlock()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(accounts) != n {
		t.Fatalf("%d live connections in %d accounts: %v", n, len(accounts), accounts)
	}
}

// 11. Disconnect closes every connection of a key, whichever its account.
func TestDisconnect(t *testing.T) {
	f := start(t)
	a1, _ := f.tenant(t, "ka")
	a2, _ := f.tenant(t, "ka")
	other, _ := f.tenant(t, "ka2")
	f.e.Disconnect("key_a")
	for _, nc := range []*nats.Conn{a1, a2} {
		for deadline := time.Now().Add(wait); !nc.IsClosed(); {
			if time.Now().After(deadline) {
				t.Fatal("a connection of key_a is still open")
			}
			time.Sleep(time.Millisecond)
		}
	}
	if got := signal(t, other, "plaudit.v1.wsa.agt_1.signal", nil); got.KeyID != "key_a2" {
		t.Fatalf("service saw %+v", got)
	}
}

func TestRequester(t *testing.T) {
	e, err := NewEmbedded(fakeAuth)
	if err != nil {
		t.Fatal(err)
	}
	for name, ca := range map[string]*connAccount{
		"wsa-c1":    {ws: "wsa", keyID: "key_a"},
		"wsa-c2":    {ws: "wsa", keyID: "key_a2"},
		"wsb-c3":    {ws: "wsb", keyID: "key_b"},
		"wsa-c1-c4": {ws: "wsa-c1", keyID: "key_c"},
	} {
		e.accounts[name] = ca
	}
	hdr := func(vals ...string) map[string][]string { return map[string][]string{server.ClientInfoHdr: vals} }
	cases := []struct {
		name    string
		subject string
		h       map[string][]string
		ws, key string
		ok      bool
	}{
		{"shared", "plaudit.v1.wsa.agt.signal", hdr(`{"acc":"wsa-c1","user":"key_a","rtt":1}`), "wsa", "key_a", true},
		{"another key's account", "plaudit.v1.wsa.agt.signal", hdr(`{"acc":"wsa-c2","user":"key_a2"}`), "wsa", "key_a2", true},
		{"last value wins", "plaudit.v1.wsa.agt.signal", hdr(`{"acc":"wsa-c2","user":"key_a2"}`, `{"acc":"wsa-c1","user":"key_a"}`), "wsa", "key_a", true},
		{"workspace named like an account", "plaudit.v1.wsa-c1.agt.signal", hdr(`{"acc":"wsa-c1-c4","user":"key_c"}`), "wsa-c1", "key_c", true},
		{"no header", "plaudit.v1.wsa.agt.signal", nil, "", "", false},
		{"account alone (the server shares no user)", "plaudit.v1.wsa.agt.signal", hdr(`{"acc":"wsa-c1"}`), "wsa", "key_a", true},
		{"key the account was not handed to", "plaudit.v1.wsa.agt.signal", hdr(`{"acc":"wsa-c1","user":"key_a2"}`), "", "", false},
		{"other workspace", "plaudit.v1.wsa.agt.signal", hdr(`{"acc":"wsb-c3","user":"key_b"}`), "", "", false},
		{"account of a workspace named like an account", "plaudit.v1.wsa.agt.signal", hdr(`{"acc":"wsa-c1-c4","user":"key_c"}`), "", "", false},
		{"subject of a workspace named like an account", "plaudit.v1.wsa-c1.agt.signal", hdr(`{"acc":"wsa-c1","user":"key_a"}`), "", "", false},
		{"workspace id as account", "plaudit.v1.wsa.agt.signal", hdr(`{"acc":"wsa","user":"key_a"}`), "", "", false},
		{"unknown account", "plaudit.v1.wsa.agt.signal", hdr(`{"acc":"wsa-c9","user":"key_a"}`), "", "", false},
		{"service account", "plaudit.v1.PLAUDIT.agt.signal", hdr(`{"acc":"PLAUDIT","user":"plaudit"}`), "", "", false},
		{"not a service subject", "plaudit.judge.wsa.tone", hdr(`{"acc":"wsa-c1","user":"key_a"}`), "", "", false},
		{"bad json", "plaudit.v1.wsa.agt.signal", hdr(`{`), "", "", false},
	}
	for _, tc := range cases {
		ws, key, ok := e.Requester(tc.subject, tc.h)
		if ws != tc.ws || key != tc.key || ok != tc.ok {
			t.Errorf("%s: got (%q, %q, %v), want (%q, %q, %v)", tc.name, ws, key, ok, tc.ws, tc.key, tc.ok)
		}
	}
}

// Requester runs once per request: it allocates nothing (outside the race
// detector, whose sync.Pool drops parsers at random).
func BenchmarkRequester(b *testing.B) {
	e, err := NewEmbedded(fakeAuth)
	if err != nil {
		b.Fatal(err)
	}
	e.accounts["wsa-c1"] = &connAccount{ws: "wsa", keyID: "key_a"}
	h := map[string][]string{server.ClientInfoHdr: {`{"start":"2025-01-01T00:00:00Z","host":"127.0.0.1","id":7,"acc":"wsa-c1","user":"key_a","rtt":1000,"server":"S","kind":"Client","client_type":"nats"}`}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := e.Requester("plaudit.v1.wsa.agt.signal", h); !ok {
			b.Fatal("not ok")
		}
	}
}

// TestStartOnATakenPortFailsAtOnce: the listener's error, naming the
// address, not a wait for readiness that never comes; for the client port
// and for a cluster's route port (which nats-server opens on a goroutine
// of its own and only logs).
func TestStartOnATakenPortFailsAtOnce(t *testing.T) {
	for _, port := range []string{"client", "route"} {
		t.Run(port, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			addr := ln.Addr().(*net.TCPAddr)
			e, err := NewEmbedded(fakeAuth)
			if err != nil {
				t.Fatal(err)
			}
			opts := e.Options("127.0.0.1", addr.Port)
			if port == "route" {
				opts = e.Options("127.0.0.1", server.RANDOM_PORT)
				c := Cluster{Name: "c", Node: "a", Listen: addr.String(), Routes: []string{addr.String()}, StoreDir: t.TempDir()}
				if err := c.Apply(opts); err != nil {
					t.Fatal(err)
				}
			}
			began := time.Now()
			s, err := e.Start(opts)
			if err == nil {
				s.Shutdown()
				t.Fatalf("started with its %s port taken", port)
			}
			if took := time.Since(began); took > 2*time.Second {
				t.Errorf("took %v to fail", took)
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("err = %v, want EADDRINUSE", err)
			}
			for _, want := range []string{addr.String(), "already in use"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %q, want it to name %q", err, want)
				}
			}
		})
	}
}
