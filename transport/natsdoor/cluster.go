package natsdoor

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster joins an embedded server to a NATS cluster (routes) with
// JetStream, for a Plaudit cluster: every node's server routes to the
// others, and Plaudit's own connections meet in the service account, where
// JetStream is enabled.
type Cluster struct {
	Name   string   // the NATS cluster's name
	Node   string   // this server's name, unique in the cluster
	Listen string   // host:port the routes listen on
	Routes []string // the other nodes' route addresses (host:port or nats-route:// URLs)
	// Secret, when set, is what routes authenticate with: every node must
	// be given the same. Without it any host that reaches the route port
	// can join the cluster.
	Secret   string
	StoreDir string // JetStream's directory
}

// routeUser is the user name routes authenticate as with a Secret.
const routeUser = "plaudit-route"

// Apply sets opts up to join c: routes, JetStream in StoreDir, and every
// JetStream write synced before it is acknowledged (JetStream's default
// syncs every two minutes and relies on replication, so a power cut of a
// majority could lose acknowledged writes).
func (c Cluster) Apply(opts *server.Options) error {
	if c.Name == "" || c.Node == "" || c.StoreDir == "" {
		return errors.New("natsdoor: a cluster needs a name, a node name and a store directory")
	}
	host, portStr, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("natsdoor: cluster listen %q: %w", c.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("natsdoor: cluster listen %q: %w", c.Listen, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts.ServerName = c.Node
	opts.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: port}
	if c.Secret != "" {
		opts.Cluster.Username, opts.Cluster.Password = routeUser, c.Secret
	}
	opts.Routes = nil
	for _, r := range c.Routes {
		u, err := routeURL(r)
		if err != nil {
			return err
		}
		if c.Secret != "" {
			u.User = url.UserPassword(routeUser, c.Secret)
		}
		opts.Routes = append(opts.Routes, u)
	}
	opts.JetStream = true
	opts.StoreDir = c.StoreDir
	opts.SyncAlways = true
	return nil
}

// routeURL reads a route given as host:port or as a nats-route:// URL.
func routeURL(r string) (*url.URL, error) {
	if _, _, err := net.SplitHostPort(r); err == nil {
		return &url.URL{Scheme: "nats-route", Host: r}, nil
	}
	u, err := url.Parse(r)
	if err != nil || u.Scheme != "nats-route" || u.Host == "" {
		return nil, fmt.Errorf("natsdoor: route %q: want host:port or nats-route://host:port", r)
	}
	return u, nil
}
