// Package server assembles Plaudit from its parts: the Pebble store, the
// tenancy, the agent actors, the service, the NATS door (on an embedded,
// authenticating nats-server by default) and the HTTP door. cmd/plaudit and
// the end-to-end tests start the same Server.
package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/backup"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/pebblelog"
	"github.com/plaudit/plaudit/transport/api"
	"github.com/plaudit/plaudit/transport/console"
	"github.com/plaudit/plaudit/transport/httpdoor"
	"github.com/plaudit/plaudit/transport/idempotency"
	"github.com/plaudit/plaudit/transport/judging"
	"github.com/plaudit/plaudit/transport/natsdoor"
	"github.com/plaudit/plaudit/transport/tenancy"
)

// Config is everything `plaudit serve` can be told.
type Config struct {
	DataDir string // Pebble directory
	// FS is the data directory's file system (default the OS's); tests
	// pass one that fails like a disk.
	FS vfs.FS
	// MinFreeBytes and BallastBytes tune the full-disk guard (see
	// pebblelog.Options.MinFree and BallastSize); zero takes the defaults.
	MinFreeBytes int64
	BallastBytes int64
	HTTPAddr     string // e.g. ":8080"; "127.0.0.1:0" picks a port
	NATSListen   string // embedded nats-server address, e.g. "127.0.0.1:4222"
	NATSURL      string // connect to this NATS instead of embedding one
	// NATSCreds and NATSNkey authenticate Plaudit's connection to an
	// external NATS: a credentials file (JWT and seed) or an nkey seed file.
	NATSCreds    string
	NATSNkey     string
	MaxBody      int
	BootstrapKey string // PLAUDIT_BOOTSTRAP_KEY

	// BodyBudget and BodyTimeout bound what slow HTTP bodies can hold: the
	// bytes of bodies being read at once (64 MiB) and how long a body may
	// take to arrive after its headers (10s). See httpdoor.Config.
	BodyBudget  int
	BodyTimeout time.Duration

	SnapshotEvery    int
	SnapshotInterval time.Duration
	IdleTimeout      time.Duration
	MailboxLimit     int
	DurableSelect    bool // run creation waits for its fsync too

	Logger *slog.Logger
	// AccessLog logs one INFO line per answered request, on both doors:
	// request id, workspace, door, operation, status and duration.
	AccessLog bool
	// MetricsAddr serves GET /metrics on a listener of its own (e.g.
	// "127.0.0.1:9090"), and not on the HTTP door; empty serves it on the
	// HTTP door, unauthenticated like /healthz.
	MetricsAddr string
	// NoConsole leaves the web console (transport/console) off the HTTP
	// door; by default it is served at /ui/.
	NoConsole bool
	// ConsolePoll is how often the console's agent page polls for changes
	// (3s).
	ConsolePoll time.Duration

	Now     func() time.Time
	Version string // reported by the NATS service's $SRV.INFO

	IdempotencyTTL  time.Duration // how long Idempotency-Key records are kept (24h)
	JudgeDeadline   time.Duration // how long a judged reward's model judges are asked before it fails (30s)
	RequestDeadline time.Duration // how long a request may wait for its agent (5s)
	// UsageSaveInterval is how often the keys' last use is written (1m);
	// see tenancy.SaveUsage.
	UsageSaveInterval time.Duration

	// Cluster, when set, makes the server a node of a Plaudit cluster (see
	// ClusterConfig), on the embedded NATS or the one at NATSURL.
	Cluster *ClusterConfig
}

// Server is a running Plaudit.
type Server struct {
	cfg      Config
	store    *pebblelog.Store
	tenancy  *tenancy.Tenancy
	registry *actors.Registry
	service  *api.Service
	embedded *natsdoor.Embedded // nil when connected to an external NATS
	nats     *natsserver.Server // nil when connected to an external NATS
	nc       *nats.Conn
	http     *httpdoor.Door
	natsDoor *natsdoor.Door
	httpLn   net.Listener
	standby  *httpdoor.Standby // answers on httpLn until the door serves it
	httpDone chan error
	// metricsSrv serves /metrics on Config.MetricsAddr; nil without one.
	metricsSrv  *http.Server
	metricsLn   net.Listener
	metricsDone chan error

	usageStop, usageDone chan struct{} // saveUsage's; nil until it runs

	// cluster is the node's cluster parts; nil for a single node.
	cluster *clusterNode
	// auth is the tenancy as the embedded NATS authenticates with it: set
	// once the tenancy is loaded (a cluster node starts NATS before).
	auth atomic.Pointer[tenancy.Tenancy]

	// AdminKey is the admin key made at first start when none was given;
	// empty otherwise. It is shown once.
	AdminKey string
}

