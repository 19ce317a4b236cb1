package actors

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist"
)

// Messages an agent actor receives besides *request and *attach.
type (
	// committed reports the end of one log append.
	committed struct {
		last uint64 // the batch's last event sequence
		gen  uint64 // the batch's last write generation
		err  error
	}
	// writeTurn is due when queued writes no request waits for have waited
	// Config.SelectSyncWindow (see maybeAppend).
	writeTurn struct{}
	// stepTurn is the next turn of a read in steps (see ReadSteps).
	stepTurn struct{ req *request }
	// snapshotted reports the end of one snapshot save.
	snapshotted struct {
		seq uint64
		err error
	}
	// idleCheck is due IdleTimeout after the actor last looked for being
	// idle (see onIdle).
	idleCheck struct{}
)

// publishedKV is a directory key published in memory ahead of its append.
type publishedKV struct {
	gen uint64
	key string
}

// waiter is a request held until every write up to generation gen is durable.
type waiter struct {
	gen uint64
	req *request
}

// agentActor owns one *engine.Agent. Its invariant: a reply leaves only when
// every write queued before it was computed is durable, so no client ever
// sees state that a crash could take back; the one exception is selection
// (see answerEarly). Appends are pipelined: while one
// batch is being synced, the events of newer requests queue and go out as
// the next batch, so a hot agent needs one fsync per batch, not per request.
type agentActor struct {
	reg     *Registry
	agentID string
	entry   *entry
	rnd     *rand.Rand

	agent      *engine.Agent
	recoverErr error     // set when recovery failed; requests get it until a retry succeeds
	recoverAt  time.Time // when recovery last failed (Config.Now)
	recovering bool      // a retry of the recovery is out

	durable    uint64   // last event known synced
	gen        uint64   // write generations queued: one per enqueue of events or directory entries
	durableGen uint64   // last generation known synced
	pending    [][]byte // encoded events applied but not yet handed to the log
	pendingBuf []byte   // the chunk pending's newest events are in
	pendingKV  []persist.KV
	queuedAt   time.Time // when the oldest of pending and pendingKV was queued
	// With Config.ClaimsAtAppend: cut marks where the pending writes end
	// that were queued before the first one claiming a unique key, which
	// go to the log as a batch of their own (takeBatch), and claimGen is
	// the generation of the last claiming write queued (see claims).
	cut        *batchCut
	claimGen   uint64
	writeArmed bool // a writeTurn is on its way
	appending  bool // an append is in flight
	waiters    []waiter
	answering  []waiter // onCommitted's, reused: the waiters a commit answers
	broken     bool     // an append failed: the in-memory state may be ahead of disk
	// held counts decided writes whose events wait for their records (see
	// request.hold): no batch leaves while one is held, because the batch
	// holding a write's events must also hold its records.
	held     int
	heldReqs []*request
	// stepping are the reads in steps under way (see ReadSteps).
	stepping []*request

	snapSeq     uint64    // last event covered by a saved snapshot
	snapDue     time.Time // when the unsnapshotted events must be snapshotted
	snapping    bool
	snapWaiting *engine.State // a view taken ahead of durability, saved when durable reaches it

	published []publishedKV // directory entries in Registry.pendingIdx, by the generation that writes them

	// io counts the append and snapshot goroutines; lastAppend is written by
	// the append goroutine before io.Done, for drain to read after io.Wait.
	io         sync.WaitGroup
	lastAppend committed

	// active is when the actor last had a message, and idle the timer that
	// sends it idleCheck. This is protoactor's receive timeout without its
	// cost: that stops and resets a timer around every message (2 % of a
	// selection's server CPU), where this timer is only re-armed when it
	// fires, for what is left of IdleTimeout since active. (Marking the
	// messages as not influencing protoactor's timeout races, in protoactor,
	// with its timer's firing.) The wall clock, as the timer runs on it,
	// not Config.Now.
	active time.Time
	idle   *time.Timer
}

func newAgentActor(reg *Registry, agentID string, e *entry, rnd *rand.Rand) *agentActor {
	return &agentActor{reg: reg, agentID: agentID, entry: e, rnd: rnd}
}

