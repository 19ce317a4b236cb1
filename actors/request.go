package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist"
)

// ErrUnknownOutcome means the actor took a write but its caller stopped
// waiting before the write was durable or failed: it may still land. It
// wraps ErrUnavailable.
var ErrUnknownOutcome = fmt.Errorf("the write was taken but its outcome is not known yet: %w", ErrUnavailable)

// request is one message to an agent actor. The typed wrappers (Read,
// Write) keep their result in the operation they run, which holds the
// request; the actor reports only whether the request completed, through
// done, so nothing crosses the boundary as an untyped value.
type request struct {
	op   operation
	read bool // a read: the agent must exist, nothing is written
	// early answers a write as soon as it is decided, before its events
	// are durable: the selection fast path (see agentActor.answerEarly).
	early bool
	// hold keeps the write's events from the log until Commit hands over
	// the records to write in the same batch (see Outcome.Commit).
	hold bool
	// by is the request's deadline from admission (zero: none). An actor
	// that reaches the request later drops it unexecuted (ErrExpired), and
	// its caller stops waiting for it then.
	by time.Time

	// state settles who owns the request: the actor (taken) or the caller,
	// which stopped waiting before the actor reached it (abandoned). An
	// abandoned request is dropped unexecuted.
	state   atomic.Int32
	pid     *actor.PID    // the actor it was sent to
	decided chan struct{} // hold: closed once do has run
	done    chan error    // buffered: the request completed (nil) or failed
	records []persist.KV  // hold: set by Commit before it sends attach
	// heldEvents is set by the actor when the held write decided events.
	heldEvents bool
	// stepper, set by a read's do, makes it a read in steps (ReadSteps).
	stepper Stepper
	taken   time.Time // when a read in steps started
}

// operation is what a request does. Its run is called on the actor's
// goroutine against its agent and returns the events to persist (none for
// a read) and the engine's verdict (the typed wrappers also keep it for
// their caller). The typed wrappers are operations holding their request,
// so a request, its operation and its answer are one allocation (its
// channels aside).
type operation interface {
	run(a *engine.Agent, now time.Time, rnd *rand.Rand) ([]engine.Event, error)
}

const (
	reqPending int32 = iota
	reqTaken
	reqAbandoned
)

// init readies q to be sent, to run op.
func (q *request) init(op operation, read, hold bool, by time.Time) {
	q.op, q.read, q.hold, q.by, q.done = op, read, hold, by, make(chan error, 1)
	if hold {
		q.decided = make(chan struct{})
	}
}

// take claims the request for the actor; false means the caller gave up.
func (q *request) take() bool { return q.state.CompareAndSwap(reqPending, reqTaken) }

// finish completes the request; it is called once.
func (q *request) finish(err error) { q.done <- err }

// attach hands a held write's records to its actor.
type attach struct{ req *request }

// patience is how long a caller waits for the actor to take q: until its
// deadline, and never past timeout.
func (q *request) patience(timeout time.Duration) time.Duration {
	if q.by.IsZero() {
		return timeout
	}
	return min(timeout, max(time.Until(q.by), 0))
}

// abandon gives up on a request the actor has not taken, so that it is
// dropped unexecuted, and returns the caller's error; nil means the actor
// has taken it.
func (q *request) abandon(timeout time.Duration) error {
	if !q.state.CompareAndSwap(reqPending, reqAbandoned) {
		return nil
	}
	if !q.by.IsZero() && !time.Now().Before(q.by) {
		return ErrExpired
	}
	return fmt.Errorf("agent request timed out after %v: %w", timeout, ErrUnavailable)
}

// timers are reused across requests: a timer and its channel per request
// were a tenth of the bytes a durable signal allocates. Since Go 1.23 a
// stopped timer's channel holds no stale tick, so a reused timer is as good
// as a new one.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

func startTimer(d time.Duration) *time.Timer {
	t := timers.Get().(*time.Timer)
	t.Reset(d)
	return t
}

func stopTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// awaitDecision waits until a held write is decided, or failed before it
// was. At its deadline it abandons a request the actor has not taken
// (nothing will be written); one already taken is decided at once, so it
// waits on.
func (q *request) awaitDecision(timeout time.Duration) error {
	select {
	case <-q.decided:
		return nil
	case err := <-q.done:
		return err
	default:
	}
	t := startTimer(q.patience(timeout))
	defer stopTimer(t)
	select {
	case <-q.decided:
		return nil
	case err := <-q.done:
		return err
	case <-t.C:
	}
	if err := q.abandon(timeout); err != nil {
		return err
	}
	select {
	case <-q.decided:
		return nil
	case err := <-q.done:
		return err
	}
}

// waitDone waits for the request to complete. One the actor has not taken
// by its deadline is abandoned; one it has taken is waited for up to
// timeout in all, and past that its outcome is unknown.
func (q *request) waitDone(timeout time.Duration) error {
	select {
	case err := <-q.done:
		return err // answered on this goroutine (see mailbox): no timer
	default:
	}
	start := time.Now()
	t := startTimer(q.patience(timeout))
	defer stopTimer(t)
	select {
	case err := <-q.done:
		return err
	case <-t.C:
	}
	if err := q.abandon(timeout); err != nil {
		return err
	}
	t.Reset(max(timeout-time.Since(start), 0))
	select {
	case err := <-q.done:
		return err
	case <-t.C:
	}
	return ErrUnknownOutcome
}

