package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// gatedStore is a real store whose appends can be held at a gate, so tests
// can decide when a write becomes durable. It counts appends.
type gatedStore struct {
	persist.Store
	appends atomic.Int64
	mu      sync.Mutex
	gate    chan struct{} // nil: appends pass
	entered chan struct{} // signalled when an append reaches a closed gate
	failing bool          // appends that pass the gate fail, as if the disk died
	failN   int           // this many more appends that pass the gate fail, later ones succeed
	loads   atomic.Int64
	// loadFailN: this many more loads fail, later ones read the store.
	loadFailN atomic.Int64
}

func (g *gatedStore) Load(agent string) (persist.Recovered, error) {
	g.loads.Add(1)
	if g.loadFailN.Add(-1) >= 0 {
		return persist.Recovered{}, errors.New("store between leaders")
	}
	return g.Store.Load(agent)
}

func (g *gatedStore) Append(b persist.Batch) error {
	g.appends.Add(1)
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		g.entered <- struct{}{}
		<-gate
	}
	g.mu.Lock()
	failing := g.failing || g.failN > 0
	if g.failN > 0 {
		g.failN--
	}
	g.mu.Unlock()
	if failing {
		return errors.New("disk gone")
	}
	return g.Store.Append(b)
}

func (g *gatedStore) hold() {
	g.mu.Lock()
	g.gate, g.entered = make(chan struct{}), make(chan struct{}, 1024)
	g.mu.Unlock()
}

// crash makes held and later appends fail and releases the gate.
func (g *gatedStore) crash() {
	g.mu.Lock()
	g.failing = true
	g.mu.Unlock()
	g.release()
}

// pass lets one append waiting at the gate through; the gate stays closed.
func (g *gatedStore) pass() {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	gate <- struct{}{}
}

// failNext makes the next n appends that pass the gate fail; later ones
// succeed, as after a transient disk error.
func (g *gatedStore) failNext(n int) {
	g.mu.Lock()
	g.failN = n
	g.mu.Unlock()
}

func (g *gatedStore) release() {
	g.mu.Lock()
	close(g.gate)
	g.gate = nil
	g.mu.Unlock()
}

func openStore(t *testing.T, fs vfs.FS) *pebblelog.Store {
	t.Helper()
	dir := "db"
	if fs == nil {
		dir = t.TempDir()
	}
	s, err := pebblelog.Open(dir, pebblelog.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	// Closed after the registry (cleanups run last first) and before the
	// temp dir is removed: an open Pebble may still write files into it.
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newRegistry(t *testing.T, store persist.Store, tune func(*Config)) *Registry {
	t.Helper()
	cfg := Config{Store: store, Seed: 7, RequestTimeout: 10 * time.Second}
	if tune != nil {
		tune(&cfg)
	}
	r := New(cfg)
	t.Cleanup(r.Close)
	return r
}

func createAgentWithRun(t *testing.T, r *Registry) (engine.AgentInfo, engine.Run) {
	t.Helper()
	info, err := answer(r.CreateAgent(engine.CreateAgent{Workspace: "default", Name: "support"}, time.Time{}, false))
	if err != nil {
		t.Fatal(err)
	}
	cr, err := createRun(r, info, engine.CreateRun{})
	if err != nil {
		t.Fatal(err)
	}
	// Selection answers before its append; a read waits for it, so tests
	// start from a durable agent.
	if _, err := Read(r, info.ID, time.Time{}, func(*engine.Agent, time.Time) (struct{}, error) { return struct{}{}, nil }); err != nil {
		t.Fatal(err)
	}
	return info, cr.Run
}

// answer folds a write's outcome into one error: delivery or verdict.
func answer[R any](out *Outcome[R], err error) (R, error) {
	if err != nil {
		var zero R
		return zero, err
	}
	return out.Result, out.Err
}

func createRun(r *Registry, info engine.AgentInfo, cmd engine.CreateRun) (engine.CreatedRun, error) {
	return answer(r.CreateRun(info, cmd, time.Time{}, false))
}

func runSignals(r *Registry, agentID, runID string) ([]engine.Signal, error) {
	return Read(r, agentID, time.Time{}, func(a *engine.Agent, _ time.Time) ([]engine.Signal, error) { return a.RunSignals(runID) })
}

func signal(r *Registry, agentID, runID string, i int) (engine.SignalResult, error) {
	cmd := engine.RecordSignal{Kind: "k", Value: float64(i), RunID: runID, DedupKey: fmt.Sprint("d-", i)}
	return answer(Write(r, agentID, time.Time{}, false, func(a *engine.Agent, now time.Time, rnd *rand.Rand) (engine.SignalResult, []engine.Event, error) {
		return a.RecordSignal(cmd, now, rnd)
	}))
}

func TestReplyWaitsForDurability(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, run := createAgentWithRun(t, r)

	g.hold()
	done := make(chan error, 1)
	go func() { _, err := signal(r, info.ID, run.ID, 1); done <- err }()
	<-g.entered
	// A read that arrives while the write is being synced must not see it
	// before it is durable either: it waits too.
	read := make(chan int, 1)
	go func() {
		res, _ := runSignals(r, info.ID, run.ID)
		read <- len(res)
	}()
	select {
	case err := <-done:
		t.Fatalf("write answered (%v) before its append was durable", err)
	case n := <-read:
		t.Fatalf("read answered (%d signals) before an applied write was durable", n)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := <-read; n != 1 {
		t.Fatalf("read saw %d signals, want 1", n)
	}
}

func TestHotAgentPipelinesAppends(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, run := createAgentWithRun(t, r)
	settle(t, r, info.ID) // a commit is observed after its requests are answered
	before := g.appends.Load()
	answeredBefore := histogramSum(t, r.metrics.batchRequests)

	const writers = 64
	g.hold()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := signal(r, info.ID, run.ID, i); err != nil {
				errs <- err
			}
		}()
	}
	<-g.entered // the first batch is at the gate; the others queue behind it
	waitFor(t, func() bool { return inflight(r, info.ID) == writers })
	g.release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := g.appends.Load() - before; n >= writers {
		t.Fatalf("%d appends for %d writes: the agent is not batching while a sync is in flight", n, writers)
	}
	// The batch-requests histogram counts each write once, in the commit
	// that answered it, however the writes were batched. A commit is
	// observed after its requests are answered: waited for.
	n := histogramSum(t, r.metrics.batchRequests) - answeredBefore
	for deadline := time.Now().Add(10 * time.Second); n < writers && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
		n = histogramSum(t, r.metrics.batchRequests) - answeredBefore
	}
	if n != writers {
		t.Fatalf("plaudit_actor_append_batch_requests summed %v for %d writes", n, writers)
	}
}

