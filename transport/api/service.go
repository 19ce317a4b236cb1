package api

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/transport/idempotency"
	"github.com/plaudit/plaudit/transport/judging"
	"github.com/plaudit/plaudit/transport/tenancy"
)

// Config configures the service; zero fields take defaults.
type Config struct {
	// IdempotencyTTL is how long Idempotency-Key records are kept (24h);
	// SweepInterval is how often expired ones are deleted (10m).
	IdempotencyTTL time.Duration
	SweepInterval  time.Duration
	Now            func() time.Time
	Logger         *slog.Logger
	// Judge sends a judged reward's judge requests (seed 003); nil fails
	// them, so rewards that need a model judge fail at their deadline.
	// JudgeDeadline bounds how long a pending reward's judges are asked
	// (30s).
	// JudgeMaxRequest bounds a judge request's size (0: no bound): a judged
	// reward whose answer would make a larger one is 413 body_too_large.
	Judge           judging.JudgeFunc
	JudgeDeadline   time.Duration
	JudgeMaxRequest int
	// RequestDeadline is how long after admission a request may wait for
	// its agent (5s): one its actor reaches later is dropped, and answered
	// 503 overloaded with a Retry-After.
	RequestDeadline time.Duration
	// Storage reports the store's fitness for writes, for Health; nil
	// counts it always fit.
	Storage func() persist.Condition
	// AccessLog logs one INFO line per answered request: request id,
	// workspace, door, operation, status and duration.
	AccessLog bool
	// Router, in a cluster, sends a request for an agent another node
	// serves to that node; nil serves every agent here.
	Router Router
	// Cluster, in a cluster, reports this node's view of it (GET
	// /v1/cluster); nil on a single node.
	Cluster func() (ClusterStatus, error)
}

// Service serves every operation. It is safe for concurrent use.
type Service struct {
	cfg     Config
	reg     *actors.Registry
	tenancy *tenancy.Tenancy
	idem    *idempotency.Keeper
	judging *judging.Judging
	judges  *judging.Dispatcher
	// handle is Handle, for the internal requests of cross-agent
	// operations (a field: handlers reach it, and Handle reaches handlers).
	handle  func(*Request) Response
	metrics *requestMetrics
	resume  sync.Once
	ready   atomic.Bool
	stop    chan struct{}

	requestIDs *RequestIDs
	lastStamp  atomic.Uint64
}

// New returns the service over the agent actors and the tenancy, keeping
// Idempotency-Key records and seed 003's tasks and judge versions in store;
// it sweeps expired Idempotency-Key records until Close.
func New(cfg Config, reg *actors.Registry, ten *tenancy.Tenancy, store idempotency.Store) (*Service, error) {
	if cfg.IdempotencyTTL <= 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = 10 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RequestDeadline <= 0 {
		cfg.RequestDeadline = 5 * time.Second
	}
	keeper, err := idempotency.New(store, cfg.IdempotencyTTL, cfg.Now)
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, reg: reg, tenancy: ten, idem: keeper, judging: judging.New(store, cfg.Now, cfg.JudgeMaxRequest), stop: make(chan struct{}),
		metrics: newRequestMetrics(), requestIDs: NewRequestIDs()}
	s.handle = s.Handle
	s.judges = judging.NewDispatcher(s.judging, judging.DispatchConfig{Judge: cfg.Judge, Deadline: cfg.JudgeDeadline,
		Episode: s.appendJudgeSignals, Logger: cfg.Logger, Owns: func(r judging.Reward) bool {
			return !s.servedElsewhere(taskPlacement(r.Workspace, r.TaskID))
		}})
	go keeper.Run(cfg.SweepInterval, s.stop, func(err error) { cfg.Logger.Warn("idempotency sweep", "err", err) })
	return s, nil
}

// Drain is the start of a shutdown: requests waiting for a judged reward
// (Prefer: wait) are answered at once with what there is, so the doors'
// drain does not wait for them.
func (s *Service) Drain() { s.judges.EndWaits() }

// Close stops the sweeper and the judged-reward dispatcher (pending rewards
// stay pending on disk, resumed at the next start).
func (s *Service) Close() {
	s.judges.Close()
	close(s.stop)
}

