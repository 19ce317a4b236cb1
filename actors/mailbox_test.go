package actors

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// recorder is a mailbox's invoker: it records what it was given, and can
// post more from inside an invocation, as an actor does.
type recorder struct {
	mu      sync.Mutex
	got     []any
	busy    atomic.Int32 // invocations under way: never more than one
	overlap atomic.Bool
	onUser  func(msg any)
	escaped []any
}

func (r *recorder) invoke(msg any) {
	if r.busy.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.busy.Add(-1)
	r.mu.Lock()
	r.got = append(r.got, msg)
	r.mu.Unlock()
	if r.onUser != nil {
		r.onUser(msg)
	}
}

func (r *recorder) InvokeSystemMessage(msg any) { r.invoke(msg) }
func (r *recorder) InvokeUserMessage(msg any)   { r.invoke(msg) }
func (r *recorder) EscalateFailure(reason any, msg any) {
	r.mu.Lock()
	r.escaped = append(r.escaped, reason)
	r.mu.Unlock()
}

func (r *recorder) messages() []any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// heldDispatcher keeps what it is given to schedule until the test runs it.
type heldDispatcher struct {
	mu  sync.Mutex
	fns []func()
}

func (d *heldDispatcher) Schedule(fn func()) {
	d.mu.Lock()
	d.fns = append(d.fns, fn)
	d.mu.Unlock()
}

func (d *heldDispatcher) Throughput() int { return 300 }

func (d *heldDispatcher) scheduled() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.fns)
}

// runAll runs what was scheduled, and what that schedules, until nothing is.
func (d *heldDispatcher) runAll() {
	for {
		d.mu.Lock()
		if len(d.fns) == 0 {
			d.mu.Unlock()
			return
		}
		fn := d.fns[0]
		d.fns = d.fns[1:]
		d.mu.Unlock()
		fn()
	}
}

func newTestMailbox() (*mailbox, *recorder, *heldDispatcher) {
	m, r, d := &mailbox{}, &recorder{}, &heldDispatcher{}
	m.RegisterHandlers(r, d)
	return m, r, d
}

// A request, and an I/O goroutine's result, posted to an idle mailbox run
// on their sender's goroutine; the actor is told when that is a caller's.
func TestAMessageToAnIdleMailboxRunsOnItsSendersGoroutine(t *testing.T) {
	for _, tc := range []struct {
		msg      any
		onCaller bool
	}{
		{&request{}, true},
		{&attach{}, true},
		{&committed{}, false},
		{&snapshotted{}, false},
	} {
		t.Run(fmt.Sprintf("%T", tc.msg), func(t *testing.T) {
			m, r, d := newTestMailbox()
			onCaller := !tc.onCaller
			r.onUser = func(any) { onCaller = m.onCaller }
			m.PostUserMessage(tc.msg)
			if got := r.messages(); len(got) != 1 || got[0] != tc.msg {
				t.Fatalf("invoked %v before the post returned, want the message", got)
			}
			if onCaller != tc.onCaller {
				t.Errorf("the actor was told the run is on a caller's goroutine: %v, want %v", onCaller, tc.onCaller)
			}
			if m.onCaller {
				t.Error("the mailbox still counts itself on a caller's goroutine after the run")
			}
			if n := d.scheduled(); n != 0 {
				t.Errorf("%d runs handed to the dispatcher, want none", n)
			}
			if m.running.Load() {
				t.Error("the mailbox is still marked running")
			}
		})
	}
}

func TestMessagesThatMayNotRunInlineGoToTheDispatcher(t *testing.T) {
	for _, msg := range []any{&stepTurn{}, &actor.ReceiveTimeout{}, &actor.PoisonPill{}} {
		t.Run(fmt.Sprintf("%T", msg), func(t *testing.T) {
			m, r, d := newTestMailbox()
			m.PostUserMessage(msg)
			if got := r.messages(); len(got) != 0 {
				t.Fatalf("invoked %v on the sender's goroutine", got)
			}
			d.runAll()
			if got := r.messages(); len(got) != 1 || got[0] != msg {
				t.Fatalf("the dispatcher invoked %v, want %v", got, msg)
			}
		})
	}
	t.Run("system", func(t *testing.T) {
		m, r, d := newTestMailbox()
		m.PostSystemMessage(&actor.Started{})
		if got := r.messages(); len(got) != 0 {
			t.Fatalf("invoked %v on the sender's goroutine", got)
		}
		d.runAll()
		if got := r.messages(); len(got) != 1 {
			t.Fatalf("the dispatcher invoked %v, want the system message", got)
		}
	})
}

