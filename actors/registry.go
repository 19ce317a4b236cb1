// Package actors runs one protoactor-go actor per agent. The actor owns the
// agent's engine state, appends every change to the persist log and answers
// a request only once everything it has applied so far is durable.
package actors

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/id"
	"github.com/plaudit/plaudit/internal/fixed"
	"github.com/plaudit/plaudit/internal/warm"
	"github.com/plaudit/plaudit/persist"
)

// Errors of the actor layer.
var (
	// ErrOverloaded means the agent has MailboxLimit requests in flight.
	ErrOverloaded = errors.New("agent overloaded")
	// ErrUnavailable means the request could not be completed: the log
	// write failed, recovery failed, or the registry is closed. A write
	// that got this error may or may not be durable.
	ErrUnavailable = errors.New("unavailable")
	// ErrExpired means the request's deadline passed before its actor
	// reached it: it was dropped unexecuted, and may be retried.
	ErrExpired = errors.New("request expired waiting for its agent")
)

// Config tunes the registry; zero fields take the defaults below.
type Config struct {
	Store persist.Store
	// SnapshotEvery and SnapshotInterval: an actor snapshots after this
	// many events, or this long after its first unsnapshotted event.
	SnapshotEvery    int
	SnapshotInterval time.Duration
	// IdleTimeout passivates an actor that received nothing for this long.
	IdleTimeout time.Duration
	// MailboxLimit bounds the requests admitted to one agent and not yet
	// answered; past it requests fail fast with ErrOverloaded.
	MailboxLimit   int
	RequestTimeout time.Duration
	Now            func() time.Time
	// Seed makes actors' randomness reproducible; zero seeds from crypto/rand.
	Seed   uint64
	Logger *slog.Logger
	// DurableSelect makes run creation wait for its fsync like every other
	// write. Off, a new run is answered as soon as it is decided (see
	// agentActor.answerEarly for what a crash can then lose).
	DurableSelect bool
	// ClaimsAtAppend says that the store decides a batch's unique keys
	// when it is appended, refusing the whole batch when another writer
	// holds one (a cluster's store): a run answered early then never
	// shares a batch with a write claiming one (see agentActor.claims).
	ClaimsAtAppend bool
	// SelectSyncWindow is how long writes that no request waits for
	// (selections) may wait before they are appended and synced (see
	// agentActor.maybeAppend): default 5 ms; negative, no wait.
	SelectSyncWindow time.Duration
	// Recoveries bounds the agents recovering (loading and rebuilding
	// from their snapshot and log tail) at once: default GOMAXPROCS, as
	// the work is the CPU's and each holds its whole snapshot and tail
	// meanwhile; negative, no bound (a cluster's loads wait on JetStream,
	// not on the CPU).
	Recoveries int
	// Serves, in a cluster, reports whether this node serves an agent now
	// (it owns the agent's partition). An agent it does not serve gets no
	// actor (persist.ErrMoved), and an agent created here gets an id it
	// serves. Nil serves every agent.
	Serves func(agentID string) bool
}