// Receive is the actor's message loop.
func (x *agentActor) Receive(ctx actor.Context) {
	msg := ctx.Message()
	if _, check := msg.(*idleCheck); !check {
		x.active = time.Now()
	}
	switch m := msg.(type) {
	case *actor.Started:
		x.recover()
		self, root := ctx.Self(), ctx.ActorSystem().Root
		x.idle = time.AfterFunc(x.reg.cfg.IdleTimeout, func() { root.Send(self, &idleCheck{}) })
	case *request:
		x.serve(ctx, m)
	case *attach:
		x.attach(ctx, m.req)
	case *stepTurn:
		x.step(ctx, m)
	case *recovered:
		x.recovering = false
		x.rebuild(m.rec, m.err, m.start)
	case *committed:
		x.onCommitted(ctx, m)
	case *writeTurn:
		x.writeArmed = false
		x.maybeAppend(ctx)
	case *snapshotted:
		x.onSnapshotted(ctx, m)
	case *idleCheck:
		x.onIdle(ctx)
	case *actor.Stopping:
		if x.idle != nil {
			x.idle.Stop()
		}
		x.drain(ctx)
	}
}

// recoveryRetry is how long an agent whose recovery failed answers with
// that failure before a request has the recovery tried again.
const recoveryRetry = time.Second

// recovered is a retried recovery's load, back from the pool.
type recovered struct {
	rec   persist.Recovered
	err   error
	start time.Time
}

// recover loads and rebuilds the agent when its actor starts, once one of
// the registry's recovery tokens is free (Config.Recoveries): a restart's
// first burst of requests then holds a few agents' snapshots and tails at
// a time, not every agent's.
func (x *agentActor) recover() {
	if tokens := x.reg.recoveries; tokens != nil {
		tokens <- struct{}{}
		defer func() { <-tokens }()
	}
	start := time.Now()
	rec, err := x.reg.store.Load(x.agentID)
	x.rebuild(rec, err, start)
}

// retryRecovery loads the agent again on a pool goroutine: the request
// that found the retry due may be running on its caller's goroutine (see
// mailbox), which a stalled store must not hold past its timeout.
func (x *agentActor) retryRecovery(ctx actor.Context) {
	x.recovering = true
	x.io.Add(1)
	self, root, store, agentID := ctx.Self(), ctx.ActorSystem().Root, x.reg.store, x.agentID
	x.reg.workers.Go(func() {
		start := time.Now()
		rec, err := store.Load(agentID)
		x.io.Done()
		root.Send(self, &recovered{rec: rec, err: err, start: start})
	})
}

// rebuild rebuilds the agent from what Load returned.
func (x *agentActor) rebuild(rec persist.Recovered, err error, start time.Time) {
	if err == nil {
		x.agent, err = restore(rec)
	}
	x.reg.metrics.recovery.Observe(since(start))
	if err != nil {
		x.reg.metrics.recoveryFailed.Inc()
		x.recoverErr = fmt.Errorf("agent %s %w: %w", x.agentID, ErrUnavailable, err)
		x.recoverAt = x.reg.cfg.Now()
		x.reg.cfg.Logger.Error("agent recovery failed", "agent", x.agentID, "err", err)
		return
	}
	x.recoverErr = nil
	x.durable = x.agent.LastSeq()
	x.snapSeq = rec.SnapshotSeq
	x.entry.loaded.Store(true)
}

// restore rebuilds an agent from its snapshot and log tail.
func restore(rec persist.Recovered) (*engine.Agent, error) {
	a := engine.NewAgent()
	if rec.Snapshot != nil {
		st, err := engine.DecodeState(rec.Snapshot)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
		if st.Seq != rec.SnapshotSeq {
			return nil, fmt.Errorf("snapshot holds seq %d, stored as %d", st.Seq, rec.SnapshotSeq)
		}
		if a, err = engine.Restore(st); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
	}
	for i, b := range rec.Tail {
		seq := rec.SnapshotSeq + uint64(i) + 1
		if err := a.ReplayEncoded(seq, b); err != nil {
			return nil, fmt.Errorf("event %d: %w", seq, err)
		}
	}
	return a, nil
}