// SetReady marks recovery as done; before it every request is 503. The
// first call indexes the judged rewards stored before their episode and
// task indexes existed (once per store) and resumes the ones left open by the last run.
func (s *Service) SetReady() {
	s.resume.Do(func() {
		if err := s.judging.IndexEpisodes(); err != nil {
			s.cfg.Logger.Error("judged rewards of episodes not indexed", "err", err)
		}
		if err := s.judging.IndexTasks(); err != nil {
			s.cfg.Logger.Error("judged rewards of tasks not indexed", "err", err)
		}
		if err := s.judges.Resume(); err != nil {
			s.cfg.Logger.Error("judged rewards not resumed", "err", err)
		}
		if s.cfg.Router != nil {
			go s.resumeMoved()
		}
	})
	s.ready.Store(true)
}

// resumeEvery is how often a cluster node looks for open judged rewards of
// the tasks it has come to serve (their node stopped, or handed them over).
const resumeEvery = 2 * time.Second

// resumeMoved resumes, until Close, the open judged rewards of the tasks
// this node serves that it does not have in hand.
func (s *Service) resumeMoved() {
	tick := time.NewTicker(resumeEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		if err := s.judges.Resume(); err != nil {
			s.cfg.Logger.Warn("judged rewards not resumed", "err", err)
		}
	}
}

// Ready reports whether the service serves requests.
func (s *Service) Ready() bool { return s.ready.Load() }

// Health is the answer to a health check: 200 "ok"; 200 "degraded" while
// the disk is full (reads are served, writes refused); 503 "recovering"
// before the service is ready and "failed" once the store has fenced
// writes until a restart.
func (s *Service) Health() Response {
	if !s.ready.Load() {
		return Response{Status: 503, Body: []byte(`{"status":"recovering"}`)}
	}
	var c persist.Condition
	if s.cfg.Storage != nil {
		c = s.cfg.Storage()
	}
	switch {
	case c.Failed != nil:
		b := append([]byte(`{"status":"failed","storage":"failed","error":`), jsonw.String(nil, c.Failed.Error())...)
		return Response{Status: 503, Body: append(b, '}')}
	case c.Full:
		b := []byte(`{"status":"degraded","storage":"full","free_bytes":`)
		b = jsonw.Int(b, c.FreeBytes)
		b = append(b, `,"min_free_bytes":`...)
		b = append(jsonw.Int(b, c.MinFreeBytes), '}')
		return Response{Status: 200, Body: b}
	}
	return Response{Status: 200, Body: []byte(`{"status":"ok"}`)}
}

// Tenancy is the service's tenancy, for doors to authenticate against.
func (s *Service) Tenancy() *tenancy.Tenancy { return s.tenancy }

// SweepIdempotency deletes the expired Idempotency-Key records now.
func (s *Service) SweepIdempotency() error { return s.idem.Sweep() }

// RequestID returns a new request id, in one allocation.
func (s *Service) RequestID() string { return s.requestIDs.Next() }

// Stamp returns a start-order stamp: Unix nanoseconds, strictly
// increasing, so a request admitted later always carries a larger stamp,
// across restarts too (as long as the clock does not step back). Doors
// stamp a request as they admit it.
func (s *Service) Stamp() uint64 {
	now := uint64(s.cfg.Now().UnixNano())
	for {
		last := s.lastStamp.Load()
		next := max(now, last+1)
		if s.lastStamp.CompareAndSwap(last, next) {
			return next
		}
	}
}

// Error answers a request a door rejects itself (no route, bad body, failed
// authentication) in the request's error shape.
func (s *Service) Error(req *Request, err error) Response {
	if req.Arrived.IsZero() {
		req.Arrived = time.Now()
	}
	return s.finish(req, s.fail(req, err))
}

// fail renders err in the request's error shape and logs a 5xx with its
// request id.
func (s *Service) fail(req *Request, err error) Response {
	resp := ErrorResponse(err, req.RequestID, req.Errors)
	resp.NotServed = errors.Is(err, ErrNotServed)
	switch code := classify(err).code; {
	case code == "overloaded" || code == "storage_full":
		// Shedding load is working as designed, and a line per shed
		// request would add to the load: 150k lines in 15 s of overload.
		s.cfg.Logger.Debug("request shed", "request_id", req.RequestID, "err", err)
	case resp.NotServed:
		// Part of a handover: the sender sends it again, every 20 ms.
		s.cfg.Logger.Debug("forwarded request not served here", "request_id", req.RequestID, "err", err)
	case resp.Status >= 500:
		s.cfg.Logger.Error("request failed", "request_id", req.RequestID, "err", err)
	}
	return resp
}

