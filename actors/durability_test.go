package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine"
)

// The agent actor's promise is "reply only after durable". These tests hold
// the real store's appends at a gate (gatedStore) and let them through, or
// fail them, one batch at a time, to watch what a client or a crash would
// see at each step.

// openRead is a read in steps that stays open until its done channel is
// closed. While it is open the agent has a request in flight that waits for
// no append, so every append goes out on an I/O goroutine and the actor
// goes on serving requests meanwhile: the pipelined path of a busy agent.
type openRead struct{ done chan struct{} }

func (o openRead) Step() bool {
	select {
	case <-o.done:
		return true
	default:
		time.Sleep(100 * time.Microsecond) // a turn's work, without spinning a core
		return false
	}
}

func (openRead) Close() {}

// startOpenRead opens such a read on agentID; finish ends it and returns
// the read's error.
func startOpenRead(t *testing.T, r *Registry, agentID string) (finish func() error) {
	t.Helper()
	o := openRead{done: make(chan struct{})}
	res := make(chan error, 1)
	go func() {
		_, err := ReadSteps(r, agentID, time.Time{}, func(*engine.Agent, time.Time) (openRead, error) { return o, nil })
		res <- err
	}()
	waitFor(t, func() bool { return inflight(r, agentID) == 1 })
	return func() error { close(o.done); return <-res }
}

// inflight is the number of requests admitted to agentID's actor and not
// yet answered.
func inflight(r *Registry, agentID string) int64 {
	sh := r.shardOf(agentID)
	sh.mu.Lock()
	e := sh.agents[agentID]
	sh.mu.Unlock()
	if e == nil {
		return 0
	}
	return e.inflight.Load()
}

// goSignal sends signal i in the background; the channel gets its error.
func goSignal(r *Registry, agentID, runID string, i int) <-chan error {
	done := make(chan error, 1)
	go func() { _, err := signal(r, agentID, runID, i); done <- err }()
	return done
}

// applied waits until agentID has n requests in flight, then a little more
// so the last one has been applied and waits behind the append in flight.
func applied(t *testing.T, r *Registry, agentID string, n int64) {
	t.Helper()
	waitFor(t, func() bool { return inflight(r, agentID) == n })
	time.Sleep(20 * time.Millisecond)
}

func notAnswered(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s answered (%v) before its own batch was durable", what, err)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestReplyWaitsForItsOwnBatchNotThePreviousOne: a write applied while an
// earlier batch is being synced goes out in the next batch; the earlier
// batch becoming durable must not release it.
func TestReplyWaitsForItsOwnBatchNotThePreviousOne(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, run := createAgentWithRun(t, r)

	g.hold()
	// A selection is answered before its append, which waits at the gate.
	if _, err := createRun(r, info, engine.CreateRun{}); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	done := goSignal(r, info.ID, run.ID, 1)
	applied(t, r, info.ID, 1)
	g.pass()    // the selection's batch is durable
	<-g.entered // the signal's batch is at the gate
	notAnswered(t, done, "a signal")
	g.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFailedWriteNeverReachesASnapshot: a snapshot is saved only once the
// log is durable up to it. When the append of the last event it would
// cover fails, the write is answered with an error, and the agent recovered
// from disk must not hold it.
func TestFailedWriteNeverReachesASnapshot(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, func(c *Config) { c.SnapshotEvery = 1 })
	info, run := createAgentWithRun(t, r)
	finish := startOpenRead(t, r, info.ID)

	g.hold()
	first := goSignal(r, info.ID, run.ID, 1)
	<-g.entered
	second := goSignal(r, info.ID, run.ID, 2)
	applied(t, r, info.ID, 3)
	g.pass() // the first signal's batch is durable; a snapshot is due, covering both
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-g.entered // the second signal's batch is at the gate
	time.Sleep(20 * time.Millisecond)
	g.failNext(1)
	g.release()
	if err := <-second; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("signal whose append failed: err = %v, want ErrUnavailable", err)
	}
	_ = finish()
	r.Close()

	r2 := newRegistry(t, g.Store, nil)
	got, err := runSignals(r2, info.ID, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("recovered %d signals, want 1: a write answered with an error came back from a snapshot", len(got))
	}
}