// Start opens the HTTP listener, the store and the tenancy, starts NATS
// and the doors, commits the first start's bootstrap, and marks the server
// ready.
//
// Every listener is open before anything is written: a start that fails
// on a taken port leaves the data directory as it was, and the first start
// that succeeds makes the admin key and shows it (tenancy.Bootstrap).
func Start(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Version == "" {
		cfg.Version = "0.1.0"
	}
	if cfg.UsageSaveInterval <= 0 {
		cfg.UsageSaveInterval = time.Minute
	}
	s := &Server{cfg: cfg, httpDone: make(chan error, 1)}
	if err := s.start(); err != nil {
		if s.standby != nil {
			s.standby.Stop()
		}
		_ = s.closeAll()
		if s.httpLn != nil {
			_ = s.httpLn.Close()
		}
		return nil, err
	}
	return s, nil
}

func (s *Server) start() (err error) {
	cfg := s.cfg
	// The HTTP port first: taken, it fails the start before the data
	// directory is touched. Until the door serves it, a standby answers
	// every request 503 at once: a cluster node may wait minutes for its
	// peers.
	if s.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return fmt.Errorf("http: %w", err)
	}
	reason := "opening its store"
	if cfg.Cluster != nil {
		reason = "joining cluster " + cfg.Cluster.Name
	}
	if s.standby, err = httpdoor.StartStandby(s.httpLn, reason, cfg.Logger); err != nil {
		return fmt.Errorf("http: %w", err)
	}
	if s.store, err = pebblelog.Open(cfg.DataDir, pebblelog.Options{FS: cfg.FS, Logger: cfg.Logger,
		MinFree: cfg.MinFreeBytes, BallastSize: cfg.BallastBytes,
		FilterPrefixes: [][]byte{[]byte(idempotency.RecordPrefix), []byte(judging.AnswerPrefix)}}); err != nil {
		return err
	}
	// What the tenancy, the actors and the service keep their data in:
	// the node's own store, or in a cluster the store on JetStream (which
	// needs NATS first).
	var store persist.Store = s.store
	if cfg.Cluster != nil {
		if err = s.startNATS(); err != nil {
			return err
		}
		if s.cluster, err = s.joinCluster(); err != nil {
			return err
		}
		store = s.cluster.store
	}
	if s.tenancy, err = tenancy.Load(store, cfg.Now); err != nil {
		return fmt.Errorf("tenancy: %w", err)
	}
	if s.cluster != nil {
		// Keys and workspaces made on other nodes, from now on and since Load.
		s.cluster.dir.OnApply(s.tenancy.Apply)
		s.tenancy.CatchUpOnMiss(s.cluster.dir.CatchUp)
		if err = s.tenancy.Refresh(); err != nil {
			return fmt.Errorf("tenancy: %w", err)
		}
	}
	s.auth.Store(s.tenancy)
	var (
		serves       func(string) bool
		selectWindow time.Duration // the default
	)
	recoveries := 0 // the default: GOMAXPROCS at once
	if s.cluster != nil {
		serves = s.cluster.serves
		// Other nodes find a run only once its append has reached the
		// directory, so a selection does not wait to be appended.
		selectWindow = -1
		recoveries = -1 // loads wait on JetStream, not on the CPU
	}
	s.registry = actors.New(actors.Config{Store: store, SnapshotEvery: cfg.SnapshotEvery,
		SnapshotInterval: cfg.SnapshotInterval, IdleTimeout: cfg.IdleTimeout, MailboxLimit: cfg.MailboxLimit,
		Now: cfg.Now, Logger: cfg.Logger, DurableSelect: cfg.DurableSelect, Serves: serves, SelectSyncWindow: selectWindow,
		Recoveries: recoveries, ClaimsAtAppend: s.cluster != nil})
	// NATS comes first: the service resumes pending judged rewards, whose
	// judges it asks over NATS, as soon as it is ready.
	if s.cluster == nil {
		if err = s.startNATS(); err != nil {
			return err
		}
	}
	if s.embedded != nil {
		s.tenancy.OnRevoke(func(p tenancy.Principal) { s.embedded.Disconnect(p.KeyID) })
	}
	apiCfg := api.Config{IdempotencyTTL: cfg.IdempotencyTTL, Now: cfg.Now, Logger: cfg.Logger,
		Judge: s.judgeSender(), JudgeDeadline: cfg.JudgeDeadline, RequestDeadline: cfg.RequestDeadline, Storage: s.store.Condition,
		AccessLog: cfg.AccessLog,
		// A judge request goes bare, or relayed to another node with a few
		// headers: what the server carries, less room for them.
		JudgeMaxRequest: int(s.nc.MaxPayload()) - judgeHeaderRoom}
	if s.cluster != nil {
		apiCfg.Router = natsdoor.NewForwarder(s.nc, s.cluster.serves, s.cluster.owner, s.cluster.stale)
		apiCfg.Cluster = s.cluster.status
	}
	s.service, err = api.New(apiCfg, s.registry, s.tenancy, store)
	if err != nil {
		return err
	}
	if s.cluster != nil {
		if s.cluster.fwd, err = natsdoor.ServeForwarded(s.nc, s.cluster.cfg.Node, s.service, cfg.Logger); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		if s.embedded != nil {
			if s.cluster.judge, err = natsdoor.ServeJudgeRequests(s.nc, s.cluster.cfg.Node, s.embedded, cfg.Logger); err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
		}
		if err = s.cluster.startLeases(s, s.registry); err != nil {
			return err
		}
	}
	doorCfg := natsdoor.Config{MaxBody: cfg.MaxBody, Version: cfg.Version, Logger: cfg.Logger}
	if s.embedded != nil {
		doorCfg.Identity = s.embedded.Requester
	}
	s.natsDoor, err = natsdoor.Start(s.nc, s.service, doorCfg)
	if err != nil {
		return err
	}
	metrics := metricsHandler(s.metricsRegistry())
	doorMetrics := metrics
	if cfg.MetricsAddr != "" {
		doorMetrics = nil
		if err = s.serveMetrics(cfg.MetricsAddr, metrics); err != nil {
			return err
		}
	}
	var ui http.Handler
	if !cfg.NoConsole {
		if ui, err = console.New(console.Config{Poll: cfg.ConsolePoll, Now: cfg.Now, Logger: cfg.Logger}, s.service); err != nil {
			return fmt.Errorf("console: %w", err)
		}
	}
	backup := s.backup
	if s.cluster != nil {
		backup = nil // a node's store holds a mirror, not the cluster's data
	}
	s.http = httpdoor.New(httpdoor.Config{MaxBody: cfg.MaxBody, BodyBudget: cfg.BodyBudget,
		BodyTimeout: cfg.BodyTimeout, Logger: cfg.Logger, Metrics: doorMetrics,
		Backup: backup, UI: ui}, s.service)
	// Every door listens: only now may the first start write its account
	// and admin key.
	if s.AdminKey, err = s.tenancy.Bootstrap(cfg.BootstrapKey); err != nil {
		return fmt.Errorf("tenancy: %w", err)
	}
	s.standby.Stop()
	go func() { s.httpDone <- s.http.Serve(s.httpLn) }()
	s.usageStop, s.usageDone = make(chan struct{}), make(chan struct{})
	go s.saveUsage()
	// Agents recover lazily, on their first request; the tenancy is loaded,
	// so the server is ready.
	s.service.SetReady()
	return nil
}