// Handle serves one request.
func (s *Service) Handle(req *Request) Response {
	if req.Arrived.IsZero() {
		req.Arrived = time.Now()
	}
	if !s.ready.Load() {
		return s.Error(req, ErrRecovering)
	}
	if req.Deadline.IsZero() {
		req.Deadline = req.Arrived.Add(s.cfg.RequestDeadline)
	}
	c := &call{s: s, req: req, p: req.Principal, ws: req.Principal.Home, by: req.Deadline}
	res, err := s.serve(c)
	resp := c.respond(res, err)
	if req.MaxReply > 0 && len(resp.Body) > req.MaxReply {
		resp = s.fail(req, fmt.Errorf("%w: a %d answer of %d bytes, the door carries %d", ErrReplyTooLarge,
			resp.Status, len(resp.Body), req.MaxReply))
	}
	return s.finish(req, resp)
}

// call is one request on its way through the service.
type call struct {
	s   *Service
	req *Request
	p   tenancy.Principal
	ws  string    // the workspace the request acts in
	by  time.Time // the request's deadline (Request.Deadline)
	// idem is the request's Idempotency-Key reservation, and recorded tells
	// whether its record went out with the write it records.
	idem     *idempotency.Reservation
	recorded bool
	// runID and runOwner are the request's run and its agent once
	// resolved (runFound; see run): placement, the Idempotency-Key's scope
	// and the handler each ask for them.
	runFound bool
	runID    string
	runOwner engine.AgentInfo
}

// respond renders a handler's outcome as the client gets it.
func (c *call) respond(res result, err error) Response {
	if err != nil {
		return c.s.fail(c.req, err)
	}
	if res.forwarded != nil {
		return *res.forwarded
	}
	resp := Response{Status: res.status, Body: res.body, RequestID: c.req.RequestID}
	if res.status == 202 { // accepted, not final: come back
		resp.RetryAfter = 1
	}
	if res.reqID != "" { // a replay
		resp.RequestID = res.reqID
		if res.status >= 400 {
			resp.Message = errorMessage(res.body)
		}
	}
	return resp
}

func (s *Service) serve(c *call) (result, error) {
	h, ok := handlers[c.req.Op]
	if !ok {
		return result{}, fmt.Errorf("operation %q: %w", c.req.Op, ErrRouteNotFound)
	}
	if c.req.Workspace != "" {
		if err := c.enterWorkspace(c.req.Workspace); err != nil {
			return result{}, err
		}
	}
	// Another node's agent (or Idempotency-Key, see placement): its node
	// runs everything below, Idempotency-Key included, so a key's
	// reservation and record live where its writes do.
	if resp, ok, err := c.route(h.write); err != nil || ok {
		forwarded := resp // on the heap only when forwarded
		return result{forwarded: &forwarded}, err
	}
	if c.req.IdempotencyKey == nil {
		return h.fn(c)
	}
	if !h.write {
		// An operation that writes nothing (a preview is a POST) has
		// nothing to do once: a key is checked, and has no other effect.
		if err := idempotency.CheckKey(string(c.req.IdempotencyKey)); err != nil {
			return result{}, err
		}
		return h.fn(c)
	}
	if err := c.loadKeyedAgent(); err != nil {
		return result{}, err
	}
	scope := c.req.scope(c.keyTarget())
	rec, res, err := s.idem.Begin(c.ws, scope, string(c.req.IdempotencyKey), c.req.Body)
	if err != nil {
		return result{}, err
	}
	if legacy := c.req.legacyScope(); res != nil && legacy != scope {
		// A record stored under the scope the request had before: found,
		// it answers, and this request's reservation is let go.
		if rec, err = s.idem.Lookup(c.ws, legacy, string(c.req.IdempotencyKey), c.req.Body); rec != nil || err != nil {
			s.idem.Release(res)
			if err != nil {
				return result{}, err
			}
		}
	}
	if rec != nil {
		s.metrics.idemReplayed.Inc()
		return result{status: rec.Status, body: replayed(rec, c.req.Errors), reqID: rec.RequestID}, nil
	}
	s.metrics.idemExecuted.Inc()
	c.idem = res
	out, err := h.fn(c)
	s.finishKeyed(c, out, err)
	return out, err
}