// Read runs fn against the agent's state inside its actor, after every
// change the actor applied before it is durable, and returns fn's answer.
// fn must not keep the *engine.Agent or anything that aliases its state,
// but for the views the engine makes to be read elsewhere
// (engine.VersionSummary).
//
// by is the request's deadline (zero: none): past it, a request the actor
// has not reached is dropped unexecuted with ErrExpired.
func Read[R any](r *Registry, agentID string, by time.Time, fn func(a *engine.Agent, now time.Time) (R, error)) (R, error) {
	return read(r, agentID, by, false, fn)
}

func read[R any](r *Registry, agentID string, by time.Time, steps bool, fn func(a *engine.Agent, now time.Time) (R, error)) (R, error) {
	rd := &reading[R]{fn: fn, steps: steps}
	rd.q.init(rd, true, false, by)
	if err := r.send(agentID, &rd.q); err != nil {
		var zero R
		return zero, err
	}
	if err := rd.q.waitDone(r.cfg.RequestTimeout); err != nil {
		var zero R
		return zero, err
	}
	return rd.res, rd.verdict
}

// reading is the operation of Read, and of ReadSteps (steps), whose fn
// starts the read and returns its Stepper.
type reading[R any] struct {
	q       request
	fn      func(a *engine.Agent, now time.Time) (R, error)
	steps   bool
	res     R
	verdict error
}

func (rd *reading[R]) run(a *engine.Agent, now time.Time, _ *rand.Rand) ([]engine.Event, error) {
	rd.res, rd.verdict = rd.fn(a, now)
	if rd.steps && rd.verdict == nil {
		rd.q.stepper = any(rd.res).(Stepper) // R is ReadSteps' S
	}
	return nil, nil
}

// Stepper is a read too long for one turn of the actor, done in steps.
type Stepper interface {
	// Step does one turn's work (a few milliseconds at most) and reports
	// whether the read is done.
	Step() (done bool)
	// Close releases what the read holds in the agent. The actor calls it
	// once, on its goroutine, when the read is done or fails.
	Close()
}

// ReadSteps is Read for a read that would hold the actor too long in one
// turn. start runs in the actor's turn, as Read's fn does, and returns the
// read's Stepper; the actor then runs one Step per turn, sending itself the
// next turn behind the messages already queued, so other requests are
// served between steps and wait at most one step. Once a step reports done,
// the read is answered as Read's are (after every write applied before it
// is durable), and ReadSteps returns the Stepper, which holds the answer.
// A read that takes longer than the registry's RequestTimeout is stopped
// and fails with ErrUnavailable.
func ReadSteps[S Stepper](r *Registry, agentID string, by time.Time, start func(a *engine.Agent, now time.Time) (S, error)) (S, error) {
	return read(r, agentID, by, true, start)
}

// Command carries out one engine command against the agent, as the engine's
// typed methods do: it returns the answer and the events it applied.
type Command[R any] func(a *engine.Agent, now time.Time, rnd *rand.Rand) (R, []engine.Event, error)

// Outcome is what a write decided. Result and Err are the engine's answer
// and verdict; a write whose Err is set changed nothing.
type Outcome[R any] struct {
	Result R
	Err    error

	r       *Registry
	req     *request // set while the write is held
	release func()   // runs once the write is settled
}

// Write runs cmd on the agent's actor. Unless hold is set it returns once
// the write's events are durable (a new run sooner; see answerEarly).
//
// With hold, it returns as soon as the write is decided: the events are
// applied but wait, unsent, until Commit hands over the records to write
// in the same batch. This is how an Idempotency-Key record, which the
// caller renders from the outcome, lands atomically with the write it
// records. Commit must then be called exactly once; until then the agent's
// log waits.
//
// by is the deadline, as for Read. The error is about delivery
// (ErrOverloaded, ErrExpired, ErrUnavailable and its ErrUnknownOutcome);
// the engine's verdict is Outcome.Err.
func Write[R any](r *Registry, agentID string, by time.Time, hold bool, cmd Command[R]) (*Outcome[R], error) {
	return write(r, agentID, by, hold, false, cmd, nil)
}

func write[R any](r *Registry, agentID string, by time.Time, hold, early bool, cmd Command[R], release func()) (*Outcome[R], error) {
	w := &writing[R]{cmd: cmd}
	out, q := &w.out, &w.q
	out.r, out.release = r, release
	q.init(w, false, hold, by)
	q.early = early
	if err := r.send(agentID, q); err != nil {
		out.settle()
		return nil, err
	}
	if hold {
		if err := q.awaitDecision(r.cfg.RequestTimeout); err != nil {
			out.settle()
			return nil, err
		}
		out.req = q
		return out, nil
	}
	err := q.waitDone(r.cfg.RequestTimeout)
	if !errors.Is(err, ErrUnknownOutcome) {
		out.settle()
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Commit completes a held write: records are written in the same batch as
// its events, and Commit returns once that batch is durable. For a write
// that was not held it does nothing.
func (o *Outcome[R]) Commit(records ...persist.KV) error {
	q := o.req
	if q == nil {
		return nil
	}
	o.req = nil
	q.records = records
	o.r.system.Root.Send(q.pid, &attach{req: q})
	err := q.waitDone(o.r.cfg.RequestTimeout)
	if !errors.Is(err, ErrUnknownOutcome) {
		o.settle()
	}
	return err
}

// writing is Write's operation, with the Outcome it decides.
type writing[R any] struct {
	q   request
	out Outcome[R]
	cmd Command[R]
}

func (w *writing[R]) run(a *engine.Agent, now time.Time, rnd *rand.Rand) ([]engine.Event, error) {
	var evs []engine.Event
	w.out.Result, evs, w.out.Err = w.cmd(a, now, rnd)
	return evs, w.out.Err
}

func (o *Outcome[R]) settle() {
	if o.release != nil {
		o.release()
		o.release = nil
	}
}
