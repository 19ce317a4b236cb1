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
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/id"
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
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Registry routes requests to agent actors, spawning them on first use and
// forgetting them when they passivate.
type Registry struct {
	cfg    Config
	store  persist.Store
	system *actor.ActorSystem

	mu      sync.Mutex
	agents  map[string]*entry
	closed  bool
	seedSeq uint64
	idRand  *rand.Rand // for agent ids; guarded by mu
}

// entry is a live actor. inflight counts requests admitted and not yet
// answered; it is raised under Registry.mu and lowered by the actor.
type entry struct {
	pid      *actor.PID
	inflight atomic.Int64
}

// New starts a registry over cfg.Store.
func New(cfg Config) *Registry {
	cfg.defaults()
	r := &Registry{
		cfg:    cfg,
		store:  cfg.Store,
		system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.Logger })),
		agents: map[string]*entry{},
	}
	r.idRand = r.newRand()
	return r
}

// Store is the registry's store.
func (r *Registry) Store() persist.Store { return r.store }

// newRand returns a fresh source; the caller holds mu (or is New).
func (r *Registry) newRand() *rand.Rand {
	if r.cfg.Seed != 0 {
		r.seedSeq++
		return rand.New(rand.NewPCG(r.cfg.Seed, r.seedSeq))
	}
	var b [16]byte
	_, _ = crand.Read(b[:])
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])))
}

// Execute runs cmd on the agent's actor and returns its result once durable.
func (r *Registry) Execute(agentID string, cmd engine.Command) (any, error) {
	return r.request(agentID, &execute{cmd: cmd})
}

// Query runs fn against the agent's state inside its actor, after every
// change the actor has applied so far is durable. fn must not keep the
// *engine.Agent or anything that aliases its state.
func (r *Registry) Query(agentID string, fn func(a *engine.Agent, now time.Time) (any, error)) (any, error) {
	return r.request(agentID, &query{fn: fn})
}

// CreateAgent creates an agent in workspace ws and returns its info.
func (r *Registry) CreateAgent(cmd engine.CreateAgent) (engine.AgentInfo, error) {
	r.mu.Lock()
	cmd.ID = id.New(id.Agent, r.cfg.Now(), r.idRand)
	r.mu.Unlock()
	if cmd.ExternalID != "" {
		// Creation is rare; one lock makes the external id check-and-set atomic.
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, err := r.store.Get(agentExtKey(cmd.Workspace, cmd.ExternalID)); err == nil {
			return engine.AgentInfo{}, fmt.Errorf("agent external_id %q already used: %w", cmd.ExternalID, engine.ErrConflict)
		} else if !errors.Is(err, persist.ErrNotFound) {
			return engine.AgentInfo{}, err
		}
		res, err := r.requestLocked(cmd.ID, &execute{cmd: cmd})
		if err != nil {
			return engine.AgentInfo{}, err
		}
		return res.(engine.AgentInfo), nil
	}
	res, err := r.Execute(cmd.ID, cmd)
	if err != nil {
		return engine.AgentInfo{}, err
	}
	return res.(engine.AgentInfo), nil
}

func (r *Registry) request(agentID string, msg request) (any, error) {
	r.mu.Lock()
	f, _, err := r.sendLocked(agentID, msg)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return r.await(f)
}

// requestLocked is request for a caller that holds r.mu for the whole call.
func (r *Registry) requestLocked(agentID string, msg request) (any, error) {
	f, _, err := r.sendLocked(agentID, msg)
	if err != nil {
		return nil, err
	}
	return r.await(f)
}

func (r *Registry) sendLocked(agentID string, msg request) (*actor.Future, *entry, error) {
	if r.closed {
		return nil, nil, fmt.Errorf("registry closed: %w", ErrUnavailable)
	}
	e := r.agents[agentID]
	if e == nil {
		e = &entry{}
		rnd := r.newRand()
		props := actor.PropsFromProducer(func() actor.Actor { return newAgentActor(r, agentID, e, rnd) },
			actor.WithMailbox(actor.Bounded(r.cfg.MailboxLimit+64)))
		e.pid = r.system.Root.Spawn(props)
		r.agents[agentID] = e
	}
	if e.inflight.Load() >= int64(r.cfg.MailboxLimit) {
		return nil, nil, fmt.Errorf("agent %s: %w", agentID, ErrOverloaded)
	}
	e.inflight.Add(1)
	return r.system.Root.RequestFuture(e.pid, msg, r.cfg.RequestTimeout), e, nil
}

func (r *Registry) await(f *actor.Future) (any, error) {
	res, err := f.Result()
	if err != nil {
		return nil, fmt.Errorf("agent request: %v: %w", err, ErrUnavailable)
	}
	rep := res.(*reply)
	return rep.result, rep.err
}

// passivate forgets the actor if no request is in flight; the caller then
// stops it. Holding mu makes the check and the removal atomic with sends.
func (r *Registry) passivate(agentID string, e *entry) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.inflight.Load() != 0 || r.agents[agentID] != e {
		return false
	}
	delete(r.agents, agentID)
	return true
}

// forget drops a broken actor so the next request recovers from disk.
func (r *Registry) forget(agentID string, e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.agents[agentID] == e {
		delete(r.agents, agentID)
	}
}

// Live is the number of agent actors in memory.
func (r *Registry) Live() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.agents)
}

// Close stops every actor after its in-flight writes finish. Requests after
// Close fail with ErrUnavailable.
func (r *Registry) Close() {
	r.mu.Lock()
	r.closed = true
	pids := make([]*actor.PID, 0, len(r.agents))
	for _, e := range r.agents {
		pids = append(pids, e.pid)
	}
	r.agents = map[string]*entry{}
	r.mu.Unlock()
	var futures []*actor.Future
	for _, pid := range pids {
		futures = append(futures, r.system.Root.PoisonFuture(pid))
	}
	for _, f := range futures {
		_ = f.Wait()
	}
	r.system.Shutdown()
}