// serve runs a request. A request whose caller gave up before it got here
// is dropped unexecuted.
func (x *agentActor) serve(ctx actor.Context, q *request) {
	if !q.take() {
		x.entry.inflight.Add(-1)
		return
	}
	if !q.by.IsZero() && !time.Now().Before(q.by) {
		// Its caller is giving up now: the work would be wasted, and would
		// delay the requests queued behind it past their deadlines too.
		x.respond(q, ErrExpired)
		return
	}
	if x.recoverErr != nil && !x.recovering && x.reg.cfg.Now().Sub(x.recoverAt) >= recoveryRetry {
		// The failure may have passed (a cluster's store between leaders):
		// an agent answered by requests that keep coming never idles out
		// to be recovered afresh. This request still gets the failure.
		x.retryRecovery(ctx)
	}
	switch {
	case x.recoverErr != nil:
		x.respond(q, x.recoverErr)
		return
	case x.broken:
		x.respond(q, fmt.Errorf("agent %s is stopping: %w", x.agentID, ErrUnavailable))
		return
	case q.read && !x.agent.Created():
		// A read of an agent that does not exist answers through its
		// closure's verdict; here the engine has nothing to ask.
		x.respond(q, fmt.Errorf("agent %s: %w", x.agentID, engine.ErrNotFound))
		return
	}
	if !q.read {
		// A write the log would refuse (full disk, failed store) is refused
		// before the engine runs: once in memory it could not be taken back
		// without rebuilding the actor.
		if err := x.reg.store.Condition().Err(); err != nil {
			x.respond(q, fmt.Errorf("agent %s: %w", x.agentID, err))
			return
		}
	}
	events, verdict := q.op.run(x.agent, x.reg.cfg.Now(), x.rnd)
	var kvs []persist.KV
	if len(events) > 0 {
		kvs = x.enqueue(events, nil)
	}
	// Only a new run is answered early; a refusal waits like any answer,
	// since it may rest on writes not yet durable.
	if q.stepper != nil {
		q.taken = time.Now()
		x.stepping = append(x.stepping, q)
		ctx.Send(ctx.Self(), &stepTurn{req: q})
		return
	}
	if q.early && verdict == nil && !q.hold && !x.reg.cfg.DurableSelect && x.claimGen <= x.durableGen {
		x.answerEarly(ctx, q, kvs)
		return
	}
	if q.hold {
		if len(events) > 0 {
			q.heldEvents = true
			x.held++
		}
		x.heldReqs = append(x.heldReqs, q)
		close(q.decided)
		return
	}
	x.hold(ctx, q)
}

// step runs one step of a read in steps, and sends the next turn behind
// the messages queued meanwhile until the read is done; then it is answered
// like any read, once the writes before it are durable.
func (x *agentActor) step(ctx actor.Context, m *stepTurn) {
	q := m.req
	i := slices.Index(x.stepping, q)
	if i < 0 {
		return // the actor failed meanwhile and answered it
	}
	if time.Since(q.taken) > x.reg.cfg.RequestTimeout {
		x.stepping = slices.Delete(x.stepping, i, i+1)
		q.stepper.Close()
		x.respond(q, fmt.Errorf("agent %s: read stopped after %v: %w", x.agentID, x.reg.cfg.RequestTimeout, ErrUnavailable))
		return
	}
	start := time.Now()
	done := q.stepper.Step()
	x.reg.metrics.step.Observe(since(start))
	if !done {
		ctx.Send(ctx.Self(), m)
		return
	}
	x.stepping = slices.Delete(x.stepping, i, i+1)
	q.stepper.Close()
	x.hold(ctx, q)
}

// attach completes a held write: its records join the queued writes, so
// they leave in the same batch as its events.
func (x *agentActor) attach(ctx actor.Context, q *request) {
	i := slices.Index(x.heldReqs, q)
	if i < 0 {
		return // the actor failed or drained meanwhile and answered it
	}
	x.heldReqs = slices.Delete(x.heldReqs, i, i+1)
	if q.heldEvents {
		x.held--
	}
	if len(q.records) > 0 {
		x.enqueue(nil, q.records)
	}
	x.hold(ctx, q)
}

