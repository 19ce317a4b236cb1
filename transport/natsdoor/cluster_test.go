package natsdoor

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/freeport"
)

// freePorts returns n loopback addresses free a moment ago (freeport).
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	addrs, err := freeport.Addrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// startCluster starts n embedded servers routed into one NATS cluster with
// JetStream (each given every node's route address, as a real cluster's
// configuration lists them), each with Plaudit's own connection.
func startCluster(t *testing.T, n int, secret string) []*fixture {
	t.Helper()
	var fs []*fixture
	routes := freePorts(t, n)
	for i := range n {
		e, err := NewEmbedded(fakeAuth)
		if err != nil {
			t.Fatal(err)
		}
		opts := e.Options("127.0.0.1", server.RANDOM_PORT)
		c := Cluster{Name: "c", Node: string(rune('a' + i)), Listen: routes[i], Routes: routes, Secret: secret,
			StoreDir: t.TempDir()}
		if err := c.Apply(opts); err != nil {
			t.Fatal(err)
		}
		s, err := e.Start(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		f := &fixture{e: e, srv: s, url: s.ClientURL()}
		if f.nc, err = nats.Connect(f.url, e.ConnectOptions()...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.nc.Close)
		fs = append(fs, f)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, f := range fs {
		for f.srv.NumRoutes() < n-1 {
			if time.Now().After(deadline) {
				t.Fatalf("server %s has %d routes, want %d", f.srv.Name(), f.srv.NumRoutes(), n-1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return fs
}

func TestClusteredServersShareJetStreamInTheServiceAccountOnly(t *testing.T) {
	fs := startCluster(t, 3, "s3cret")
	js1, err := jetstream.New(fs[0].nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var kv jetstream.KeyValue
	for { // the JetStream meta group elects its leader once the routes are up
		attempt, stop := context.WithTimeout(ctx, 2*time.Second)
		kv, err = js1.CreateKeyValue(attempt, jetstream.KeyValueConfig{Bucket: "t", Replicas: 3, Storage: jetstream.FileStorage})
		stop()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("creating an R3 bucket: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	js3, err := jetstream.New(fs[2].nc)
	if err != nil {
		t.Fatal(err)
	}
	kv3, err := js3.KeyValue(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv3.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("the third server's Get: %v, %v; want v", e, err)
	}
	// A tenant's connection has no JetStream: its account never had it,
	// and its permissions allow no $JS API subject.
	tenant, _ := fs[1].tenant(t, "ka")
	jsT, err := jetstream.New(tenant)
	if err != nil {
		t.Fatal(err)
	}
	short, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	if _, err := jsT.AccountInfo(short); err == nil {
		t.Fatal("a tenant connection reached JetStream")
	}
}

func TestARouteWithoutTheSecretCannotJoin(t *testing.T) {
	fs := startCluster(t, 1, "s3cret")
	e, err := NewEmbedded(fakeAuth)
	if err != nil {
		t.Fatal(err)
	}
	opts := e.Options("127.0.0.1", server.RANDOM_PORT)
	c := Cluster{Name: "c", Node: "x", Listen: freePorts(t, 1)[0], Secret: "wrong",
		Routes: []string{fs[0].srv.ClusterAddr().String()}, StoreDir: t.TempDir()}
	if err := c.Apply(opts); err != nil {
		t.Fatal(err)
	}
	s, err := e.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	time.Sleep(time.Second) // a route is attempted at once, then every second
	if n := fs[0].srv.NumRoutes(); n != 0 {
		t.Fatalf("a server with the wrong secret made %d routes", n)
	}
}

// Servers of a cluster share account names: a judge request for one
// connection on one server must not reach a connection on another server
// whose connection account would carry the same name (the same workspace,
// another key).
func TestAJudgeRequestReachesOnlyItsOwnConnectionAcrossServers(t *testing.T) {
	fs := startCluster(t, 2, "")
	a, _ := fs[0].tenant(t, "ka")
	other, _ := fs[1].tenant(t, "ka2")
	if _, err := a.Subscribe("plaudit.judge.wsa.tone", func(m *nats.Msg) { _ = m.Respond([]byte(`{"met":true}`)) }); err != nil {
		t.Fatal(err)
	}
	leak, err := other.SubscribeSync("plaudit.judge.wsa.tone")
	if err != nil {
		t.Fatal(err)
	}
	flush(t, a, other)
	time.Sleep(200 * time.Millisecond) // the subscriptions' interest crosses the route
	rep, err := fs[0].e.JudgeRequest(fs[0].nc, "wsa", "tone", []byte(`{"text":"for a"}`), wait)
	if err != nil || string(rep.Data) != `{"met":true}` {
		t.Fatalf("judge request: %v, %v", rep, err)
	}
	if m, err := leak.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("another key's connection on the other server received a's judge request %q", m.Data)
	}
}
