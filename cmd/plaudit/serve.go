package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/plaudit/plaudit/server"
)

// serveCmd is `plaudit serve`. Every flag is also read from the
// environment variable PLAUDIT_<FLAG IN UPPER SNAKE CASE>; a flag given on
// the command line wins. PLAUDIT_BOOTSTRAP_KEY (the first start's admin
// key) is read from the environment only, so it never shows in ps.
type serveCmd struct {
	Data             string        `default:"./data" env:"PLAUDIT_DATA" help:"Data directory (Pebble)."`
	HTTP             string        `name:"http" default:":8080" env:"PLAUDIT_HTTP" help:"HTTP listen address."`
	NATSListen       string        `name:"nats-listen" default:"127.0.0.1:4222" env:"PLAUDIT_NATS_LISTEN" help:"Address of the embedded NATS server."`
	NATSURL          string        `name:"nats-url" env:"PLAUDIT_NATS_URL" placeholder:"URL" help:"Connect to this NATS server instead of embedding one."`
	NATSCreds        string        `name:"nats-creds" env:"PLAUDIT_NATS_CREDS" placeholder:"FILE" help:"Credentials file (JWT and nkey seed) of Plaudit's connection to --nats-url."`
	NATSNkey         string        `name:"nats-nkey" env:"PLAUDIT_NATS_NKEY" placeholder:"FILE" help:"Nkey seed file of Plaudit's connection to --nats-url."`
	MaxBody          int           `name:"max-body" default:"1048576" env:"PLAUDIT_MAX_BODY" help:"Largest accepted request body, in bytes."`
	BodyBudget       int           `name:"body-budget" default:"67108864" env:"PLAUDIT_BODY_BUDGET" help:"Bytes of HTTP request bodies read at once, across all connections, before 503."`
	BodyTimeout      time.Duration `name:"body-timeout" default:"10s" env:"PLAUDIT_BODY_TIMEOUT" help:"How long an HTTP request body may take to arrive after its headers."`
	SnapshotEvery    int           `name:"snapshot-every" default:"10000" env:"PLAUDIT_SNAPSHOT_EVERY" help:"Snapshot an agent after this many events."`
	SnapshotInterval time.Duration `name:"snapshot-interval" default:"1m" env:"PLAUDIT_SNAPSHOT_INTERVAL" help:"Snapshot an agent this long after its first unsnapshotted event."`
	IdleTimeout      time.Duration `name:"idle-timeout" default:"5m" env:"PLAUDIT_IDLE_TIMEOUT" help:"Passivate an agent actor idle this long."`
	MailboxLimit     int           `name:"mailbox-limit" default:"1024" env:"PLAUDIT_MAILBOX_LIMIT" help:"Requests in flight per agent before 503."`
	IdempotencyTTL   time.Duration `name:"idempotency-ttl" default:"24h" env:"PLAUDIT_IDEMPOTENCY_TTL" help:"Keep Idempotency-Key records this long."`
	JudgeDeadline    time.Duration `name:"judge-deadline" default:"30s" env:"PLAUDIT_JUDGE_DEADLINE" help:"Ask a judged reward's model judges this long before it fails."`
	RequestDeadline  time.Duration `name:"request-deadline" default:"5s" env:"PLAUDIT_REQUEST_DEADLINE" help:"Drop a request still waiting for its agent this long after admission (503 overloaded, Retry-After)."`
	MinFreeBytes     int64         `name:"min-free-bytes" default:"0" env:"PLAUDIT_MIN_FREE_BYTES" help:"Refuse writes (503 storage_full) below this much free disk (0: 5% of the disk, at most 256 MiB)."`
	BallastBytes     int64         `name:"ballast-bytes" default:"0" env:"PLAUDIT_BALLAST_BYTES" help:"Size of the ballast file kept in the data directory (0: 1% of the disk, at most 256 MiB; negative: none)."`
	DurableSelect    bool          `name:"durable-select" env:"PLAUDIT_DURABLE_SELECT" help:"Answer run creation only after its fsync, like every other write."`
	LogLevel         string        `name:"log-level" default:"info" enum:"debug,info,warn,error" env:"PLAUDIT_LOG_LEVEL" help:"debug, info, warn or error."`
	LogFormat        string        `name:"log-format" default:"text" enum:"text,json" env:"PLAUDIT_LOG_FORMAT" help:"text or json (slog's TextHandler or JSONHandler, on stderr)."`
	AccessLog        bool          `name:"access-log" env:"PLAUDIT_ACCESS_LOG" help:"Log one line per answered request: request id, workspace, door, operation, status, duration."`
	Metrics          string        `name:"metrics" env:"PLAUDIT_METRICS" placeholder:"ADDR" help:"Serve GET /metrics on this address of its own instead of the HTTP port."`
	Pprof            string        `name:"pprof" env:"PLAUDIT_PPROF" placeholder:"ADDR" help:"Serve net/http/pprof on this loopback address (e.g. 127.0.0.1:6060); off when empty."`
	PprofMutex       int           `name:"pprof-mutex-fraction" default:"0" env:"PLAUDIT_PPROF_MUTEX_FRACTION" help:"With --pprof: runtime.SetMutexProfileFraction (0: mutex profile off)."`
	PprofBlock       int           `name:"pprof-block-rate" default:"0" env:"PLAUDIT_PPROF_BLOCK_RATE" help:"With --pprof: runtime.SetBlockProfileRate in ns (0: block profile off)."`

	// A cluster node: PLAUDIT_CLUSTER_SECRET, which the routes authenticate
	// with, is read from the environment only, like the bootstrap key.
	Cluster           string        `name:"cluster" env:"PLAUDIT_CLUSTER" placeholder:"NAME" help:"Run as a node of the Plaudit cluster NAME (docs/cluster.md); needs --node, and --nats-cluster-listen and --nats-routes or --nats-url."`
	Node              string        `name:"node" env:"PLAUDIT_NODE" placeholder:"ID" help:"This node's id in the cluster: 1-64 letters, digits, '-' or '_', unique."`
	NATSClusterListen string        `name:"nats-cluster-listen" env:"PLAUDIT_NATS_CLUSTER_LISTEN" placeholder:"ADDR" help:"Address the embedded NATS listens on for the other nodes' routes."`
	NATSRoutes        []string      `name:"nats-routes" env:"PLAUDIT_NATS_ROUTES" sep:"," placeholder:"ADDR,..." help:"Every node's --nats-cluster-listen address (this node's may be among them)."`
	Partitions        int           `name:"partitions" default:"0" env:"PLAUDIT_PARTITIONS" help:"Partitions of a new cluster (0: 64); a node joining takes the cluster's."`
	LeaseTTL          time.Duration `name:"lease-ttl" default:"0s" env:"PLAUDIT_LEASE_TTL" help:"How long a stopped node's partitions wait before another node takes them, for a new cluster (0: 6s)."`
	Replicas          int           `name:"replicas" default:"0" env:"PLAUDIT_REPLICAS" help:"Copies JetStream keeps of the cluster's log, leases and directory (0: 3, or fewer NATS servers)."`
	ClaimWindow       time.Duration `name:"claim-window" default:"0s" env:"PLAUDIT_CLAIM_WINDOW" help:"How long a unique key (an external id, an Idempotency-Key record) claimed by a write that then failed stays taken (0: 1m); the nodes' clocks must agree to well within it."`
}