func histogramSum(t *testing.T, h prometheus.Histogram) float64 {
	t.Helper()
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleSum()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// busyActor holds the agent's actor in a read until release is called,
// so that requests sent meanwhile queue in its mailbox.
func busyActor(t *testing.T, r *Registry, agentID string) (release func()) {
	t.Helper()
	entered, unblock := make(chan struct{}), make(chan struct{})
	go Read(r, agentID, time.Time{}, func(*engine.Agent, time.Time) (struct{}, error) {
		close(entered)
		<-unblock
		return struct{}{}, nil
	})
	<-entered
	var once sync.Once
	release = func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release)
	return release
}

func TestOverloadedAgentFailsFast(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, func(c *Config) { c.MailboxLimit = 1 })
	info, run := createAgentWithRun(t, r)
	g.hold()
	first := make(chan error, 1)
	go func() { _, err := signal(r, info.ID, run.ID, 1); first <- err }()
	<-g.entered
	if _, err := signal(r, info.ID, run.ID, 2); !errors.Is(err, ErrOverloaded) {
		t.Fatalf("second request: err = %v, want ErrOverloaded", err)
	}
	g.release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

func TestPassivatedAgentRecoversItsState(t *testing.T) {
	store := openStore(t, nil)
	r := newRegistry(t, store, func(c *Config) { c.IdleTimeout = 20 * time.Millisecond; c.SnapshotEvery = 4 })
	info, run := createAgentWithRun(t, r)
	for i := range 10 {
		if _, err := signal(r, info.ID, run.ID, i); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return r.Live() == 0 })
	rec, err := store.Load(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Snapshot == nil || len(rec.Tail) != 0 {
		t.Fatalf("after passivation: snapshot %v, tail %d; want a snapshot covering everything", rec.Snapshot != nil, len(rec.Tail))
	}
	again, err := signal(r, info.ID, run.ID, 3)
	if err != nil || !again.Duplicate {
		t.Fatalf("dedup key after recovery: %+v, %v", again, err)
	}
	res, err := runSignals(r, info.ID, run.ID)
	if err != nil || len(res) != 10 {
		t.Fatalf("recovered %v signals, err %v", res, err)
	}
}