// saveUsage writes the keys' last use every UsageSaveInterval until
// Close, which writes it once more.
func (s *Server) saveUsage() {
	defer close(s.usageDone)
	tick := time.NewTicker(s.cfg.UsageSaveInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.usageStop:
			return
		case <-tick.C:
			if err := s.tenancy.SaveUsage(); err != nil {
				s.cfg.Logger.Warn("saving the keys' last use", "err", err)
			}
		}
	}
}

// startNATS embeds an authenticating nats-server (clients connect with an
// API key as their token; see natsdoor.Embedded) and connects to it with
// Plaudit's own nkey, in process (no socket between the door and its
// server: a tenth off a request at 1 in flight, BENCHMARKS.md), or
// connects to the external NATS at NATSURL.
// judgeHeaderRoom is what a judge request leaves of the server's
// max_payload for the headers a relay to another node adds.
const judgeHeaderRoom = 4 << 10

// natsHeaderRoom is what the embedded server's max_payload allows beyond
// the body limit, for a request's headers.
const natsHeaderRoom = 64 << 10

func (s *Server) startNATS() error {
	url := s.cfg.NATSURL
	opts := []nats.Option{nats.Name("plaudit"), nats.MaxReconnects(-1)}
	if url == "" {
		host, portStr, err := net.SplitHostPort(s.cfg.NATSListen)
		if err != nil {
			return fmt.Errorf("nats-listen %q: %w", s.cfg.NATSListen, err)
		}
		port, err := strconv.Atoi(portStr)
		if err != nil {
			return fmt.Errorf("nats-listen %q: %w", s.cfg.NATSListen, err)
		}
		if port == 0 {
			port = natsserver.RANDOM_PORT
		}
		s.embedded, err = natsdoor.NewEmbedded(func(token string) (natsdoor.Key, bool) {
			ten := s.auth.Load()
			if ten == nil { // a cluster node still joining
				return natsdoor.Key{}, false
			}
			p, err := ten.AuthenticateKey(token)
			return natsdoor.Key{ID: p.KeyID, Workspace: p.Home, Admin: p.Admin}, err == nil
		})
		if err != nil {
			return err
		}
		nopts := s.embedded.Options(host, port)
		// Room for a body of MaxBody and its headers: a larger body is then
		// the door's 413, as over HTTP, not the client library's refusal.
		maxBody := s.cfg.MaxBody
		if maxBody <= 0 {
			maxBody = natsdoor.DefaultMaxBody
		}
		nopts.MaxPayload = int32(min(maxBody+natsHeaderRoom, math.MaxInt32))
		if c := s.cfg.Cluster; c != nil {
			if err := c.natsCluster(s.cfg.DataDir).Apply(nopts); err != nil {
				return err
			}
			// Another node's service may take a request of this node's
			// clients: it reads their key from the account's signed name.
			// (Without a secret the name is not signed, and such a request
			// needs its Authorization header.)
			if c.Secret != "" {
				s.embedded.IdentityKey = natsdoor.IdentityKey(c.Secret)
			}
		}
		s.embedded.Logger = natsdoor.ServerLogger(s.cfg.Logger)
		ns, err := s.embedded.Start(nopts)
		if err != nil {
			return err
		}
		s.nats = ns
		url = ns.ClientURL()
		opts = append(opts, nats.InProcessServer(ns))
		opts = append(opts, s.embedded.ConnectOptions()...)
	}
	switch {
	case s.cfg.NATSCreds != "":
		opts = append(opts, nats.UserCredentials(s.cfg.NATSCreds))
	case s.cfg.NATSNkey != "":
		o, err := nats.NkeyOptionFromSeed(s.cfg.NATSNkey)
		if err != nil {
			return fmt.Errorf("nats-nkey: %w", err)
		}
		opts = append(opts, o)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("nats connect %s: %w", redact(url), err)
	}
	s.nc = nc
	return nil
}