// answerEarly answers a run creation before its event is synced: the
// selection fast path. Every other reply still waits for durability, and a
// run's events precede in the log any later event that references it, so a
// crash can lose such a run only while nothing acknowledged refers to it.
// Until the append lands, the run's directory entries are published in
// memory so other doors can already find it. A held write (one with an
// Idempotency-Key record) never answers early: its record must be durable
// before a retry may rely on it.
func (x *agentActor) answerEarly(ctx actor.Context, q *request, kvs []persist.KV) {
	for _, kv := range kvs {
		k := string(kv.Key)
		x.reg.pendingIdx.put(k, kv.Value)
		x.published = append(x.published, publishedKV{gen: x.gen, key: k})
	}
	x.respond(q, nil)
	x.maybeAppend(ctx)
}

// unpublish drops in-memory directory entries once the log holds them (or,
// after a failed append, because the run is gone).
func (x *agentActor) unpublish(upToGen uint64) {
	keep := x.published[:0]
	for _, p := range x.published {
		if p.gen <= upToGen {
			x.reg.pendingIdx.drop(p.key)
		} else {
			keep = append(keep, p)
		}
	}
	x.published = keep
}

// enqueue queues applied events and directory entries for the log as one
// write generation, and returns the directory entries (given and derived).
func (x *agentActor) enqueue(events []engine.Event, kvs []persist.KV) []persist.KV {
	n := len(x.pendingKV)
	if len(x.pending) == 0 && n == 0 {
		x.queuedAt = time.Now()
	}
	for _, ev := range events {
		// A batch's events are encoded one after another into chunks:
		// encoded each into a buffer of its own, grown from nothing, an
		// event took five allocations. A chunk is never copied to grow
		// (but when one event outgrows it), since a new one is started
		// when little room is left; the encoded bytes never change.
		if cap(x.pendingBuf)-len(x.pendingBuf) < eventRoom {
			size := firstChunk
			if x.pendingBuf != nil {
				size = chunk
			}
			x.pendingBuf = make([]byte, 0, size)
		}
		start := len(x.pendingBuf)
		x.pendingBuf = engine.AppendEvent(x.pendingBuf, ev)
		b := x.pendingBuf[start:len(x.pendingBuf):len(x.pendingBuf)]
		x.pending = append(x.pending, b)
		x.pendingKV = appendIndex(x.pendingKV, x.agent.Info().Workspace, ev, b)
	}
	x.pendingKV = append(x.pendingKV, kvs...)
	x.gen++
	x.claims(events, n)
	if len(events) > 0 && x.snapDue.IsZero() {
		x.snapDue = x.reg.cfg.Now().Add(x.reg.cfg.SnapshotInterval)
	}
	return x.pendingKV[n:len(x.pendingKV):len(x.pendingKV)]
}

// hold answers now if every write queued so far is durable, else queues
// the request until it is.
func (x *agentActor) hold(ctx actor.Context, q *request) {
	if x.gen <= x.durableGen {
		x.respond(q, nil)
		return
	}
	x.waiters = append(x.waiters, waiter{gen: x.gen, req: q})
	x.maybeAppend(ctx)
}

// respond completes a request. The in-flight count drops first, so a
// caller that sends its next request on the answer is never counted twice.
func (x *agentActor) respond(q *request, err error) {
	x.entry.inflight.Add(-1)
	q.finish(err)
}

// maybeAppend starts an append of the queued writes unless one is in
// flight, a held write keeps the batch open, or there is nothing to write.
//
// Writes that no request waits for (selections, answered early) wait, for
// up to Config.SelectSyncWindow, for a write that one does: on an agent
// taking selections only, one synced append a window instead of one an
// answer, and no append competing with the answers for the CPU. A selection
// is then durable with the agent's next write that a request waits for
// (read or write: see hold), or within the window. Since a request that
// waits for durability waits for every write queued before it, a selection
// can be lost only while nothing acknowledged depends on it.
func (x *agentActor) maybeAppend(ctx actor.Context) {
	if x.appending || x.held > 0 || x.gen <= x.durableGen {
		return
	}
	if len(x.waiters) > 0 {
		x.startAppend(ctx)
		return
	}
	if wait := x.reg.cfg.SelectSyncWindow - time.Since(x.queuedAt); wait > 0 {
		if !x.writeArmed {
			x.writeArmed = true
			self, root := ctx.Self(), ctx.ActorSystem().Root
			time.AfterFunc(wait, func() { root.Send(self, &writeTurn{}) })
		}
		return
	}
	x.startAppend(ctx)
}

