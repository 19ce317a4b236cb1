// Package jstest starts real nats-servers with JetStream for tests: one,
// or a cluster of routed ones, each in a temp dir, shut down when the test
// ends.
package jstest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/internal/freeport"
)

// Server starts one nats-server with JetStream and returns a connection
// to it.
func Server(t testing.TB) *nats.Conn {
	t.Helper()
	return Cluster(t, 1)
}

// Cluster starts n nats-servers with JetStream, routed into one cluster
// when n > 1 (streams may then have up to n replicas; JetStream answers
// some refusals of a replicated stream with codes of their own), and
// returns a connection to the first.
func Cluster(t testing.TB, n int) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ClusterURLs(t, n)[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ClusterURLs starts n nats-servers as Cluster does and returns their
// client URLs.
func ClusterURLs(t testing.TB, n int) []string {
	t.Helper()
	var urls []string
	for _, ns := range Servers(t, n) {
		urls = append(urls, ns.ClientURL())
	}
	return urls
}

// Servers starts n nats-servers as Cluster does and returns them, for a
// test that stops one.
func Servers(t testing.TB, n int) []*server.Server {
	t.Helper()
	var routes []*url.URL
	ports := make([]int, n)
	if n > 1 {
		addrs, err := freeport.Addrs(n)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range addrs {
			_, p, _ := net.SplitHostPort(a)
			ports[i], _ = strconv.Atoi(p)
			routes = append(routes, &url.URL{Scheme: "nats-route", Host: a})
		}
	}
	var servers []*server.Server
	for i := range n {
		opts := &server.Options{ServerName: fmt.Sprint("s", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true, SyncAlways: true}
		if n > 1 {
			opts.Cluster = server.ClusterOpts{Name: "c", Host: "127.0.0.1", Port: ports[i]}
			opts.Routes = routes
		}
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		if !ns.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats-server not ready")
		}
		servers = append(servers, ns)
	}
	if n > 1 {
		waitForMetaLeader(t, servers[0].ClientURL())
	}
	return servers
}

// waitForMetaLeader returns once the cluster's JetStream answers an
// account's request, which a leaderless cluster does not.
func waitForMetaLeader(t testing.TB, url string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the JetStream cluster has no leader after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