// TestSnapshotsKeepTheTailShorterThanTheirHistory: once writes stop, the
// events after the last snapshot are fewer than those it covers, however
// the snapshots in flight fell: one that was due while another was being
// written is taken when that one ends.
func TestSnapshotsKeepTheTailShorterThanTheirHistory(t *testing.T) {
	store := openStore(t, nil)
	r := newRegistry(t, store, func(c *Config) { c.SnapshotEvery = 5 })
	info, run := createAgentWithRun(t, r)
	for i := range 40 {
		if _, err := signal(r, info.ID, run.ID, i); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool {
		rec, err := store.Load(info.ID)
		return err == nil && rec.LastSeq == 42 && rec.SnapshotSeq >= 5 && len(rec.Tail) < int(rec.SnapshotSeq)
	})
}

// settle waits until the agent's actor has finished the turn in which it
// answered the last write: a write is answered mid-turn, before the actor
// considers a snapshot or counts the batch, so a test that moves the clock
// or reads a metric must wait for that. A read is answered once the writes
// before it are durable, perhaps itself in such a turn; a second read,
// with nothing left to wait for, is taken only after that turn ends.
func settle(t *testing.T, r *Registry, agentID string) {
	t.Helper()
	for range 2 {
		if _, err := Read(r, agentID, time.Time{}, func(*engine.Agent, time.Time) (struct{}, error) { return struct{}{}, nil }); err != nil {
			t.Fatal(err)
		}
	}
}

// intervalRegistry is a registry whose snapshots come by SnapshotInterval
// (a minute) long before SnapshotEvery, on a clock the test moves.
func intervalRegistry(t *testing.T, store persist.Store) (*Registry, *fakeClock) {
	t.Helper()
	clock := &fakeClock{}
	clock.ns.Store(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).UnixNano())
	r := newRegistry(t, store, func(c *Config) {
		c.SnapshotEvery, c.SnapshotInterval = 1000, time.Minute
		c.Now = clock.now
	})
	return r, clock
}

type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Add(d time.Duration) { c.ns.Add(int64(d)) }

// TestFewEventsAreSnapshottedOnceTheIntervalPasses: an agent far below
// SnapshotEvery is still snapshotted once SnapshotInterval has passed since
// its first unsnapshotted event, at the next write that lands; after that,
// once the events since the snapshot are as many as those it covers.
func TestFewEventsAreSnapshottedOnceTheIntervalPasses(t *testing.T) {
	store := openStore(t, nil)
	r, clock := intervalRegistry(t, store)
	info, run := createAgentWithRun(t, r) // events 1 and 2
	i := 0
	write := func() {
		t.Helper()
		i++
		if _, err := signal(r, info.ID, run.ID, i); err != nil {
			t.Fatal(err)
		}
	}
	snapshotAt := func(seq uint64) {
		t.Helper()
		waitFor(t, func() bool {
			rec, err := store.Load(info.ID)
			return err == nil && rec.SnapshotSeq == seq
		})
	}
	for range 5 { // events 3 to 7
		write()
	}
	if rec, err := store.Load(info.ID); err != nil || rec.Snapshot != nil {
		t.Fatalf("snapshot before the interval: %d, %v", rec.SnapshotSeq, err)
	}
	settle(t, r, info.ID)
	clock.Add(2 * time.Minute)
	write() // event 8 lands past the interval
	snapshotAt(8)
	write() // event 9 starts the next interval
	settle(t, r, info.ID)
	clock.Add(2 * time.Minute)
	for range 6 { // events 10 to 15: past the interval, fewer than 8 since
		write()
	}
	settle(t, r, info.ID)
	if rec, err := store.Load(info.ID); err != nil || rec.SnapshotSeq != 8 {
		t.Fatalf("snapshot at %d with 7 events since the one at 8: %v; want it at 8 still", rec.SnapshotSeq, err)
	}
	write() // event 16: eight since the snapshot, as many as it covers
	snapshotAt(16)
}