// keyTarget is the request's target as its Idempotency-Key is scoped to
// it, the same however a door names it: an agent or a run named
// "external_id:<value>" by its id, and a run's agent named when the door
// left it out (seed 004's and seed 001's HTTP paths name the run alone,
// the NATS subjects its agent too). So the same write sent by id and by
// external id, or through both doors, is one write. A reference that does
// not resolve is kept as it is (the write answers 404).
func (c *call) keyTarget() Target {
	t := c.req.Target
	if strings.HasPrefix(t.Agent, externalRef) {
		if info, err := c.agent(); err == nil {
			t.Agent = info.ID
		}
	}
	if t.Run != "" && (t.Agent == "" || strings.HasPrefix(t.Run, externalRef)) {
		if runID, owner, err := c.run(nil); err == nil {
			t.Run = runID
			if t.Agent == "" {
				t.Agent = owner.ID
			}
		}
	}
	return t
}

// externalRef prefixes a reference to an agent or a run by external id.
const externalRef = "external_id:"

// loadKeyedAgent makes sure, in a cluster, that the agent a keyed write
// goes to is loaded before its key is looked up. A cluster node writes an
// agent's Idempotency-Key records to the directory after its log, and the
// agent's load writes those of a batch whose node stopped in between
// (jslog.Store.Load): looked up before, such a record would be missed, and
// the retry would write again. An agent already loaded here is not read
// again: the read would wait for the batch in flight.
func (c *call) loadKeyedAgent() error {
	if c.s.cfg.Router == nil {
		return nil // one node: a record lands with its write, in one batch
	}
	agentID := c.routeAgent()
	if agentID == "" || c.s.reg.Loaded(agentID) {
		return nil // loaded: its load restored what it had to
	}
	_, err := actors.Read(c.s.reg, agentID, c.by, func(*engine.Agent, time.Time) (struct{}, error) { return struct{}{}, nil })
	if errors.Is(err, engine.ErrNotFound) {
		return nil // the write answers it
	}
	return err
}

// finishKeyed records a keyed request's outcome unless its write already
// did, then releases the key. 5xx outcomes are not recorded: they may be
// retried.
func (s *Service) finishKeyed(c *call, res result, err error) {
	defer s.idem.Release(c.idem)
	if c.recorded {
		return
	}
	if rec, ok := c.record(res, err); ok {
		if serr := s.idem.Store(c.idem, rec); serr != nil {
			s.cfg.Logger.Error("idempotency record not stored", "request_id", c.req.RequestID, "err", serr)
		}
	}
}

// record is the Idempotency-Key record of an outcome; false when it must
// not be recorded.
func (c *call) record(res result, err error) (idempotency.Record, bool) {
	var resp Response
	if err != nil { // rendered, not logged: Handle logs the answer once
		// In the {"error"} shape whatever the request's: a retry through
		// another door answers it in its own (replayed).
		resp = ErrorResponse(err, c.req.RequestID, ErrorJSON)
	} else {
		resp = c.respond(res, nil)
	}
	if resp.Status >= 500 {
		return idempotency.Record{}, false
	}
	body := resp.Body
	if err == nil && res.record != nil {
		body = res.record
	}
	return idempotency.Record{Status: resp.Status, RequestID: resp.RequestID, Body: body}, true
}

// write runs cmd on the agent's actor and renders its answer. With an
// Idempotency-Key the write is held (actors.Write): the record is rendered
// here, from the outcome, and committed in the same batch as the write's
// events, so after any crash a retry finds either both or neither.
func write[R any](c *call, agentID string, cmd actors.Command[R], render func(R) (result, error)) (result, error) {
	out, err := actors.Write(c.s.reg, agentID, c.by, c.idem != nil, cmd)
	return settle(c, out, err, render)
}

// settle renders a write's outcome and, for a held one, commits its record.
func settle[R any](c *call, out *actors.Outcome[R], err error, render func(R) (result, error)) (result, error) {
	if err != nil {
		if c.idem != nil && errors.Is(err, actors.ErrUnknownOutcome) {
			c.s.idem.Keep(c.idem) // the write may still land, and its record with it
		}
		return result{}, err
	}
	res, verdict := result{}, out.Err
	if verdict == nil {
		res, verdict = render(out.Result)
	}
	if c.idem == nil {
		return res, verdict
	}
	var kvs []persist.KV
	if rec, ok := c.record(res, verdict); ok {
		kvs = c.s.idem.Records(c.idem, rec)
	}
	if err := out.Commit(kvs...); err != nil {
		if errors.Is(err, actors.ErrUnknownOutcome) {
			c.s.idem.Keep(c.idem)
		}
		return result{}, err
	}
	c.recorded = true
	return res, verdict
}
