package actors

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// mailbox is an agent actor's mailbox. protoactor's own hands every run of
// an idle mailbox to its dispatcher, a goroutine the sender then waits on:
// on a 2-core VM that hand-off and the one back were a fifth of a lone
// selection's latency (the runtime trace's scheduling delay, 12 µs of it
// between the door's goroutine and the mailbox's). Here a sender that finds
// the mailbox idle runs it on its own goroutine, where it would only have
// waited, for up to inlineBudget messages, and hands whatever is left to
// the dispatcher. Only messages whose senders hold no lock and may do the
// actor's work themselves run so (see senderOf): a door waiting for its
// request, an I/O goroutine reporting its result. The first other message
// (system messages, protoactor's own, a read's next step) ends an inline
// run, and the dispatcher runs it as before. While a run is on a caller's
// goroutine the actor must not block (see agentActor.startAppend): the
// caller would then wait past its timeout.
//
// The order is protoactor's: system messages first, user messages in the
// order they were posted, nothing while suspended; one goroutine at a time.
// Unlike protoactor's, a long run does not yield every Throughput messages:
// the runtime preempts it like any goroutine.
type mailbox struct {
	user, system fifo
	userN, sysN  atomic.Int32
	running      atomic.Bool
	suspended    atomic.Bool
	invoker      actor.MessageInvoker
	dispatcher   actor.Dispatcher
	// onCaller is set while the run is on the goroutine of a caller
	// waiting for its answer; only the actor, on that goroutine, reads it.
	onCaller bool
}

// inlineBudget is how many messages a sender runs before it hands the rest
// to the dispatcher: enough for its own request and a few that arrived with
// it, few enough that its own answer is not held up by a busy agent's.
const inlineBudget = 16

// A sender runs the mailbox itself as one of these; a message that runs
// inline at all runs in any inline run.
type sender int

const (
	dispatched sender = iota // the dispatcher runs it
	caller                   // a caller waiting for its answer
	ioResult                 // an I/O goroutine reporting its result, free to block
)

// senderOf says who may run the mailbox when m is posted to an idle one.
func senderOf(m any) sender {
	switch m.(type) {
	case *request, *attach:
		return caller
	case *committed, *snapshotted:
		return ioResult
	}
	return dispatched
}

// PostUserMessage implements actor.Mailbox.
func (m *mailbox) PostUserMessage(msg any) {
	m.user.push(msg)
	m.userN.Add(1)
	m.schedule(senderOf(msg))
}

// PostSystemMessage implements actor.Mailbox.
func (m *mailbox) PostSystemMessage(msg any) {
	m.system.push(msg)
	m.sysN.Add(1)
	m.schedule(dispatched)
}

// RegisterHandlers implements actor.Mailbox.
func (m *mailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

// Start implements actor.Mailbox.
func (m *mailbox) Start() {}

// UserMessageCount implements actor.Mailbox.
func (m *mailbox) UserMessageCount() int { return int(m.userN.Load()) }

func (m *mailbox) schedule(s sender) {
	if !m.running.CompareAndSwap(false, true) {
		return // its runner will reach the message
	}
	if s == dispatched {
		m.dispatcher.Schedule(m.processAll)
		return
	}
	m.process(s)
}

func (m *mailbox) processAll() { m.process(dispatched) }

// process runs messages until there are none; on a sender's goroutine, for
// at most inlineBudget of them, and the dispatcher goes on with the rest.
func (m *mailbox) process(s sender) {
	budget := 0
	if s != dispatched {
		budget = inlineBudget
	}
	m.onCaller = s == caller
	idle := m.run(budget)
	m.onCaller = false
	if idle {
		m.running.Store(false)
		// A message posted after the last pop but before the store above
		// found the mailbox running and left it to this runner: the
		// dispatcher runs it.
		if !m.pending() || !m.running.CompareAndSwap(false, true) {
			return
		}
	}
	m.dispatcher.Schedule(m.processAll) // still running: the runner changes hands
}

func (m *mailbox) pending() bool {
	return m.sysN.Load() > 0 || (!m.suspended.Load() && m.userN.Load() > 0)
}

// run invokes messages until none is runnable (true), or with messages
// left (false): on a sender's goroutine (budget > 0), once budget is spent
// or at a message that may not run inline, a system message included. A
// panic in the actor is escalated to its supervisor, as protoactor's
// mailbox does, and ends the run.
func (m *mailbox) run(budget int) (idle bool) {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
			idle = true
		}
	}()
	inline := budget > 0
	for n := 1; ; n++ {
		if inline && n > budget {
			return !m.pending()
		}
		if inline && m.sysN.Load() > 0 {
			return false
		}
		if msg = m.system.pop(); msg != nil {
			m.sysN.Add(-1)
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() {
			return true
		}
		if inline && !m.user.headRunsInline() {
			return !m.pending()
		}
		if msg = m.user.pop(); msg == nil {
			return true
		}
		m.userN.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
}

// fifo is a queue for many producers and one consumer. A short critical
// section under a mutex costs less than a lock-free queue's node per
// message, and an idle agent's queues hold no memory.
type fifo struct {
	mu    sync.Mutex
	items []any
	head  int // items[:head] are taken
}

func (q *fifo) push(msg any) {
	q.mu.Lock()
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Reuse the taken slots rather than grow.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, msg)
	q.mu.Unlock()
}

// headRunsInline reports whether the oldest message may run inline (none
// may when there is none).
func (q *fifo) headRunsInline() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.head < len(q.items) && senderOf(q.items[q.head]) != dispatched
}

// pop takes the oldest message, or returns nil when there is none.
func (q *fifo) pop() any {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
		return nil
	}
	msg := q.items[q.head]
	q.items[q.head] = nil
	q.head++
	return msg
}