func (x *agentActor) startAppend(ctx actor.Context) {
	b, gen := x.takeBatch()
	last := x.durable
	if len(b.Events) > 0 {
		last = b.First + uint64(len(b.Events)) - 1
	}
	x.appending = true
	x.reg.metrics.batchEvents.Observe(float64(len(b.Events)))
	if n := int64(len(x.waiters)); n > 0 && x.entry.inflight.Load() == n && !x.entry.mailbox.onCaller {
		// Every request in flight waits for this batch, so nothing could
		// be pipelined behind it: append here, saving the two goroutine
		// hand-offs (to an I/O goroutine and back) that are most of what a
		// lone write waits for beyond its fsync. A request that arrives
		// meanwhile waits in the mailbox; had it been applied, its events
		// would have waited for this batch all the same. Not on a caller's
		// goroutine (see mailbox): a stalled append would hold the caller
		// past its timeout.
		res := committed{last: last, gen: gen, err: x.reg.store.Append(b)}
		x.onCommitted(ctx, &res)
		return
	}
	x.io.Add(1)
	self, store := ctx.Self(), x.reg.store
	root := ctx.ActorSystem().Root
	x.reg.workers.Go(func() {
		res := committed{last: last, gen: gen, err: store.Append(b)}
		x.lastAppend = res
		x.io.Done()
		root.Send(self, &res)
	})
}

// takeBatch hands the queued writes over as one batch. It is called only
// while no append is in flight, so every event after the durable mark is
// pending, in order: the batch starts right after that mark. (A batch of
// directory entries only has no events; its First is unused.)
func (x *agentActor) takeBatch() (persist.Batch, uint64) {
	if c := x.cut; c != nil {
		// The writes before the first claim leave alone; the rest stay
		// queued for the next batch (their chunks are shared: pendingBuf
		// stays).
		x.cut = nil
		b := persist.Batch{Agent: x.agentID, First: x.durable + 1, Events: x.pending[:c.events:c.events],
			Index: x.pendingKV[:c.kvs:c.kvs]}
		x.pending, x.pendingKV = x.pending[c.events:], x.pendingKV[c.kvs:]
		return b, c.gen
	}
	b := persist.Batch{Agent: x.agentID, First: x.durable + 1, Events: x.pending, Index: x.pendingKV}
	x.pending, x.pendingBuf, x.pendingKV = nil, nil, nil
	return b, x.gen
}

// batchCut is where the queued writes before a claiming one end.
type batchCut struct {
	events, kvs int
	gen         uint64
}

// claims notes, with Config.ClaimsAtAppend (a cluster's store), a write
// just queued whose events claim a unique key (a run's external id): such
// a store decides the claim only when the batch is appended, and refuses
// the whole batch when another node's write holds the key. A run answered
// before its append (answerEarly) must not share a batch with a claim that
// may lose: the writes queued before the claiming one leave as a batch of
// their own (cut), and none after it is answered early until it is
// durable (claimGen). Without this, runs answered 201 were lost with a
// batch whose claim lost a race with another node's. events are the
// write's (the last of pending), kvs the directory entries queued before
// it.
func (x *agentActor) claims(events []engine.Event, kvs int) {
	// Only the keys a write's events claim (a run's external id) can meet
	// another node's: an Idempotency-Key record's key names its target,
	// and one target is one node's. A held write's records, queued after
	// its events, must also stay in their batch.
	if !x.reg.cfg.ClaimsAtAppend || len(events) == 0 {
		return
	}
	if !slices.ContainsFunc(x.pendingKV[kvs:], func(kv persist.KV) bool { return kv.Unique }) {
		return
	}
	x.claimGen = x.gen
	before := len(x.pending) - len(events)
	if x.cut == nil && (before > 0 || kvs > 0) {
		x.cut = &batchCut{events: before, kvs: kvs, gen: x.gen - 1}
	}
}