// TestARecordAloneDoesNotStartTheSnapshotInterval: the interval runs from
// the first event after a snapshot; a refused write's Idempotency-Key
// record, committed with no event, does not start it.
func TestARecordAloneDoesNotStartTheSnapshotInterval(t *testing.T) {
	store := openStore(t, nil)
	r, clock := intervalRegistry(t, store)
	info, run := createAgentWithRun(t, r) // events 1 and 2
	settle(t, r, info.ID)
	clock.Add(2 * time.Minute)
	if _, err := signal(r, info.ID, run.ID, 1); err != nil { // event 3 lands past the interval
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		rec, err := store.Load(info.ID)
		return err == nil && rec.SnapshotSeq == 3
	})
	out, err := heldSignal(r, info.ID, "run_missing", 1)
	if err != nil || !errors.Is(out.Err, engine.ErrNotFound) {
		t.Fatalf("held write on a missing run = %+v, %v", out, err)
	}
	if err := out.Commit(persist.KV{Key: []byte("idem/r/refused"), Value: []byte("404")}); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Minute)
	for i := range 3 { // events 4 to 6: as many as the snapshot covers, the first starting the interval
		if _, err := signal(r, info.ID, run.ID, 2+i); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, r, info.ID)
	time.Sleep(50 * time.Millisecond) // a snapshot would be saved by now
	if rec, err := store.Load(info.ID); err != nil || rec.SnapshotSeq != 3 {
		t.Fatalf("snapshot at %d, %v; want it at 3 still: the interval began at event 4, not at the record", rec.SnapshotSeq, err)
	}
}

// TestSnapshotsComeEverySnapshotEveryEvents: with writes one at a time,
// the first snapshot covers exactly SnapshotEvery events, and the next is
// not taken before as many more have come; once a snapshot covers more
// than SnapshotEvery, the next waits for as many events as it covers.
func TestSnapshotsComeEverySnapshotEveryEvents(t *testing.T) {
	store := openStore(t, nil)
	r := newRegistry(t, store, func(c *Config) { c.SnapshotEvery = 10 })
	info, run := createAgentWithRun(t, r)
	for i := range 8 { // events 3 to 10
		if _, err := signal(r, info.ID, run.ID, i); err != nil {
			t.Fatal(err)
		}
	}
	// Taken once the 10th event is durable, with no write after it.
	waitFor(t, func() bool {
		rec, err := store.Load(info.ID)
		return err == nil && rec.Snapshot != nil
	})
	for i := range 9 { // events 11 to 19
		if _, err := signal(r, info.ID, run.ID, 8+i); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond) // a second snapshot would be saved by now
	if rec, err := store.Load(info.ID); err != nil || rec.SnapshotSeq != 10 || rec.LastSeq != 19 {
		t.Fatalf("snapshot at %d of %d events, %v; want 10", rec.SnapshotSeq, rec.LastSeq, err)
	}
	// Event 20 is ten after the snapshot: the next covers 20, and the one
	// after it waits for twenty more, not SnapshotEvery's ten.
	for i := 20; i <= 39; i++ {
		if _, err := signal(r, info.ID, run.ID, i); err != nil {
			t.Fatal(err)
		}
		if i == 20 {
			waitFor(t, func() bool {
				rec, err := store.Load(info.ID)
				return err == nil && rec.SnapshotSeq == 20
			})
		}
	}
	time.Sleep(100 * time.Millisecond)
	if rec, err := store.Load(info.ID); err != nil || rec.SnapshotSeq != 20 || rec.LastSeq != 39 {
		t.Fatalf("snapshot at %d of %d events, %v; want 20 still", rec.SnapshotSeq, rec.LastSeq, err)
	}
	if _, err := signal(r, info.ID, run.ID, 40); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		rec, err := store.Load(info.ID)
		return err == nil && rec.SnapshotSeq == 40
	})
}

// TestIdleAgentLeavesASnapshot: an agent passivated after IdleTimeout
// first snapshots what it holds, however few events that is, so its next
// recovery reads no log.
func TestIdleAgentLeavesASnapshot(t *testing.T) {
	store := openStore(t, nil)
	r := newRegistry(t, store, func(c *Config) { c.IdleTimeout = 20 * time.Millisecond; c.SnapshotEvery = 1000 })
	info, run := createAgentWithRun(t, r)
	if _, err := signal(r, info.ID, run.ID, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return r.Live() == 0 })
	rec, err := store.Load(info.ID)
	if err != nil || rec.Snapshot == nil || rec.SnapshotSeq != 3 || len(rec.Tail) != 0 {
		t.Fatalf("after passivation: snapshot at %d, tail %d, %v; want all 3 events in the snapshot", rec.SnapshotSeq, len(rec.Tail), err)
	}
	var m dto.Metric
	if err := r.metrics.snapshotFailed.Write(&m); err != nil || m.GetCounter().GetValue() != 0 {
		t.Fatalf("plaudit_snapshot_failures_total = %v, %v; want 0 after a snapshot that was saved", m.GetCounter().GetValue(), err)
	}
}