// A sender runs at most inlineBudget messages; what is left, and what may
// not run inline, the dispatcher runs in order.
func TestAnInlineRunEndsAtItsBudgetOrAtAMessageThatMayNotRunInline(t *testing.T) {
	cases := []struct {
		name   string
		queued []any // posted while the sender's first message runs
		inline int   // messages the sender runs, its own included
	}{
		{"within the budget", reqs(3), 4},
		{"past the budget", reqs(inlineBudget + 5), inlineBudget},
		{"a step", append(append(reqs(2), &stepTurn{}), reqs(2)...), 3},
		{"a system message", nil, 1}, // posted below
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, r, d := newTestMailbox()
			first := &request{}
			posted := false
			r.onUser = func(msg any) {
				if msg != first || posted {
					return
				}
				posted = true
				for _, q := range tc.queued {
					m.PostUserMessage(q)
				}
				if tc.queued == nil {
					m.PostSystemMessage(&actor.Started{})
					m.PostUserMessage(&request{})
				}
			}
			m.PostUserMessage(first)
			if n := len(r.messages()); n != tc.inline {
				t.Errorf("the sender ran %d messages, want %d", n, tc.inline)
			}
			want := 1 + len(tc.queued)
			if tc.queued == nil {
				want = 3
			}
			if want > tc.inline && d.scheduled() != 1 {
				t.Errorf("%d runs handed over, want 1", d.scheduled())
			}
			d.runAll()
			got := r.messages()
			if len(got) != want {
				t.Fatalf("%d messages invoked in all, want %d", len(got), want)
			}
			if tc.queued != nil && !slices.Equal(got[1:], tc.queued) {
				t.Errorf("invoked out of order: %v, want %v", got[1:], tc.queued)
			}
			if tc.queued == nil {
				if _, ok := got[1].(*actor.Started); !ok {
					t.Errorf("after the sender's run: %T, want the system message first", got[1])
				}
			}
			if m.running.Load() {
				t.Error("the mailbox is still marked running")
			}
		})
	}
}

func reqs(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = &request{}
	}
	return out
}

func TestASuspendedMailboxRunsNoUserMessageUntilResumed(t *testing.T) {
	m, r, d := newTestMailbox()
	m.PostSystemMessage(&actor.SuspendMailbox{})
	d.runAll()
	q := &request{}
	m.PostUserMessage(q)
	d.runAll()
	if got := r.messages(); len(got) != 0 {
		t.Fatalf("a suspended mailbox invoked %v", got)
	}
	m.PostSystemMessage(&actor.ResumeMailbox{})
	d.runAll()
	if got := r.messages(); len(got) != 1 || got[0] != q {
		t.Fatalf("after resuming: %v, want the request", got)
	}
}

func TestAPanicIsEscalatedAndTheMailboxGoesOn(t *testing.T) {
	m, r, d := newTestMailbox()
	bad := &request{}
	r.onUser = func(msg any) {
		if msg == bad {
			panic("boom")
		}
	}
	m.PostUserMessage(bad)
	if len(r.escaped) != 1 || r.escaped[0] != "boom" {
		t.Fatalf("escalated %v, want the panic", r.escaped)
	}
	next := &request{}
	m.PostUserMessage(next)
	d.runAll()
	if got := r.messages(); len(got) != 2 || got[1] != next {
		t.Fatalf("after the panic: %v, want the next request run", got)
	}
}

// Many senders at once: every message is invoked once, each sender's in
// the order it posted them, and never two at a time.
func TestConcurrentSendersEachGetTheirMessagesRunOnceInOrder(t *testing.T) {
	m, r := &mailbox{}, &recorder{}
	m.RegisterHandlers(r, goDispatcher{})
	const senders, each = 8, 500
	type tag struct{ sender, n int }
	tags := map[any]tag{}
	sent := make([][]*request, senders)
	for s := range sent {
		for n := range each {
			q := &request{}
			sent[s] = append(sent[s], q)
			tags[q] = tag{s, n}
		}
	}
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n, q := range sent[s] {
				if n%7 == 0 {
					m.PostUserMessage(&stepTurn{}) // one that may not run inline
				}
				m.PostUserMessage(q)
			}
		}()
	}
	wg.Wait()
	for deadline := time.Now().Add(10 * time.Second); m.running.Load() || m.userN.Load() > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages left unrun", m.userN.Load())
		}
		runtime.Gosched()
	}
	next := make([]int, senders)
	for _, g := range r.messages() {
		tg, ok := tags[g]
		if !ok {
			continue
		}
		if tg.n != next[tg.sender] {
			t.Fatalf("sender %d: message %d invoked when %d was due", tg.sender, tg.n, next[tg.sender])
		}
		next[tg.sender]++
	}
	for s, n := range next {
		if n != each {
			t.Errorf("sender %d: %d of its %d messages invoked", s, n, each)
		}
	}
	if r.overlap.Load() {
		t.Error("two messages were invoked at once")
	}
}

type goDispatcher struct{}

func (goDispatcher) Schedule(fn func()) { go fn() }
func (goDispatcher) Throughput() int    { return 10 }

// A queue that never empties, a message in and a message out, reuses its
// slots instead of growing with every message that passed through it.
func TestAQueueThatNeverEmptiesStaysSmall(t *testing.T) {
	var q fifo
	q.push(0)
	for i := range 10000 {
		q.push(i + 1)
		if got := q.pop(); got != i {
			t.Fatalf("popped %v, want %d", got, i)
		}
	}
	if c := cap(q.items); c > 64 {
		t.Errorf("after 10,000 messages through a queue holding one or two: capacity %d, want it small", c)
	}
}