// A batch's first chunk of encoded events holds a few of the usual size
// (a lone write's batch holds one), the next ones many; a chunk with less
// than eventRoom left is not written to.
const (
	firstChunk = 512
	chunk      = 8 << 10
	eventRoom  = 256
)

func (x *agentActor) onCommitted(ctx actor.Context, m *committed) {
	x.appending = false
	if m.err != nil {
		x.fail(ctx, fmt.Errorf("append agent %s: %w: %w", x.agentID, m.err, ErrUnavailable))
		return
	}
	x.durable, x.durableGen = m.last, m.gen
	x.unpublish(x.durableGen) // the store answers reads of them now
	done, keep := x.answering[:0], x.waiters[:0]
	for _, w := range x.waiters {
		if w.gen <= x.durableGen {
			done = append(done, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(x.waiters[len(keep):])
	x.waiters = keep
	// The next batch leaves for the disk before the answers go out: waking
	// each caller takes time the disk would otherwise sit idle. (Those
	// callers are still in flight, so the append is not made inline.)
	x.maybeAppend(ctx)
	for _, w := range done {
		x.respond(w.req, nil)
	}
	x.reg.metrics.batchRequests.Observe(float64(len(done)))
	clear(done)
	x.answering = done[:0]
	x.maybeSnapshot(ctx)
}

// fail answers every waiter with err and stops the actor: its memory may
// hold events the log does not, so the next request must recover from disk.
// The registry forgets it first, so a caller answered here and asking again
// reaches a new actor; requests already in its mailbox are answered
// ErrUnavailable before the poison pill behind them stops it (a Stop would
// drop them, their callers left waiting for their deadline).
func (x *agentActor) fail(ctx actor.Context, err error) {
	x.reg.cfg.Logger.Error("agent log append failed", "agent", x.agentID, "err", err)
	x.broken = true
	x.entry.loaded.Store(false)
	x.reg.forget(x.agentID, x.entry)
	x.failWaiting(err)
	ctx.Poison(ctx.Self())
}

// failWaiting answers every request still waiting with err.
func (x *agentActor) failWaiting(err error) {
	for _, w := range x.waiters {
		x.respond(w.req, err)
	}
	x.waiters = nil
	for _, q := range x.heldReqs {
		x.respond(q, err)
	}
	x.heldReqs, x.held = nil, 0
	for _, q := range x.stepping {
		q.stepper.Close()
		x.respond(q, err)
	}
	x.stepping = nil
	x.unpublish(^uint64(0))
}

// maybeSnapshot saves a snapshot when enough events or time have passed. The
// view is taken now; it is written once the log is durable up to it, so a
// snapshot never holds an event that was not acknowledged by the log.
func (x *agentActor) maybeSnapshot(ctx actor.Context) {
	if x.snapping || x.broken {
		return
	}
	if x.snapWaiting == nil {
		last := x.agent.LastSeq()
		if last == x.snapSeq {
			return
		}
		// A snapshot costs in proportion to the whole history, so one is
		// taken only once the events since the last are as many as it
		// covered: each event pays for encoding two events' worth of state,
		// however long the agent lives, and recovery replays at most half
		// of the history. (At a quarter, each paid for five: a tenth of a
		// write's CPU at 64 in flight, BENCHMARKS.md.)
		tail := last - x.snapSeq
		due := tail >= max(uint64(x.reg.cfg.SnapshotEvery), x.snapSeq) ||
			(!x.snapDue.IsZero() && !x.reg.cfg.Now().Before(x.snapDue) && tail >= x.snapSeq)
		if !due {
			return
		}
		st := x.agent.Snapshot()
		x.snapWaiting = &st
		x.snapDue = time.Time{}
	}
	if x.snapWaiting.Seq > x.durable {
		return
	}
	st := *x.snapWaiting
	x.snapWaiting = nil
	x.snapping = true
	x.io.Add(1)
	self, store, agentID := ctx.Self(), x.reg.store, x.agentID
	root := ctx.ActorSystem().Root
	m := x.reg.metrics
	x.reg.workers.Go(func() {
		start := time.Now()
		err := store.SaveSnapshot(agentID, st.Seq, st) // encoded as the store compresses it
		m.snapshot.Observe(since(start))
		x.io.Done()
		root.Send(self, &snapshotted{seq: st.Seq, err: err})
	})
}

func (x *agentActor) onSnapshotted(ctx actor.Context, m *snapshotted) {
	x.snapping = false
	if m.err != nil {
		// The log still holds every event; the next snapshot retries.
		x.reg.metrics.snapshotFailed.Inc()
		x.reg.cfg.Logger.Warn("agent snapshot failed", "agent", x.agentID, "err", m.err)
		return
	}
	if m.seq > x.snapSeq {
		x.snapSeq = m.seq
	}
	x.maybeSnapshot(ctx) // events that arrived while this one was written may be due
}

// onIdle passivates the actor once it has had no message for IdleTimeout:
// it takes a last snapshot so the next recovery is short, then leaves the
// registry and stops. When I/O or a request is still under way it stays,
// and checks again after IdleTimeout.
func (x *agentActor) onIdle(ctx actor.Context) {
	if left := x.reg.cfg.IdleTimeout - time.Since(x.active); left > 0 {
		x.idle.Reset(left) // messages came since the timer was armed
		return
	}
	// Writes not yet durable (an append in flight among them) and a
	// snapshot being written are waited for. A request in flight (waiting
	// for its batch, held for its records, read in steps, or still in the
	// mailbox) makes passivate refuse.
	if x.snapping || x.gen > x.durableGen {
		x.idle.Reset(x.reg.cfg.IdleTimeout)
		return
	}
	if x.agent != nil && x.agent.LastSeq() > x.snapSeq { // every event is durable here
		start := time.Now()
		st := x.agent.Snapshot()
		if err := x.reg.store.SaveSnapshot(x.agentID, st.Seq, st); err == nil {
			x.snapSeq = st.Seq
		} else {
			x.reg.metrics.snapshotFailed.Inc()
		}
		x.reg.metrics.snapshot.Observe(since(start))
	}
	if x.reg.passivate(x.agentID, x.entry) {
		ctx.Stop(ctx.Self())
		return
	}
	x.idle.Reset(x.reg.cfg.IdleTimeout)
}

// drain runs when the actor stops (Close, passivation, or a failed append):
// it waits for in-flight I/O, writes what is still queued, and answers every
// waiting request, so a stopped actor leaves neither a write nor a caller
// behind. Queued writes stay unwritten while a held write waits for its
// records: its events may not reach the log without them, nor later events
// without its. Their requests get ErrUnavailable; none was answered yet.
// Messages the goroutines sent to the actor are dead letters by now.
func (x *agentActor) drain(ctx actor.Context) {
	x.io.Wait()
	if x.appending {
		x.appending = false
		if x.lastAppend.err != nil {
			x.broken = true
		} else {
			x.durable, x.durableGen = x.lastAppend.last, x.lastAppend.gen
		}
	}
	// Twice when a cut splits the queued writes (see claims).
	for !x.broken && x.held == 0 && x.gen > x.durableGen {
		b, gen := x.takeBatch()
		if err := x.reg.store.Append(b); err != nil {
			x.broken = true
			break
		}
		x.durableGen = gen // the actor stops: only the waiters read it now
		if len(b.Events) > 0 {
			x.durable = b.First + uint64(len(b.Events)) - 1
		}
	}
	keep := x.waiters[:0]
	for _, w := range x.waiters {
		if w.gen <= x.durableGen {
			x.respond(w.req, nil)
		} else {
			keep = append(keep, w)
		}
	}
	x.waiters = keep
	x.failWaiting(fmt.Errorf("agent %s stopped before the write was durable: %w", x.agentID, ErrUnavailable))
}