func (c *Config) defaults() {
	if c.SnapshotEvery <= 0 {
		c.SnapshotEvery = 10000
	}
	if c.SnapshotInterval <= 0 {
		c.SnapshotInterval = time.Minute
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 5 * time.Minute
	}
	if c.MailboxLimit <= 0 {
		c.MailboxLimit = 1024
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.SelectSyncWindow == 0 {
		c.SelectSyncWindow = 5 * time.Millisecond
	}
	if c.Recoveries == 0 {
		c.Recoveries = runtime.GOMAXPROCS(0)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Registry routes requests to agent actors, spawning them on first use and
// forgetting them when they passivate. Agents are spread over shards so that
// requests to different agents do not meet on one lock.
type Registry struct {
	cfg    Config
	store  persist.Store
	system *actor.ActorSystem
	// workers run actor mailboxes (see warmDispatcher), appends and
	// snapshots on goroutines whose stacks have grown to the work.
	workers *warm.Pool
	shards  [64]shard
	closed  atomic.Bool

	// externalIDs serialises the creations that claim one external id, so
	// its check-and-set is atomic; unrelated creations do not wait.
	externalIDs reservations

	// pendingIdx holds directory entries of runs answered before their
	// append landed, so lookups find them meanwhile.
	pendingIdx *pendingIndex

	// agentInfos caches agents' infos by directory key: immutable once
	// created. A map under a lock, not a sync.Map, so that a lookup by a
	// key built on the stack allocates nothing.
	infoMu     sync.RWMutex
	agentInfos map[string]engine.AgentInfo
	// fixed caches directory values that never change once durable: a
	// run's agent, the run an external id names (a tenth of a feedback's
	// CPU was reading them from Pebble).
	fixed *fixed.Cache[[]byte]

	metrics *metrics

	// recoveries holds a token for each agent recovering now; nil: no
	// bound (Config.Recoveries).
	recoveries chan struct{}

	randMu  sync.Mutex
	seedSeq uint64
	idRand  *rand.Rand // for agent ids
}

type shard struct {
	mu     sync.Mutex
	agents map[string]*entry
}

// entry is a live actor. inflight counts requests admitted and not yet
// answered: it is raised under the shard lock before the send, and lowered
// by the actor as it answers. Passivation checks it under the same lock, so
// an actor never stops with a request on its way to it, and the send itself
// can happen outside the lock.
type entry struct {
	pid      *actor.PID
	mailbox  *mailbox
	inflight atomic.Int64
	loaded   atomic.Bool // the actor has rebuilt its agent from the store
}

// New starts a registry over cfg.Store.
func New(cfg Config) *Registry {
	cfg.defaults()
	r := &Registry{
		cfg:        cfg,
		store:      cfg.Store,
		system:     actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.Logger })),
		workers:    warm.New(4),
		fixed:      fixed.New[[]byte](),
		pendingIdx: newPendingIndex(),
	}
	if cfg.Recoveries > 0 {
		r.recoveries = make(chan struct{}, cfg.Recoveries)
	}
	for i := range r.shards {
		r.shards[i].agents = map[string]*entry{}
	}
	r.idRand = r.newRand()
	r.metrics = newMetrics(r)
	return r
}

// newRand returns a fresh random source for an actor.
func (r *Registry) newRand() *rand.Rand {
	r.randMu.Lock()
	defer r.randMu.Unlock()
	if r.cfg.Seed != 0 {
		r.seedSeq++
		return rand.New(rand.NewPCG(r.cfg.Seed, r.seedSeq))
	}
	var b [16]byte
	_, _ = crand.Read(b[:])
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])))
}

func (r *Registry) shardOf(agentID string) *shard {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(agentID); i++ {
		h = (h ^ uint32(agentID[i])) * 16777619
	}
	return &r.shards[h%uint32(len(r.shards))]
}

// CreateAgent creates an agent in workspace cmd.Workspace (the registry
// picks its id). An external id is unique in the workspace: a second agent
// claiming one is ErrConflict. With hold, see Write.
func (r *Registry) CreateAgent(cmd engine.CreateAgent, by time.Time, hold bool) (*Outcome[engine.AgentInfo], error) {
	var err error
	if cmd.ID, err = r.newAgentID(); err != nil {
		return nil, err
	}
	release := func() {}
	if cmd.ExternalID != "" {
		key := agentExtKey(cmd.Workspace, cmd.ExternalID)
		release = r.externalIDs.acquire(string(key))
		if err := r.checkUnused(key, "agent", cmd.ExternalID); err != nil {
			release()
			return nil, err
		}
	}
	return write(r, cmd.ID, by, hold, false, func(a *engine.Agent, now time.Time, _ *rand.Rand) (engine.AgentInfo, []engine.Event, error) {
		return a.CreateAgent(cmd, now)
	}, release)
}

// placementTries bounds the ids CreateAgent draws looking for one this
// node serves: with a fair share of a cluster's partitions, one in
// (nodes) ids is, so failing all of them means this node serves none.
const placementTries = 1000

// newAgentID draws a new agent's id, one this node serves (Config.Serves).
func (r *Registry) newAgentID() (string, error) {
	r.randMu.Lock()
	defer r.randMu.Unlock()
	for range placementTries {
		agentID := id.New(id.Agent, r.cfg.Now(), r.idRand)
		if r.cfg.Serves == nil || r.cfg.Serves(agentID) {
			return agentID, nil
		}
	}
	return "", fmt.Errorf("no agent id this node serves in %d draws: %w", placementTries, persist.ErrMoved)
}

// checkUnused is ErrConflict if the directory holds key.
func (r *Registry) checkUnused(key []byte, what, ext string) error {
	_, err := r.dirGet(key)
	switch {
	case err == nil:
		return fmt.Errorf("%s external_id %q already used: %w", what, ext, engine.ErrConflict)
	case errors.Is(err, persist.ErrNotFound):
		return nil
	}
	return err
}

// send admits q to the agent's actor.
func (r *Registry) send(agentID string, q *request) error {
	e, err := r.admit(agentID)
	if err != nil {
		return err
	}
	q.pid = e.pid
	r.system.Root.Send(e.pid, q)
	return nil
}

