package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/cluster"
	"github.com/plaudit/plaudit/internal/jserr"
	"github.com/plaudit/plaudit/persist/jslog"
	"github.com/plaudit/plaudit/transport/api"
	"github.com/plaudit/plaudit/transport/natsdoor"
)

// ClusterConfig makes the server a node of a Plaudit cluster (see
// docs/cluster.md): its embedded NATS joins the other nodes' with
// JetStream, which holds the leases, the log and the directory; or, with
// Config.NATSURL, the nodes share an existing NATS cluster's JetStream
// (and Listen, Routes and Secret are not used).
type ClusterConfig struct {
	Name   string   // the cluster's name, the same on every node
	Node   string   // this node's id, unique in the cluster
	Listen string   // the address routes listen on, e.g. "127.0.0.1:6222"
	Routes []string // every node's route address (this node's may be among them)
	// Secret authenticates routes; every node must be given the same.
	Secret string
	// Partitions and LeaseTTL are the cluster's, set by its first node
	// (64, 6s); zero takes the cluster's.
	Partitions int
	LeaseTTL   time.Duration
	// Replicas is how many copies JetStream keeps of the log, leases and
	// directory: when zero, min(3, len(Routes)), or on an external NATS
	// min(3, the servers it lists and advertises).
	Replicas int
	// ClaimWindow is how long this node's claim of a unique key (an
	// external id, an Idempotency-Key record) holds it unconfirmed
	// (jslog.DirectoryConfig; zero: a minute).
	ClaimWindow time.Duration
	// JoinTimeout bounds the wait for the cluster's JetStream at start
	// (2m): a node of three waits for a second one to start.
	JoinTimeout time.Duration
}

// clusterNode is what a cluster node runs besides a single node's parts.
type clusterNode struct {
	cfg    ClusterConfig
	logger *slog.Logger
	nc     *nats.Conn
	js     jetstream.JetStream
	// embedded is set when the node runs its own NATS server, named
	// after the node, which stops with it; srv is that server.
	embedded bool
	srv      *natsserver.Server
	meta     cluster.Meta
	replicas int
	agents   *jslog.Agents
	dir      *jslog.Directory
	store    *jslog.Store
	leases   *cluster.Leases
	fwd      *nats.Subscription
	judge    *nats.Subscription // ServeJudgeRequests
	// judgeTurn rotates the node relayJudge asks first.
	judgeTurn atomic.Uint32
	stopOnce  sync.Once
}

// replicas is the copies to keep, given nc, Plaudit's connection.
func (c *ClusterConfig) replicas(nc *nats.Conn, external bool) int {
	switch {
	case c.Replicas > 0:
		return c.Replicas
	case external:
		return max(1, min(3, len(nc.Servers())))
	default:
		return max(1, min(3, len(c.Routes)))
	}
}

// natsCluster is the embedded server's cluster options.
func (c *ClusterConfig) natsCluster(dataDir string) natsdoor.Cluster {
	return natsdoor.Cluster{Name: c.Name, Node: c.Node, Listen: c.Listen, Routes: c.Routes, Secret: c.Secret,
		StoreDir: filepath.Join(dataDir, "jetstream")}
}