// judgeSender sends judge requests over Plaudit's own connection: on the
// embedded server to one serving connection of the workspace (see
// natsdoor.Embedded.JudgeRequest), on an external NATS as a plain request
// on plaudit.judge.<ws>.<subject>, which the operator's accounts route.
func (s *Server) judgeSender() func(ws, subject string, data []byte, timeout time.Duration) ([]byte, error) {
	nc, embedded := s.nc, s.embedded
	return func(ws, subject string, data []byte, timeout time.Duration) ([]byte, error) {
		var (
			msg *nats.Msg
			err error
		)
		if embedded != nil {
			msg, err = embedded.JudgeRequest(nc, ws, subject, data, timeout)
		} else {
			msg, err = nc.Request("plaudit.judge."+ws+"."+subject, data, timeout)
		}
		if errors.Is(err, nats.ErrNoResponders) && embedded != nil && s.cluster != nil {
			// No worker on this node's server: one on another node's.
			return s.cluster.relayJudge(nc, ws, subject, data, timeout)
		}
		if err != nil {
			return nil, err
		}
		return msg.Data, nil
	}
}

// redact hides credentials in a NATS URL for error messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = url.User("***")
	return u.String()
}

// serveMetrics serves GET /metrics on a listener of its own at addr.
func (s *Server) serveMetrics(addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	s.metricsLn, s.metricsDone = ln, make(chan error, 1)
	s.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { s.metricsDone <- s.metricsSrv.Serve(ln) }()
	return nil
}