// TestBusyAgentIsNotPassivated: requests that keep coming, each well
// within IdleTimeout of the last, keep the actor (the timeout runs from
// the last message, not from when it was armed); once they stop, the actor
// is passivated.
func TestBusyAgentIsNotPassivated(t *testing.T) {
	const idle = 300 * time.Millisecond // far above any pause between the reads below, even under -race
	r := newRegistry(t, openStore(t, nil), func(c *Config) { c.IdleTimeout = idle })
	info, _ := createAgentWithRun(t, r)
	for end := time.Now().Add(3 * idle); time.Now().Before(end); time.Sleep(idle / 30) {
		if _, err := Read(r, info.ID, time.Time{}, func(a *engine.Agent, _ time.Time) (uint64, error) { return a.LastSeq(), nil }); err != nil {
			t.Fatal(err)
		}
	}
	var m dto.Metric
	if err := r.metrics.passivated.Write(&m); err != nil || m.GetCounter().GetValue() != 0 {
		t.Fatalf("passivated while busy: %v, %v; want 0", m.GetCounter().GetValue(), err)
	}
	waitFor(t, func() bool { return r.Live() == 0 })
	if err := r.metrics.passivated.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		t.Fatalf("passivated once idle: %v, %v; want 1", m.GetCounter().GetValue(), err)
	}
}

// TestIdleActorOfAnUnknownAgentStops: an actor started for an agent that
// does not exist (a request that answered not found) stops when idle like
// any other, writing nothing.
func TestIdleActorOfAnUnknownAgentStops(t *testing.T) {
	store := openStore(t, nil)
	r := newRegistry(t, store, func(c *Config) { c.IdleTimeout = 20 * time.Millisecond })
	_, err := Read(r, "agt_unknown", time.Time{}, func(a *engine.Agent, _ time.Time) (uint64, error) { return a.LastSeq(), nil })
	if !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("read of an unknown agent: %v; want ErrNotFound", err)
	}
	waitFor(t, func() bool { return r.Live() == 0 })
	if rec, err := store.Load("agt_unknown"); err != nil || rec.Snapshot != nil || rec.LastSeq != 0 {
		t.Fatalf("an unknown agent left %+v, %v", rec, err)
	}
}

// TestIdleAgentWaitsForItsAppend: an agent whose last write is not yet
// durable (a selection answered ahead of its append) does not stop, nor
// snapshot events the log does not hold, while that append waits.
func TestIdleAgentWaitsForItsAppend(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, func(c *Config) { c.IdleTimeout = 20 * time.Millisecond; c.SnapshotEvery = 1000 })
	info, _ := createAgentWithRun(t, r)
	settle(t, r, info.ID)
	g.hold()
	if _, err := createRun(r, info, engine.CreateRun{}); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	time.Sleep(200 * time.Millisecond) // ten idle timeouts
	rec, err := g.Store.Load(info.ID)
	if err != nil || rec.Snapshot != nil || r.Live() != 1 {
		t.Fatalf("while the append waits: snapshot at %d, %v, %d actors live; want no snapshot and the actor", rec.SnapshotSeq, err, r.Live())
	}
	g.release()
	waitFor(t, func() bool { return r.Live() == 0 })
	if rec, err := g.Store.Load(info.ID); err != nil || rec.SnapshotSeq != 3 {
		t.Fatalf("after passivation: snapshot at %d, %v; want 3", rec.SnapshotSeq, err)
	}
}

// TestSnapshotIntervalStartsWithAnEvent: a write that adds only records
// (a held refusal's Idempotency-Key record) starts no snapshot interval;
// the interval runs from the first event after the last snapshot.
func TestSnapshotIntervalStartsWithAnEvent(t *testing.T) {
	store := openStore(t, nil)
	r, clock := intervalRegistry(t, store)
	info, run := createAgentWithRun(t, r)
	// A write waits for every earlier one, the run's early-answered append
	// too, so no commit lands after the clock moves but this one.
	if _, err := signal(r, info.ID, run.ID, 0); err != nil {
		t.Fatal(err)
	}
	settle(t, r, info.ID)
	clock.Add(2 * time.Minute)
	if _, err := signal(r, info.ID, run.ID, 1); err != nil {
		t.Fatal(err)
	}
	var snapped uint64
	waitFor(t, func() bool {
		rec, err := store.Load(info.ID)
		snapped = rec.SnapshotSeq
		return err == nil && rec.Snapshot != nil
	})
	out, err := heldSignal(r, info.ID, "run_unknown", 1)
	if err != nil || out.Err == nil {
		t.Fatalf("held signal to an unknown run = %+v, %v; want a refusal", out, err)
	}
	if err := out.Commit(persist.KV{Key: []byte("idem/r/test"), Value: []byte("404")}); err != nil {
		t.Fatal(err)
	}
	settle(t, r, info.ID)
	clock.Add(90 * time.Second) // past the record's minute, not the event's
	if _, err := signal(r, info.ID, run.ID, 2); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a snapshot would be saved by now
	if rec, err := store.Load(info.ID); err != nil || rec.SnapshotSeq != snapped {
		t.Fatalf("snapshot at %d (was %d), %v: the interval ran from a write without events", rec.SnapshotSeq, snapped, err)
	}
}