// config is the server.Config the flags describe, without a logger.
func (c serveCmd) config() server.Config {
	return server.Config{DataDir: c.Data, HTTPAddr: c.HTTP, NATSListen: c.NATSListen, NATSURL: c.NATSURL,
		NATSCreds: c.NATSCreds, NATSNkey: c.NATSNkey, MaxBody: c.MaxBody, BodyBudget: c.BodyBudget,
		BodyTimeout: c.BodyTimeout, SnapshotEvery: c.SnapshotEvery, SnapshotInterval: c.SnapshotInterval,
		IdleTimeout: c.IdleTimeout, MailboxLimit: c.MailboxLimit, IdempotencyTTL: c.IdempotencyTTL,
		JudgeDeadline: c.JudgeDeadline, RequestDeadline: c.RequestDeadline, MinFreeBytes: c.MinFreeBytes,
		BallastBytes: c.BallastBytes, DurableSelect: c.DurableSelect, AccessLog: c.AccessLog, MetricsAddr: c.Metrics,
		BootstrapKey: os.Getenv("PLAUDIT_BOOTSTRAP_KEY"), Version: version, Cluster: c.cluster()}
}

// cluster is the node's cluster configuration; nil without --cluster.
func (c serveCmd) cluster() *server.ClusterConfig {
	if c.Cluster == "" {
		return nil
	}
	return &server.ClusterConfig{Name: c.Cluster, Node: c.Node, Listen: c.NATSClusterListen, Routes: c.NATSRoutes,
		Secret: os.Getenv("PLAUDIT_CLUSTER_SECRET"), Partitions: c.Partitions, LeaseTTL: c.LeaseTTL, Replicas: c.Replicas,
		ClaimWindow: c.ClaimWindow}
}

