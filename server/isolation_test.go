package server

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// The NATS door's tenant isolation, through the real server: its embedded
// nats-server, Plaudit's service and real nats.go clients.

// watcher is a tenant connection that records every permission violation
// the server reports to it and every message it receives.
type watcher struct {
	nc         *nats.Conn
	violations chan string
	mu         sync.Mutex
	got        [][]byte
}

func connectWatcher(t *testing.T, s *Server, key string) *watcher {
	t.Helper()
	w := &watcher{violations: make(chan string, 64)}
	nc, err := nats.Connect(s.NATSURL(), nats.Token(key),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				w.violations <- err.Error()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w.nc = nc
	return w
}

// subscribe subscribes to subject and records what arrives.
func (w *watcher) subscribe(t *testing.T, subject string) {
	t.Helper()
	if _, err := w.nc.Subscribe(subject, func(m *nats.Msg) {
		w.mu.Lock()
		w.got = append(w.got, append(append([]byte(m.Subject+" "), m.Data...), []byte(strings.Join(m.Header.Values("Authorization"), " "))...))
		w.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// violation waits for the server to refuse something to the connection.
func (w *watcher) violation(t *testing.T, what string) {
	t.Helper()
	select {
	case v := <-w.violations:
		if !strings.Contains(v, what) {
			t.Fatalf("violation %q, want one about %q", v, what)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no permission violation for %s", what)
	}
}

func (w *watcher) received() [][]byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([][]byte(nil), w.got...)
}

// tenants is a server with two workspaces: default (the admin key, and a
// second key "peer") and team (key "team"), and one agent in each.
type tenants struct {
	s                                *Server
	api                              *client
	peerKey, teamKey, teamWS         string
	defaultAgent, teamAgent, teamRun string
}

func newTenants(t *testing.T) *tenants {
	t.Helper()
	s := startServer(t, Config{})
	api := newClient(t, s, adminKey)
	tn := &tenants{s: s, api: api}
	tn.peerKey = str(t, api.must(201, "POST", "/v1/workspaces/default/api-keys", `{"name": "peer"}`), "key")
	tn.teamWS = str(t, api.must(201, "POST", "/v1/workspaces", `{"name": "team"}`), "id")
	tn.teamKey = str(t, api.must(201, "POST", "/v1/workspaces/"+tn.teamWS+"/api-keys", `{"name": "team"}`), "key")
	team := api.as(tn.teamKey)
	tn.defaultAgent = str(t, api.must(201, "POST", "/api/v1/agents", `{"name": "default-agent"}`), "id")
	tn.teamAgent = str(t, team.must(201, "POST", "/api/v1/agents", `{"name": "team-agent"}`), "id")
	tn.teamRun = str(t, team.must(201, "POST", "/api/v1/agents/"+tn.teamAgent+"/runs", `{}`), "id")
	return tn
}

func TestNATSConnectionsNeedAKey(t *testing.T) {
	tn := newTenants(t)
	revoked := tn.api.must(201, "POST", "/v1/workspaces/"+tn.teamWS+"/api-keys", `{"name": "soon revoked"}`)
	open, err := nats.Connect(tn.s.NATSURL(), nats.Token(str(t, revoked, "key")))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	tn.api.must(200, "DELETE", "/v1/workspaces/"+tn.teamWS+"/api-keys/"+str(t, revoked, "id"), "")

	cases := []struct {
		name string
		opts []nats.Option
	}{
		{"no credentials", nil},
		{"a wrong key", []nats.Option{nats.Token("pl_not_a_key")}},
		{"a revoked key", []nats.Option{nats.Token(str(t, revoked, "key"))}},
		{"user and password", []nats.Option{nats.UserInfo("plaudit", adminKey)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nc, err := nats.Connect(tn.s.NATSURL(), append(c.opts, nats.MaxReconnects(0))...)
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, nats.ErrAuthorization) {
				t.Fatalf("err = %v, want an authorization violation", err)
			}
		})
	}
	// The revoked key's open connection was closed too.
	deadline := time.Now().Add(5 * time.Second)
	for open.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if open.IsConnected() {
		t.Fatal("a connection of the revoked key is still open")
	}
}

// TestNATSWorkspaceSeesNothingOfAnother: a connection of workspace default
// is refused every subscription beyond its own, cannot publish on team's
// subjects, and while team works (requests with their Authorization
// header, judge traffic) receives zero messages of it, counted.
func TestNATSWorkspaceSeesNothingOfAnother(t *testing.T) {
	tn := newTenants(t)
	spy := connectWatcher(t, tn.s, tn.peerKey)
	for _, subject := range []string{">", "plaudit.v1.>", "plaudit.v1.default.>", "plaudit.judge.>", "plaudit.judge." + tn.teamWS + ".>", "$SRV.>"} {
		spy.subscribe(t, subject)
		spy.violation(t, subject)
	}
	spy.subscribe(t, "_INBOX.>")
	spy.subscribe(t, "plaudit.judge.default.>")
	if err := spy.nc.Publish("plaudit.v1."+tn.teamWS+"."+tn.teamAgent+".signal",
		[]byte(`{"kind": "forged", "value": 1, "run_id": "`+tn.teamRun+`"}`)); err != nil {
		t.Fatal(err)
	}
	spy.violation(t, "plaudit.v1."+tn.teamWS)

	// Team works: 40 signals over NATS with the key in a header, 10 judge
	// requests its worker answers.
	team := newNATSClient(t, tn.s, tn.teamKey)
	for range 40 {
		team.must("plaudit.v1."+tn.teamWS+"."+tn.teamAgent+".signal", `{"kind": "human.rating", "value": 1, "run_id": "`+tn.teamRun+`"}`)
	}
	worker := connectWatcher(t, tn.s, tn.teamKey)
	if _, err := worker.nc.QueueSubscribe("plaudit.judge."+tn.teamWS+".tone", "judges", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"met": true}`))
	}); err != nil {
		t.Fatal(err)
	}
	if err := worker.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		rep, err := tn.s.embedded.JudgeRequest(tn.s.nc, tn.teamWS, "tone", []byte(`{"answer": "`+tn.teamKey+`"}`), 5*time.Second)
		if err != nil || string(rep.Data) != `{"met": true}` {
			t.Fatalf("judge request through team's account: %v, %v", rep, err)
		}
	}
	if err := spy.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// The forged signal was never written.
	signals := tn.api.as(tn.teamKey).must(200, "GET", "/api/v1/agents/"+tn.teamAgent+"/runs/"+tn.teamRun+"/signals", "")
	if n := len(list(t, signals, "items")); n != 40 {
		t.Fatalf("team's run has %d signals, want its 40", n)
	}
	if got := spy.received(); len(got) != 0 {
		t.Fatalf("default's connection received %d messages of team's traffic, first %q", len(got), got[0])
	}
}

// TestNATSRepliesAreForTheirRequesterOnly: every connection is an account
// of its own, so no other connection, of another workspace, of the same
// workspace or of the very same key, receives anything of the admin's
// traffic; the admin key, in the Authorization header of its requests, is
// read by none of them.
func TestNATSRepliesAreForTheirRequesterOnly(t *testing.T) {
	tn := newTenants(t)
	// They try every subscription; what the server refuses them is the
	// business of the test above, what reaches them is this one's.
	peer := connectWatcher(t, tn.s, tn.peerKey)
	team := connectWatcher(t, tn.s, tn.teamKey)
	twin := connectWatcher(t, tn.s, adminKey)
	spies := []*watcher{peer, team, twin}
	for _, w := range spies {
		for _, subject := range []string{">", "plaudit.v1.>", "_INBOX.>", "plaudit.judge.>", "plaudit.judge.default.>"} {
			w.subscribe(t, subject)
		}
	}

	admin := newNATSClient(t, tn.s, adminKey)
	run := str(t, admin.must("plaudit.v1.default."+tn.defaultAgent+".select", `{}`), "id")
	for range 20 {
		admin.must("plaudit.v1.default."+tn.defaultAgent+".signal", `{"kind": "k", "value": 1, "run_id": "`+run+`"}`)
	}
	admin.must("plaudit.v1.default."+tn.defaultAgent+".reward", `{"run_id": "`+run+`"}`)
	for i, w := range spies {
		if err := w.nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, m := range w.received() {
			if bytes.Contains(m, []byte(adminKey)) {
				t.Fatalf("spy %d read the admin key: %q", i, m)
			}
		}
		if got := w.received(); len(got) != 0 {
			t.Fatalf("spy %d (peer, team, a second admin connection) received %d messages of the admin's traffic, first %q", i, len(got), got[0])
		}
	}
}

// TestNATSRogueResponderCannotAnswer: a tenant cannot join the service's
// queue group (which $SRV.INFO advertises) nor subscribe to its subjects,
// so every request is answered, and written, by Plaudit.
func TestNATSRogueResponderCannotAnswer(t *testing.T) {
	tn := newTenants(t)
	rogue := connectWatcher(t, tn.s, tn.teamKey)
	var answered atomic.Int64
	for _, subject := range []string{"plaudit.v1.*.*.signal", "plaudit.v1." + tn.teamWS + ".*.signal"} {
		if _, err := rogue.nc.QueueSubscribe(subject, "q", func(m *nats.Msg) {
			answered.Add(1)
			_ = m.Respond([]byte(`{"id":"sig_FAKE"}`))
		}); err != nil {
			t.Fatal(err)
		}
		rogue.violation(t, subject)
	}
	team := newNATSClient(t, tn.s, tn.teamKey)
	for range 20 {
		sig := team.must("plaudit.v1."+tn.teamWS+"."+tn.teamAgent+".signal", `{"kind": "k", "value": 1, "run_id": "`+tn.teamRun+`"}`)
		if sig["id"] == "sig_FAKE" {
			t.Fatal("a rogue responder answered a signal")
		}
	}
	if n := answered.Load(); n != 0 {
		t.Fatalf("the rogue responder answered %d requests", n)
	}
	signals := tn.api.as(tn.teamKey).must(200, "GET", "/api/v1/agents/"+tn.teamAgent+"/runs/"+tn.teamRun+"/signals", "")
	if n := len(list(t, signals, "items")); n != 20 {
		t.Fatalf("%d signals written, want all 20 acknowledged ones", n)
	}
}