// TestCrashLosesNoAcknowledgedWrite runs many concurrent writers through the
// actors on Pebble's crashable in-memory FS, crashes at a random point, and
// recovers from the clone: every acknowledged signal is there, and what was
// recovered is exactly a prefix of what the live agent held.
func TestCrashLosesNoAcknowledgedWrite(t *testing.T) {
	rounds := 6
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		t.Run(fmt.Sprint("round=", round), func(t *testing.T) { crashRound(t, uint64(round)) })
	}
}

func crashRound(t *testing.T, seed uint64) {
	fs := vfs.NewCrashableMem()
	store, err := pebblelog.Open("db", pebblelog.Options{FS: fs, MemTableSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Config{Store: store, Seed: 7, SnapshotEvery: 50})
	const agents, writers = 3, 24
	type target struct {
		info engine.AgentInfo
		run  engine.Run
	}
	targets := make([]target, agents)
	for i := range targets {
		targets[i].info, targets[i].run = createAgentWithRun(t, r)
	}
	var (
		mu    sync.Mutex
		acked = map[string]string{} // signal id → agent id
		stop  atomic.Bool
		count atomic.Int64
		wg    sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tg := targets[w%agents]
			for i := 0; !stop.Load(); i++ {
				res, err := signal(r, tg.info.ID, tg.run.ID, w*1_000_000+i)
				if err != nil {
					continue // unacknowledged: may or may not survive
				}
				mu.Lock()
				acked[res.Signal.ID] = tg.info.ID
				mu.Unlock()
				count.Add(1)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	want := int64(100 + rng.IntN(1500))
	for count.Load() < want {
		time.Sleep(100 * time.Microsecond)
	}
	mu.Lock()
	ackedAtCrash := make(map[string]string, len(acked))
	for k, v := range acked {
		ackedAtCrash[k] = v
	}
	mu.Unlock()
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(100), RNG: rand.New(rand.NewPCG(seed, 1))})
	stop.Store(true)
	wg.Wait()
	live := map[string][]engine.Signal{}
	for _, tg := range targets {
		res, err := runSignals(r, tg.info.ID, tg.run.ID)
		if err != nil {
			t.Fatal(err)
		}
		live[tg.info.ID] = res
	}
	r.Close()
	_ = store.Close()

	store2, err := pebblelog.Open("db", pebblelog.Options{FS: clone})
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	r2 := New(Config{Store: store2, Seed: 8})
	defer r2.Close()
	for _, tg := range targets {
		res, err := runSignals(r2, tg.info.ID, tg.run.ID)
		if err != nil {
			t.Fatalf("recover %s: %v", tg.info.ID, err)
		}
		got := res
		want := live[tg.info.ID]
		if len(got) > len(want) {
			t.Fatalf("%s recovered %d signals, the live agent had %d", tg.info.ID, len(got), len(want))
		}
		present := map[string]bool{}
		for i, s := range got {
			if s != want[i] && !signalsEqual(s, want[i]) {
				t.Fatalf("%s: recovered signal %d = %+v, live had %+v", tg.info.ID, i, s, want[i])
			}
			present[s.ID] = true
		}
		for id, agent := range ackedAtCrash {
			if agent == tg.info.ID && !present[id] {
				t.Fatalf("acknowledged signal %s of %s lost in the crash", id, agent)
			}
		}
	}
	t.Logf("%d acknowledged before the crash", len(ackedAtCrash))
}

func signalsEqual(a, b engine.Signal) bool {
	return a.ID == b.ID && a.Kind == b.Kind && a.Value == b.Value && a.RunID == b.RunID &&
		a.DedupKey == b.DedupKey && a.OccurredAt.Equal(b.OccurredAt) && a.ReceivedAt.Equal(b.ReceivedAt) && a.Seq == b.Seq
}

func TestSelectAnswersBeforeItsAppendAndStaysFindable(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, _ := createAgentWithRun(t, r)

	g.hold()
	cr, err := createRun(r, info, engine.CreateRun{ExternalID: "ticket-7"})
	if err != nil {
		t.Fatal(err)
	}
	run := cr.Run
	<-g.entered // its append is held: the answer came before durability
	for _, ref := range []string{run.ID, "external_id:ticket-7"} {
		if id, owner, err := r.Run("default", ref); err != nil || id != run.ID || owner.ID != info.ID {
			t.Fatalf("Run(%s) while the append is held = %s, %s, %v", ref, id, owner.ID, err)
		}
	}
	// A write that refers to the run is answered only once the run is durable.
	done := make(chan error, 1)
	go func() { _, err := signal(r, info.ID, run.ID, 1); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("signal answered (%v) while the run's append was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := g.Store.Get(runKey(run.ID)); err != nil {
		t.Fatalf("run index not in the store after the append: %v", err)
	}
}

// TestPublishedEntriesLeaveMemoryWithTheirAppend: the directory entries of
// a run answered ahead of its append leave memory as soon as that append
// lands (the store answers for them then), with no later write needed.
func TestPublishedEntriesLeaveMemoryWithTheirAppend(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, _ := createAgentWithRun(t, r)
	g.hold()
	if _, err := createRun(r, info, engine.CreateRun{ExternalID: "ticket-8"}); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	published := r.pendingIdx.len
	if published() == 0 {
		t.Fatal("nothing published ahead of the held append")
	}
	g.release()
	waitFor(t, func() bool { return published() == 0 })
}

// TestSelectIsAnsweredWhileAnAppendIsInFlight: the actor appends on its
// own turn only when every request in flight waits for that batch; a
// selection queued behind is answered while the append waits on the disk,
// whether the append carries an earlier selection or a write queued with
// others.
func TestSelectIsAnsweredWhileAnAppendIsInFlight(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first func(r *Registry, info engine.AgentInfo, run engine.Run) error
	}{
		{"behind a selection", func(r *Registry, info engine.AgentInfo, _ engine.Run) error {
			_, err := createRun(r, info, engine.CreateRun{})
			return err
		}},
		{"behind a write and another write", func(r *Registry, info engine.AgentInfo, run engine.Run) error {
			_, err := signal(r, info.ID, run.ID, 1)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &gatedStore{Store: openStore(t, nil)}
			r := newRegistry(t, g, nil)
			info, run := createAgentWithRun(t, r)
			// Hold the actor in a read while the requests queue, so that
			// all three are in flight when it takes the first.
			unblock := busyActor(t, r, info.ID)
			g.hold()
			var release sync.Once
			defer release.Do(g.release)
			errs := make(chan error, 2)
			go func() { errs <- tc.first(r, info, run) }()
			go func() { _, err := signal(r, info.ID, run.ID, 2); errs <- err }()
			waitFor(t, func() bool { return inflight(r, info.ID) == 3 })
			selected := make(chan error, 1)
			go func() { _, err := createRun(r, info, engine.CreateRun{}); selected <- err }()
			waitFor(t, func() bool { return inflight(r, info.ID) == 4 })
			unblock()
			<-g.entered
			select {
			case err := <-selected:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("a selection waited for an append it had no part in")
			}
			release.Do(g.release)
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestLoneSelectionsAreAnsweredWhileTheirAppendWaits: a selection alone
// in flight is answered before its append, and the append leaves the
// actor's turn, so the next selection is answered while the disk stalls.
func TestLoneSelectionsAreAnsweredWhileTheirAppendWaits(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, _ := createAgentWithRun(t, r)
	g.hold()
	defer g.release()
	if _, err := createRun(r, info, engine.CreateRun{}); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	selected := make(chan error, 1)
	go func() { _, err := createRun(r, info, engine.CreateRun{}); selected <- err }()
	select {
	case err := <-selected:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a selection waited for the append of the one before")
	}
}

// TestLostSelectIsNotFoundLater: when the append carrying a fast-answered
// run fails, the run is gone for good, and a later signal or lookup for it
// is an explicit 404, never silently dropped.
func TestLostSelectIsNotFoundLater(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, _ := createAgentWithRun(t, r)
	g.hold()
	cr, err := createRun(r, info, engine.CreateRun{})
	if err != nil {
		t.Fatal(err)
	}
	run := cr.Run
	<-g.entered
	g.crash()
	waitFor(t, func() bool { _, _, err := r.Run("default", run.ID); return errors.Is(err, engine.ErrNotFound) })
	g.mu.Lock()
	g.failing = false
	g.mu.Unlock()
	if _, err := signal(r, info.ID, run.ID, 1); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("signal for a lost run: err = %v, want not found", err)
	}
}

func TestDurableSelectWaitsForItsAppend(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, func(c *Config) { c.DurableSelect = true })
	info, _ := createAgentWithRun(t, r)
	g.hold()
	done := make(chan error, 1)
	go func() { _, err := createRun(r, info, engine.CreateRun{}); done <- err }()
	<-g.entered
	select {
	case err := <-done:
		t.Fatalf("durable select answered (%v) before its append", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestAWriteThatChangesNothingWaitsForNoDisk: a duplicate signal decides
// no events, so once everything before it is durable it is answered at
// once, without an append of its own, even while the disk is stalled.
func TestAWriteThatChangesNothingWaitsForNoDisk(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, run := createAgentWithRun(t, r)
	if _, err := signal(r, info.ID, run.ID, 1); err != nil {
		t.Fatal(err)
	}
	before := g.appends.Load()
	g.hold()
	defer g.release()
	done := make(chan engine.SignalResult, 1)
	go func() {
		res, err := signal(r, info.ID, run.ID, 1)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case res := <-done:
		if !res.Duplicate {
			t.Fatalf("the same dedup key again: %+v; want a duplicate", res)
		}
	case <-g.entered:
		t.Fatal("a write that changed nothing waited for an append")
	case <-time.After(5 * time.Second):
		t.Fatal("a write that changed nothing was not answered")
	}
	if n := g.appends.Load() - before; n != 0 {
		t.Fatalf("%d appends for a duplicate; want none", n)
	}
}

// A recovery that failed (a cluster's store between leaders, say) is tried
// again once a request comes a second after it: an agent that requests
// keep reaching never idles out, so it would otherwise answer that failure
// for good.
func TestAFailedRecoveryIsTriedAgain(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	info, run := createAgentWithRun(t, newRegistry(t, g, nil))
	g.loadFailN.Store(1)
	clock := &fakeClock{}
	r := newRegistry(t, g, func(c *Config) { c.Now = clock.now })
	read := func() error {
		_, err := Read(r, info.ID, time.Time{}, func(a *engine.Agent, _ time.Time) (engine.Run, error) { return a.Run(run.ID) })
		return err
	}
	before := g.loads.Load()
	if err := read(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a read while the store fails: %v, want ErrUnavailable", err)
	}
	clock.Add(recoveryRetry - time.Millisecond)
	if err := read(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a read before the retry is due: %v, want the same failure", err)
	}
	time.Sleep(50 * time.Millisecond) // room for a retry made too soon to show
	if n := g.loads.Load() - before; n != 1 {
		t.Fatalf("%d loads before the retry is due, want 1", n)
	}
	// The read that finds the retry due has it made on a pool goroutine,
	// and still gets the failure; the agent answers once it is done.
	clock.Add(time.Millisecond)
	if err := read(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the read that has the recovery retried: %v, want the failure", err)
	}
	for deadline := time.Now().Add(10 * time.Second); read() != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no read answered in 10s after the retry: %v", read())
		}
	}
	if n := g.loads.Load() - before; n != 2 {
		t.Fatalf("%d loads after the retry, want 2", n)
	}
}

// A batch no request waits for (selections answered early), sent on by the
// I/O goroutine whose append just landed, goes to another goroutine like
// any batch: a selection made while it waits on the disk is answered at
// once, not after it.
func TestASelectionIsAnsweredWhileABatchNoOneWaitsForIsOnTheDisk(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, _ := createAgentWithRun(t, r)
	g.hold()
	defer g.release()
	// The first selection's batch goes out and waits at the gate; the
	// second's queues behind it.
	if _, err := createRun(r, info, engine.CreateRun{}); err != nil {
		t.Fatal(err)
	}
	<-g.entered
	if _, err := createRun(r, info, engine.CreateRun{}); err != nil {
		t.Fatal(err)
	}
	// The first lands; the goroutine that appended it sends the second on,
	// which now waits at the gate.
	g.pass()
	<-g.entered
	done := make(chan error, 1)
	go func() { _, err := createRun(r, info, engine.CreateRun{}); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a selection waited for an append it has no part in")
	}
}