// minBootstrapKey is the shortest PLAUDIT_BOOTSTRAP_KEY taken.
const minBootstrapKey = 16

// Validate refuses a cluster flag without the others it needs.
func (c serveCmd) Validate() error {
	// An address given empty (PLAUDIT_HTTP= in an environment file) would
	// listen on a random port of every interface.
	if strings.TrimSpace(c.HTTP) == "" {
		return errors.New("--http: an address is needed (host:port, or :port)")
	}
	if strings.TrimSpace(c.Data) == "" {
		return errors.New("--data: a directory is needed")
	}
	// Keys are random, 128 bits or more (the contract); a chosen admin key
	// shorter than 16 characters cannot be, whatever it holds.
	if k := os.Getenv("PLAUDIT_BOOTSTRAP_KEY"); k != "" && len(k) < minBootstrapKey {
		return fmt.Errorf("PLAUDIT_BOOTSTRAP_KEY: at least %d characters (pl_$(openssl rand -hex 24), say)", minBootstrapKey)
	}
	routed := c.NATSClusterListen != "" || len(c.NATSRoutes) > 0
	if c.Cluster == "" {
		if c.Node != "" || routed || c.Replicas != 0 || c.Partitions != 0 || c.LeaseTTL != 0 || c.ClaimWindow != 0 {
			return errors.New("--node, --nats-cluster-listen, --nats-routes, --replicas, --partitions, --lease-ttl and --claim-window need --cluster")
		}
		return nil
	}
	switch {
	case c.Node == "":
		return errors.New("--cluster needs --node")
	case c.NATSURL != "" && routed:
		return errors.New("--cluster with --nats-url uses that NATS cluster: drop --nats-cluster-listen and --nats-routes")
	case c.NATSURL != "":
	case c.NATSClusterListen == "":
		return errors.New("--cluster needs --nats-cluster-listen (or --nats-url)")
	case len(c.NATSRoutes) == 0:
		return errors.New("--cluster needs --nats-routes")
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		return errors.New("--replicas: 1 to 5 (0: the default)")
	}
	return nil
}

// Run serves until SIGINT or SIGTERM, then drains.
func (c *serveCmd) Run(con *console) error {
	logger, err := server.NewLogger(c.LogFormat, c.LogLevel, con.Err)
	if err != nil {
		return err
	}
	cfg := c.config()
	cfg.Logger = logger
	if c.Pprof != "" {
		closePprof, err := servePprof(c.Pprof, c.PprofMutex, c.PprofBlock, logger)
		if err != nil {
			return err
		}
		defer closePprof()
	}

	srv, err := server.Start(cfg)
	if err != nil {
		return err
	}
	if srv.AdminKey != "" {
		fmt.Fprintf(con.Out, "admin key (shown once, keep it): %s\n", srv.AdminKey)
	}
	metricsAt := srv.MetricsAddr()
	if metricsAt == "" {
		metricsAt = srv.HTTPAddr()
	}
	logger.Info("plaudit ready", "http", srv.HTTPAddr(), "nats", srv.NATSURL(), "metrics", metricsAt+"/metrics",
		"data", cfg.DataDir, "account", srv.AccountID(), "cluster", c.Cluster, "node", c.Node)

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	sig := <-sigs
	logger.Info("draining", "signal", sig.String())
	go func() {
		// A second signal stops at once: what was acknowledged is synced,
		// so this loses nothing a kill -9 would not.
		sig := <-sigs
		logger.Warn("stopped without draining", "signal", sig.String())
		os.Exit(1)
	}()
	if err := srv.Close(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}