// joinCluster reads or creates the cluster's metadata, waiting for
// JetStream to have a leader, and opens the node's Store: agents on the
// partition logs, the directory mirrored into the node's own store.
func (s *Server) joinCluster() (*clusterNode, error) {
	cfg := *s.cfg.Cluster
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = 2 * time.Minute
	}
	js, err := jetstream.New(s.nc)
	if err != nil {
		return nil, err
	}
	c := &clusterNode{cfg: cfg, logger: s.cfg.Logger, nc: s.nc, js: js, embedded: s.cfg.NATSURL == "",
		srv: s.nats, replicas: cfg.replicas(s.nc, s.cfg.NATSURL != "")}
	want := cluster.Meta{Name: cfg.Name, Partitions: cfg.Partitions, LeaseTTLMillis: cfg.LeaseTTL.Milliseconds()}
	deadline := time.Now().Add(cfg.JoinTimeout)
	var created bool
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c.meta, created, err = cluster.Join(ctx, js, want, c.replicas)
		cancel()
		if err == nil {
			break
		}
		if errors.Is(err, cluster.ErrWrongCluster) || errors.Is(err, cluster.ErrBadConfig) || time.Now().After(deadline) {
			return nil, fmt.Errorf("cluster %s: %w", cfg.Name, err)
		}
		s.cfg.Logger.Info("waiting for the cluster's JetStream", "component", "cluster", "err", err)
		time.Sleep(time.Second)
	}
	n := c.meta.Partitions
	// The node that created the cluster makes its streams and buckets, the
	// lease bucket last; the others wait for that one, then open them. (A
	// replicated stream that several nodes ask JetStream to create at once
	// answers none of them for seconds.) Each step is retried until the
	// join's deadline.
	// If that node stopped before it made them all, the others make the
	// rest after half a minute.
	if !created {
		wait := time.Now().Add(30 * time.Second)
		if deadline.Before(wait) {
			wait = deadline
		}
		_ = s.untilJoined(wait, "the node that created the cluster",
			func(ctx context.Context) error {
				_, err := js.KeyValue(ctx, cluster.LeaseBucket)
				return err
			})
	}
	err = s.untilJoined(deadline, "the snapshot bucket", func(ctx context.Context) (err error) {
		c.agents, err = jslog.NewAgents(ctx, js, jslog.AgentsConfig{Replicas: c.replicas,
			Partition: func(agent string) int { return cluster.PartitionOf(agent, n) }})
		return err
	})
	if err != nil {
		return nil, err
	}
	// The partitions' logs exist before any node takes a partition, so
	// taking one only fences it.
	for p := range n {
		err = s.untilJoined(deadline, "a partition's log", func(ctx context.Context) error {
			_, err := jslog.Open(ctx, js, p, jslog.Config{Replicas: c.replicas})
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	err = s.untilJoined(deadline, "the directory", func(ctx context.Context) (err error) {
		c.dir, err = jslog.OpenDirectory(ctx, js, s.store, jslog.DirectoryConfig{Replicas: c.replicas,
			ClaimWindow: c.cfg.ClaimWindow})
		return err
	})
	if err != nil {
		return nil, err
	}
	c.store = jslog.NewStore(c.agents, c.dir, s.store)
	if _, err = c.leaseBucket(s); err != nil {
		return nil, err
	}
	return c, nil
}

// untilJoined retries fn, each try given 5s, until it succeeds or the
// deadline passes.
func (s *Server) untilJoined(deadline time.Time, what string, fn func(ctx context.Context) error) error {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := fn(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: %s: %w", what, err)
		}
		s.cfg.Logger.Info("waiting for the cluster's JetStream", "component", "cluster", "for", what, "err", err)
		time.Sleep(500 * time.Millisecond)
	}
}

// partition is agentID's partition in the cluster.
func (c *clusterNode) partition(agentID string) int {
	return cluster.PartitionOf(agentID, c.meta.Partitions)
}

// serves reports whether this node owns agentID's partition now.
func (c *clusterNode) serves(agentID string) bool {
	if c.leases == nil {
		return false
	}
	_, ok := c.leases.Owns(c.partition(agentID))
	return ok
}

// owner is the node holding agentID's partition, as last watched.
func (c *clusterNode) owner(agentID string) string {
	if c.leases == nil {
		return ""
	}
	return c.leases.Owner(c.partition(agentID))
}

// stale tells the leases that the owner they named did not hold.
func (c *clusterNode) stale() {
	if c.leases != nil {
		c.leases.Nudge()
	}
}

// startLeases starts taking partitions: each one taken has its log fenced
// at the lease's epoch and handed to the agents; each one lost has its
// agents' actors stopped first, then its log taken back.
func (c *clusterNode) startLeases(s *Server, reg *actors.Registry) error {
	kv, err := c.leaseBucket(s)
	if err != nil {
		return err
	}
	// A partition whose log is fenced under it is given up (jslog.Config
	// OnFenced); the leases are known only once started.
	var leases atomic.Pointer[cluster.Leases]
	c.leases, err = cluster.StartLeases(kv, cluster.LeaseConfig{Node: c.cfg.Node, Partitions: c.meta.Partitions,
		TTL: c.meta.LeaseTTL(), Logger: s.cfg.Logger,
		Acquire: func(p int, epoch uint64) error {
			l, err := c.openLog(p, epoch, func() {
				if ls := leases.Load(); ls != nil {
					ls.GiveUp(p, epoch)
				}
			})
			if err != nil {
				return err
			}
			c.agents.Own(p, l)
			return nil
		},
		Release: func(p int) {
			reg.Evict(func(agentID string) bool { return c.partition(agentID) == p })
			c.agents.Disown(p)
		}})
	leases.Store(c.leases)
	return err
}

// openLog opens partition p's log and fences it at epoch. A try that
// JetStream does not answer in time, or answers that it cannot yet, is
// cluster.ErrTryAgain: the stream is likely electing a leader (its last
// owner led it, and died), and a request sent before the election ends is
// never answered, so each try is short and the lease is kept meanwhile.
func (c *clusterNode) openLog(p int, epoch uint64, onFenced func()) (*jslog.Log, error) {
	ctx, cancel := context.WithTimeout(context.Background(), min(c.meta.LeaseTTL()/3, openTry))
	defer cancel()
	l, err := jslog.Open(ctx, c.js, p, jslog.Config{Replicas: c.replicas, OnFenced: onFenced})
	if err == nil {
		err = l.Fence(ctx, epoch)
	}
	if jserr.Unavailable(err) {
		return nil, fmt.Errorf("%w: %w", cluster.ErrTryAgain, err)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

// openTry bounds one try of openLog: a stream's open and fence take a few
// replicated requests, milliseconds when it has a leader.
const openTry = time.Second

// leaseBucket opens the lease bucket, creating it if it does not exist.
//
// Its reads go to its stream's leader (jslog.ReadFromLeader): read from
// any copy, the others' lease rounds stalled while a node was paused, on
// reads its copy never answered (docs/cluster.md).
func (c *clusterNode) leaseBucket(s *Server) (kv jetstream.KeyValue, err error) {
	err = s.untilJoined(time.Now().Add(c.cfg.JoinTimeout), "the lease bucket", func(ctx context.Context) (err error) {
		if kv, err = c.js.KeyValue(ctx, cluster.LeaseBucket); errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = c.js.CreateKeyValue(ctx, cluster.LeaseBucketConfig(c.replicas, c.meta.LeaseTTL()))
		}
		if err != nil {
			return err
		}
		if err := leaseExpiry(ctx, c.js, c.meta.LeaseTTL()); err != nil {
			return err
		}
		if err := jslog.ReadFromLeader(ctx, c.js, cluster.LeaseStream); err != nil {
			return err
		}
		kv, err = c.js.KeyValue(ctx, cluster.LeaseBucket)
		return err
	})
	return kv, err
}

// leaseExpiry gives the lease bucket the TTL LeaseBucketConfig does, for
// a bucket made by an earlier version (one lease TTL, which expired the
// survivors' leases after an election of the bucket's leader).
func leaseExpiry(ctx context.Context, js jetstream.JetStream, ttl time.Duration) error {
	s, err := js.Stream(ctx, cluster.LeaseStream)
	if err != nil {
		return err
	}
	cfg := s.CachedInfo().Config
	if want := cluster.LeaseBucketConfig(0, ttl).TTL; cfg.MaxAge != want {
		cfg.MaxAge = want
		_, err = js.UpdateStream(ctx, cfg)
	}
	return err
}

// status is the node's view of the cluster, for GET /v1/cluster.
func (c *clusterNode) status() (api.ClusterStatus, error) {
	st := api.ClusterStatus{Name: c.meta.Name, Node: c.cfg.Node, Partitions: c.meta.Partitions,
		LeaseTTL: c.meta.LeaseTTL()}
	for _, m := range c.leases.Members() {
		st.Members = append(st.Members, api.ClusterMember{Node: m.Node, Since: m.Since})
	}
	// The streams' states together take at most logStateTime: a stream not
	// read by then (no leader: the node that led it is lost) shows none,
	// and the directory's lag is unknown. The status is most wanted then.
	ctx, cancel := context.WithTimeout(context.Background(), logStateTime)
	defer cancel()
	if lag, err := c.dir.Lag(ctx); err == nil {
		st.DirectoryLag = &lag
	}
	for p := range c.meta.Partitions {
		st.Owners = append(st.Owners, c.leases.Owner(p))
		st.Logs = append(st.Logs, c.streamState(ctx, jslog.StreamName(p)))
	}
	st.Directory = c.streamState(ctx, jslog.DirStream)
	st.Leases = c.streamState(ctx, cluster.LeaseStream)
	return st, nil
}

// logStateTime bounds the reads of the partitions' logs' states for one
// status or one scrape of the metrics.
const logStateTime = 2 * time.Second

// streamState is a stream's state as JetStream reports it; a stream whose
// state cannot be read by ctx's end (no leader) shows no leader and no
// copies.
func (c *clusterNode) streamState(ctx context.Context, name string) api.ClusterLog {
	ls, err := jslog.StreamState(ctx, c.js, name)
	if err != nil {
		return api.ClusterLog{}
	}
	l := api.ClusterLog{Messages: ls.Messages, Bytes: ls.Bytes, Leader: ls.Leader}
	for _, r := range ls.Replicas {
		l.Replicas = append(l.Replicas, api.ClusterReplica{Server: r.Server, Current: r.Current, Lag: r.Lag})
	}
	return l
}

// relayJudge asks the judge workers connected to the other nodes until
// one answers: the nodes in turn, starting one further each time (so
// workers on several nodes share the requests), past a node without such
// a worker and past one that does not answer (stopped, or paused).
func (c *clusterNode) relayJudge(nc *nats.Conn, ws, subject string, data []byte, timeout time.Duration) ([]byte, error) {
	if c.leases == nil {
		return nil, nats.ErrNoResponders
	}
	var others []string
	for _, m := range c.leases.Members() {
		if m.Node != c.cfg.Node {
			others = append(others, m.Node)
		}
	}
	err := nats.ErrNoResponders
	start := int(c.judgeTurn.Add(1))
	for i := range others {
		var reply []byte
		reply, err = natsdoor.RelayJudgeRequest(nc, others[(start+i)%len(others)], ws, subject, data, timeout)
		if err == nil {
			return reply, nil
		}
	}
	return nil, err
}

// stop hands the node's partitions over and stops serving forwarded
// requests; it does so once, however often it is called (Close twice).
func (c *clusterNode) stop() { c.stopOnce.Do(c.stopNow) }

func (c *clusterNode) stopNow() {
	if c.fwd != nil {
		_ = c.fwd.Unsubscribe()
	}
	if c.judge != nil {
		_ = c.judge.Unsubscribe()
	}
	if c.embedded && c.srv != nil {
		c.stepDown()
	}
	if c.leases != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.leases.Stop(ctx)
	}
}

// stepDownTime bounds stepDown: well under it with the cluster's quorum, and
// without it the node's last moves would only wait for it.
const stepDownTime = time.Second

// stepDown moves the leadership of every stream this node's embedded
// server leads (partition logs, the lease bucket, the directory) to the
// other servers, and waits until each has another leader, or stepDownTime.
// It runs before the partitions are handed over. A stream request that a
// leader takes as it stops is never answered, and the others' watches of
// the lease bucket would go silent for 10 s with their consumer's server:
// after stepDown the new owners open their logs, and the others see the
// leases go, through servers that stay.
//
// The streams led are read from the embedded server itself, and each one
// asked is then read from its new leader, at once. A listing of every
// stream (JetStream's meta leader gathers each stream's state from its
// leader) was used before: while the leaders moved it did not answer
// within the second in 3 of 14 clean stops under load, and the handover
// waited that second out.
func (c *clusterNode) stepDown() {
	ctx, cancel := context.WithTimeout(context.Background(), stepDownTime)
	defer cancel()
	me := c.srv.Name() // the node's id (natsdoor.Cluster)
	led, err := c.ledStreams()
	if err != nil {
		c.logger.Warn("handing stream leadership over", "component", "cluster", "err", err)
		return
	}
	if len(led) == 0 {
		return
	}
	var (
		wg   sync.WaitGroup
		left atomic.Int32
	)
	for _, name := range led {
		wg.Go(func() {
			// The answer comes once the step down has begun; the stream's
			// state, read from its leader, tells that it is done.
			if _, err := c.nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+name, nil); err != nil {
				c.logger.Warn("handing a stream's leadership over", "component", "cluster", "stream", name, "err", err)
			}
			for {
				// A stream between leaders answers nothing: each read is
				// short, and read again.
				try, cancel := context.WithTimeout(ctx, stepDownRead)
				st, err := c.js.Stream(try, name)
				cancel()
				if err == nil {
					if ci := st.CachedInfo().Cluster; ci != nil && ci.Leader != "" && ci.Leader != me {
						return
					}
				}
				select {
				case <-ctx.Done():
					left.Add(1)
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	if n := left.Load(); n > 0 {
		c.logger.Warn("handing stream leadership over", "component", "cluster", "still_led", n, "err", ctx.Err())
		return
	}
	c.logger.Info("stream leadership handed over", "component", "cluster", "streams", len(led))
}

// stepDownRead bounds one read of a stream's state in stepDown.
const stepDownRead = 200 * time.Millisecond

// ledStreams lists the replicated streams of Plaudit's account that the
// embedded server leads, as it knows itself: no JetStream request.
func (c *clusterNode) ledStreams() ([]string, error) {
	d, err := c.srv.JszAccount(&natsserver.JSzOptions{Account: natsdoor.ServiceAccount, Streams: true, Config: true})
	if err != nil {
		return nil, err
	}
	var led []string
	for _, st := range d.Streams {
		if st.Cluster != nil && st.Cluster.Leader == c.srv.Name() && st.Config != nil && st.Config.Replicas > 1 {
			led = append(led, st.Name)
		}
	}
	return led, nil
}