// admit finds or spawns the agent's actor and counts one request in flight.
func (r *Registry) admit(agentID string) (*entry, error) {
	sh := r.shardOf(agentID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// Checked under the shard lock: Close sets closed and then takes every
	// shard lock, so no actor is spawned behind its back.
	if r.closed.Load() {
		return nil, fmt.Errorf("registry closed: %w", ErrUnavailable)
	}
	if r.cfg.Serves != nil && !r.cfg.Serves(agentID) {
		return nil, fmt.Errorf("agent %s: %w", agentID, persist.ErrMoved)
	}
	e := sh.agents[agentID]
	if e == nil {
		e = &entry{}
		rnd := r.newRand()
		// The mailbox is unbounded: e.inflight already bounds what one
		// agent holds (see above), and a bounded mailbox would allocate its
		// MailboxLimit slots up front, 50 KB an idle agent.
		props := actor.PropsFromProducer(func() actor.Actor { return newAgentActor(r, agentID, e, rnd) },
			actor.WithMailbox(func() actor.Mailbox { e.mailbox = &mailbox{}; return e.mailbox }),
			actor.WithDispatcher(warmDispatcher{pool: r.workers, throughput: 300}))
		e.pid = r.system.Root.Spawn(props)
		sh.agents[agentID] = e
		r.metrics.spawned.Inc()
	}
	if e.inflight.Load() >= int64(r.cfg.MailboxLimit) {
		r.metrics.overloaded.Inc()
		return nil, fmt.Errorf("agent %s: %w", agentID, ErrOverloaded)
	}
	e.inflight.Add(1)
	return e, nil
}

// passivate forgets the actor if no request is in flight; the caller then
// stops it. The shard lock makes the check and the removal atomic with admit.
func (r *Registry) passivate(agentID string, e *entry) bool {
	sh := r.shardOf(agentID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if e.inflight.Load() != 0 || sh.agents[agentID] != e {
		return false
	}
	delete(sh.agents, agentID)
	r.metrics.passivated.Inc()
	return true
}

// forget drops a broken actor so the next request recovers from disk.
func (r *Registry) forget(agentID string, e *entry) {
	sh := r.shardOf(agentID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.agents[agentID] == e {
		delete(sh.agents, agentID)
	}
}

// Loaded reports whether agentID's actor is in memory here with its agent
// rebuilt from the store (its Load has returned), and has not failed.
func (r *Registry) Loaded(agentID string) bool {
	sh := r.shardOf(agentID)
	sh.mu.Lock()
	e := sh.agents[agentID]
	sh.mu.Unlock()
	return e != nil && e.loaded.Load()
}

// Live is the number of agent actors in memory.
func (r *Registry) Live() int {
	n, _ := r.census()
	return n
}

// Close stops every actor after its in-flight writes finish. Requests after
// Close fail with ErrUnavailable.
func (r *Registry) Close() {
	if r.closed.Swap(true) {
		return
	}
	var futures []*actor.Future
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for _, e := range sh.agents {
			futures = append(futures, r.system.Root.PoisonFuture(e.pid))
		}
		sh.agents = map[string]*entry{}
		sh.mu.Unlock()
	}
	for _, f := range futures {
		_ = f.Wait()
	}
	r.system.Shutdown()
	r.workers.Close()
}

// Evict stops the actors of the agents match selects, each after its
// in-flight writes finish, and returns once they have stopped. A cluster
// node evicts a partition's agents when it stops serving it: another node
// may write to them next, and the state held here would go stale.
func (r *Registry) Evict(match func(agentID string) bool) {
	var futures []*actor.Future
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.Lock()
		for agentID, e := range sh.agents {
			if match(agentID) {
				futures = append(futures, r.system.Root.PoisonFuture(e.pid))
				delete(sh.agents, agentID)
			}
		}
		sh.mu.Unlock()
	}
	for _, f := range futures {
		_ = f.Wait()
	}
}

// reservations lets one caller at a time hold a key; others wait for it.
type reservations struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

// acquire waits until key is free, takes it and returns its release.
func (rs *reservations) acquire(key string) (release func()) {
	for {
		rs.mu.Lock()
		if rs.held == nil {
			rs.held = map[string]chan struct{}{}
		}
		busy, ok := rs.held[key]
		if !ok {
			ch := make(chan struct{})
			rs.held[key] = ch
			rs.mu.Unlock()
			return func() {
				rs.mu.Lock()
				delete(rs.held, key)
				rs.mu.Unlock()
				close(ch)
			}
		}
		rs.mu.Unlock()
		<-busy
	}
}