// MetricsAddr is the address /metrics is served on with Config.MetricsAddr
// set; empty otherwise (it is then on the HTTP door).
func (s *Server) MetricsAddr() string {
	if s.metricsLn == nil {
		return ""
	}
	return s.metricsLn.Addr().String()
}

// backup serves the admin backup endpoint: a checkpoint of the store
// (hard links under <data>/plaudit-checkpoints), streamed and removed.
func (s *Server) backup() (func(io.Writer) error, error) {
	started := time.Now()
	stream, err := backup.Take(s.store, s.cfg.Version, s.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	s.cfg.Logger.Info("backup started", "component", "backup")
	return func(w io.Writer) error {
		err := stream(w)
		s.cfg.Logger.Info("backup ended", "component", "backup", "took", time.Since(started), "err", err)
		return err
	}, nil
}

// HTTPAddr is the address the HTTP door listens on.
func (s *Server) HTTPAddr() string { return s.httpLn.Addr().String() }

// NATSURL is the URL of the NATS the server uses.
func (s *Server) NATSURL() string { return s.nc.ConnectedUrl() }

// AccountID is the installation's account id.
func (s *Server) AccountID() string { return s.tenancy.AccountID() }

// Close drains: the HTTP door stops accepting and finishes open requests,
// actors finish their in-flight writes, then NATS and the store close.
func (s *Server) Close() error {
	var errs []error
	if s.service != nil {
		s.service.Drain() // no open request waits for a judge now
	}
	if s.http != nil {
		errs = append(errs, s.http.Shutdown())
		// Shutdown closes only the listeners Serve has registered: one
		// that Serve has not reached yet (a SIGTERM just after Start) is
		// closed here, or Serve would accept on it forever.
		if err := s.httpLn.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
		if err := <-s.httpDone; err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
		s.http = nil
	}
	errs = append(errs, s.closeAll())
	return errors.Join(errs...)
}

func (s *Server) closeAll() error {
	if s.metricsSrv != nil {
		_ = s.metricsSrv.Close()
		<-s.metricsDone
		s.metricsSrv = nil
	}
	var errs []error
	saveUsage := s.usageStop != nil // the server started: its keys' uses are worth a last save
	if saveUsage {
		close(s.usageStop)
		<-s.usageDone
		s.usageStop = nil
	}
	if s.natsDoor != nil {
		_ = s.natsDoor.Stop()
		s.natsDoor = nil
	}
	// A cluster node saves its keys' last use while its directory can
	// still write (the doors are closed), then hands its partitions over:
	// each one's actors finish their writes first.
	if s.cluster != nil {
		if saveUsage {
			if err := s.tenancy.SaveUsage(); err != nil {
				s.cfg.Logger.Warn("saving the keys' last use", "err", err)
			}
			saveUsage = false
		}
		s.cluster.stop()
	}
	if s.service != nil {
		s.service.Close()
		s.service = nil
	}
	if s.registry != nil {
		s.registry.Close()
		s.registry = nil
	}
	if s.nc != nil {
		s.nc.Close()
		s.nc = nil
	}
	if s.cluster != nil && s.cluster.dir != nil {
		s.cluster.dir.Close()
	}
	if s.nats != nil {
		s.nats.Shutdown()
		s.nats.WaitForShutdown()
		s.nats = nil
	}
	// Both doors are closed: no key authenticates any more. A failed save
	// (a full disk) loses only the last minute of last uses: it is logged,
	// and does not fail the shutdown.
	if saveUsage {
		if err := s.tenancy.SaveUsage(); err != nil {
			s.cfg.Logger.Warn("saving the keys' last use", "err", err)
		}
	}
	if s.store != nil {
		errs = append(errs, s.store.Close())
		s.store = nil
	}
	return errors.Join(errs...)
}