// TestShutdownAfterAFailedAppend: when the append in flight at shutdown
// fails, every write waiting for it or queued behind it is answered with
// ErrUnavailable, none with success, and the writes queued behind it are
// not written either: the log keeps no gap and the agent loads again.
func TestShutdownAfterAFailedAppend(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, run := createAgentWithRun(t, r)
	finish := startOpenRead(t, r, info.ID)

	g.hold()
	first := goSignal(r, info.ID, run.ID, 1)
	<-g.entered
	second := goSignal(r, info.ID, run.ID, 2) // queued behind the first batch
	applied(t, r, info.ID, 3)
	closed := make(chan struct{})
	go func() { r.Close(); close(closed) }()
	time.Sleep(50 * time.Millisecond) // the actor is draining, waiting for the append
	g.failNext(1)                     // the held append fails; a later one would succeed
	g.release()
	<-closed
	for i, done := range []<-chan error{first, second} {
		if err := <-done; !errors.Is(err, ErrUnavailable) {
			t.Errorf("signal %d at shutdown after a failed append: err = %v, want ErrUnavailable", i+1, err)
		}
	}
	_ = finish()

	r2 := newRegistry(t, g.Store, nil)
	got, err := runSignals(r2, info.ID, run.ID)
	if err != nil {
		t.Fatalf("agent after a shutdown that followed a failed append: %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("recovered %d signals, want none: each was answered with an error", len(got))
	}
}

// TestSnapshotOfAnotherSequenceIsRefused: a snapshot whose state covers
// another sequence than the one it is stored under would restore an agent
// that silently misses (or repeats) events; recovery refuses it and the
// agent answers ErrUnavailable instead.
func TestSnapshotOfAnotherSequenceIsRefused(t *testing.T) {
	store := openStore(t, nil)
	r := newRegistry(t, store, nil)
	info, run := createAgentWithRun(t, r)
	for i := range 3 {
		if _, err := signal(r, info.ID, run.ID, i); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()

	rec, err := store.Load(info.ID)
	if err != nil || len(rec.Tail) == 0 {
		t.Fatalf("load: %d events, %v", len(rec.Tail), err)
	}
	// A true snapshot of the agent one event back, stored as covering the
	// last event.
	older := rec
	older.Tail = rec.Tail[:len(rec.Tail)-1]
	a, err := restore(older)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.SaveSnapshot(info.ID, rec.LastSeq, a.Snapshot()); err != nil {
		t.Fatal(err)
	}

	r2 := newRegistry(t, store, nil)
	if got, err := runSignals(r2, info.ID, run.ID); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read of an agent whose snapshot disagrees with its stored sequence: %d signals, err %v; want ErrUnavailable", len(got), err)
	}
}

// TestRequestsQueuedBehindAFailedAppendAreAnswered: requests that reached
// the agent's mailbox while its append was failing are answered at once
// (ErrUnavailable, the caller may retry), not dropped with the stopping
// actor to wait out their deadline; and the next request recovers the
// agent from disk.
func TestRequestsQueuedBehindAFailedAppendAreAnswered(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, run := createAgentWithRun(t, r)

	g.hold()
	first := goSignal(r, info.ID, run.ID, 1) // alone in flight: appended in the actor's own turn
	<-g.entered
	read := make(chan error, 1)
	go func() {
		_, err := Read(r, info.ID, time.Now().Add(5*time.Second), func(*engine.Agent, time.Time) (struct{}, error) { return struct{}{}, nil })
		read <- err
	}()
	time.Sleep(50 * time.Millisecond) // the read waits in the mailbox behind the held append
	g.failNext(1)
	g.release()
	if err := <-first; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("signal whose append failed: err = %v, want ErrUnavailable", err)
	}
	if err := <-read; err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read queued behind the failed append: err = %v, want an answer or ErrUnavailable, not its deadline", err)
	}
	if _, err := signal(r, info.ID, run.ID, 2); err != nil {
		t.Fatalf("the next write, to a recovered agent: %v", err)
	}
}

// TestCloseWritesWhatIsQueued: writes queued behind an append in flight
// when the registry closes are written by the stopping actor and answered
// with success, not dropped or refused.
func TestCloseWritesWhatIsQueued(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := New(Config{Store: g, Seed: 7, RequestTimeout: 10 * time.Second})
	info, run := createAgentWithRun(t, r)
	// Hold the actor in a read while two writes queue: the first one's
	// append then leaves the actor's turn (another request is in flight),
	// and the second is applied and queued behind it.
	unblock := busyActor(t, r, info.ID)
	g.hold()
	errs := make(chan error, 2)
	go func() { _, err := signal(r, info.ID, run.ID, 1); errs <- err }()
	waitFor(t, func() bool { return inflight(r, info.ID) == 2 })
	go func() { _, err := signal(r, info.ID, run.ID, 2); errs <- err }()
	waitFor(t, func() bool { return inflight(r, info.ID) == 3 })
	unblock()
	<-g.entered // the first write's append is at the gate
	closed := make(chan struct{})
	go func() { r.Close(); close(closed) }()
	// Let the poison pill reach the actor, which then waits in drain for
	// the append at the gate (were it released first, the queued write
	// would be written the usual way and the test would show nothing).
	time.Sleep(50 * time.Millisecond)
	g.release()
	<-closed
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("a write queued at Close: %v", err)
		}
	}
	rec, err := g.Store.Load(info.ID)
	if err != nil || rec.LastSeq != 4 {
		t.Fatalf("after Close the log ends at %d, %v; want both writes (4)", rec.LastSeq, err)
	}
}

// Loaded is true only while the agent's actor is in memory with its agent
// rebuilt from the store: not before its first request, nor while its load
// fails, nor once an append of it has failed or it was passivated.
func TestLoadedIsTrueOnlyWhileTheAgentIsRebuiltInMemory(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
	info, run := createAgentWithRun(t, r)
	check := func(when string, want bool) {
		t.Helper()
		if got := r.Loaded(info.ID); got != want {
			t.Errorf("%s: Loaded = %v, want %v", when, got, want)
		}
	}
	if r.Loaded("agt_never") {
		t.Error("an agent never asked for is Loaded")
	}
	check("after its first requests", true)

	g.failNext(1)
	if _, err := signal(r, info.ID, run.ID, 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("signal whose append failed: %v", err)
	}
	check("after an append failed", false)

	g.loadFailN.Store(1)
	if _, err := runSignals(r, info.ID, run.ID); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read of an agent whose load fails: %v", err)
	}
	check("while its load fails", false)
	time.Sleep(recoveryRetry)
	_, _ = runSignals(r, info.ID, run.ID) // has the load retried
	waitFor(t, func() bool { return r.Loaded(info.ID) })

	waitFor(t, func() bool { return r.Live() == 0 })
	check("after passivation", false)
}
