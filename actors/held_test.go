package actors

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist"
)

// batchStore is a real store that keeps a copy of every batch it appends.
type batchStore struct {
	persist.Store
	mu      sync.Mutex
	batches []persist.Batch
}

func (b *batchStore) Append(batch persist.Batch) error {
	b.mu.Lock()
	b.batches = append(b.batches, batch)
	b.mu.Unlock()
	return b.Store.Append(batch)
}

func (b *batchStore) appended() []persist.Batch {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]persist.Batch(nil), b.batches...)
}

func heldSignal(r *Registry, agentID, runID string, i int) (*Outcome[engine.SignalResult], error) {
	cmd := engine.RecordSignal{Kind: "k", Value: float64(i), RunID: runID}
	return Write(r, agentID, time.Time{}, true, func(a *engine.Agent, now time.Time, rnd *rand.Rand) (engine.SignalResult, []engine.Event, error) {
		return a.RecordSignal(cmd, now, rnd)
	})
}

// TestHeldWriteCommitsItsRecordsWithItsEvents: a held write is answered
// once decided; its events wait, and so does every later write of the
// agent, until Commit hands over the records, which then leave in the same
// batch as the events.
func TestHeldWriteCommitsItsRecordsWithItsEvents(t *testing.T) {
	bs := &batchStore{Store: openStore(t, nil)}
	r := newRegistry(t, bs, nil)
	info, run := createAgentWithRun(t, r)
	before := len(bs.appended())

	out, err := heldSignal(r, info.ID, run.ID, 1)
	if err != nil || out.Err != nil || out.Result.Signal.ID == "" {
		t.Fatalf("held write = %+v, %v", out, err)
	}
	later := make(chan error, 1)
	go func() { _, err := signal(r, info.ID, run.ID, 2); later <- err }()
	select {
	case err := <-later:
		t.Fatalf("a later write was answered (%v) while an earlier one was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	if n := len(bs.appended()) - before; n != 0 {
		t.Fatalf("%d batches appended while a write was held", n)
	}
	record := persist.KV{Key: []byte("idem/r/test"), Value: []byte("the rendered answer")}
	if err := out.Commit(record); err != nil {
		t.Fatal(err)
	}
	if err := <-later; err != nil {
		t.Fatal(err)
	}
	var withRecord *persist.Batch
	for _, b := range bs.appended()[before:] {
		for _, kv := range b.Index {
			if string(kv.Key) == string(record.Key) {
				withRecord = &b
			}
		}
	}
	if withRecord == nil || len(withRecord.Events) == 0 {
		t.Fatalf("the record left in a batch without the held write's events: %+v", withRecord)
	}
	if v, err := bs.Get(record.Key); err != nil || string(v) != string(record.Value) {
		t.Fatalf("record after Commit: %q, %v", v, err)
	}
}

// TestHeldWriteThatDecidesNothingCommitsItsRecordAlone: a held write the
// engine refuses still takes its record (a 4xx answer is recorded) and
// holds nothing else back.
func TestHeldWriteThatDecidesNothingCommitsItsRecordAlone(t *testing.T) {
	bs := &batchStore{Store: openStore(t, nil)}
	r := newRegistry(t, bs, nil)
	info, _ := createAgentWithRun(t, r)
	out, err := heldSignal(r, info.ID, "run_missing", 1)
	if err != nil || !errors.Is(out.Err, engine.ErrNotFound) {
		t.Fatalf("held write on a missing run = %+v, %v", out, err)
	}
	if _, err := signal(r, info.ID, "run_missing", 2); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a write while a refused one is held: %v", err)
	}
	if err := out.Commit(persist.KV{Key: []byte("idem/r/refused"), Value: []byte("404")}); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Get([]byte("idem/r/refused")); err != nil {
		t.Fatalf("record of a refused write: %v", err)
	}
}

// TestRequestAbandonedBeforeTheActorIsDropped: a write whose caller gave up
// before the actor reached it is never executed.
func TestRequestAbandonedBeforeTheActorIsDropped(t *testing.T) {
	r := newRegistry(t, openStore(t, nil), func(c *Config) { c.RequestTimeout = 100 * time.Millisecond })
	info, run := createAgentWithRun(t, r)
	entered, busy, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		// Keeps the actor's goroutine until released.
		_, _ = Read(r, info.ID, time.Time{}, func(*engine.Agent, time.Time) (struct{}, error) {
			close(entered)
			<-busy
			return struct{}{}, nil
		})
	}()
	<-entered
	if _, err := signal(r, info.ID, run.ID, 1); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("write behind a busy actor: err = %v, want a timeout before it was taken", err)
	}
	close(busy)
	<-done
	sigs, err := runSignals(r, info.ID, run.ID)
	if err != nil || len(sigs) != 0 {
		t.Fatalf("after the abandoned write: %d signals, %v; want none", len(sigs), err)
	}
}

// TestClosingWithAHeldWriteWritesNothing: an actor stopped while a write
// waits for its records writes neither, and fails the write's Commit.
func TestClosingWithAHeldWriteWritesNothing(t *testing.T) {
	store := openStore(t, nil)
	r := New(Config{Store: store, Seed: 3, RequestTimeout: 5 * time.Second})
	info, run := createAgentWithRun(t, r)
	out, err := heldSignal(r, info.ID, run.ID, 1)
	if err != nil || out.Err != nil {
		t.Fatal(out, err)
	}
	r.Close()
	if err := out.Commit(persist.KV{Key: []byte("idem/r/closed"), Value: []byte("x")}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Commit after Close: %v, want ErrUnavailable", err)
	}
	rec, err := store.Load(info.ID)
	if err != nil {
		t.Fatal(err)
	}
	r2 := New(Config{Store: store, Seed: 4})
	defer r2.Close()
	sigs, err := runSignals(r2, info.ID, run.ID)
	if err != nil || len(sigs) != 0 {
		t.Fatalf("after reopening: %d signals (log tail %d), %v; want none", len(sigs), len(rec.Tail), err)
	}
	if _, err := store.Get([]byte("idem/r/closed")); !errors.Is(err, persist.ErrNotFound) {
		t.Fatalf("the record of an unwritten write was stored: %v", err)
	}
}

// TestExternalIDsReserveOnlyThemselves: a creation claiming an external id
// waits only for another creation of the same id, and then finds it taken;
// creations of other ids go ahead meanwhile.
func TestExternalIDsReserveOnlyThemselves(t *testing.T) {
	r := newRegistry(t, openStore(t, nil), nil)
	a1, _ := createAgentWithRun(t, r)
	a2, _ := createAgentWithRun(t, r)
	held, err := r.CreateRun(a1, engine.CreateRun{ExternalID: "ticket-1"}, time.Time{}, true)
	if err != nil || held.Err != nil {
		t.Fatalf("held creation: %+v, %v", held, err)
	}
	if _, err := createRun(r, a2, engine.CreateRun{ExternalID: "ticket-2"}); err != nil {
		t.Fatalf("another id while ticket-1 is held: %v", err)
	}
	if _, err := answer(r.CreateAgent(engine.CreateAgent{Workspace: "default", Name: "x", ExternalID: "ticket-1"}, time.Time{}, false)); err != nil {
		t.Fatalf("an agent's external id is another namespace than a run's: %v", err)
	}
	same := make(chan error, 1)
	go func() { _, err := createRun(r, a2, engine.CreateRun{ExternalID: "ticket-1"}); same <- err }()
	select {
	case err := <-same:
		t.Fatalf("the same id was decided (%v) while its first creation was held", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := held.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-same; !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("the same id after the first committed: err = %v, want ErrConflict", err)
	}
}

// TestHeldWriteThatChangesNothingHoldsNoLaterWrite: a held write that
// decided no events (here a refusal) has nothing to keep in order with, so
// later writes of the agent become durable and are answered while it
// still waits for its Commit; and a Commit without records then needs no
// append, even with the disk stalled.
func TestHeldWriteThatChangesNothingHoldsNoLaterWrite(t *testing.T) {
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, nil)
	info, run := createAgentWithRun(t, r)

	out, err := heldSignal(r, info.ID, "run_unknown", 1)
	if err != nil || out.Err == nil {
		t.Fatalf("held signal to an unknown run = %+v, %v; want a refusal", out, err)
	}
	later := make(chan error, 1)
	go func() { _, err := signal(r, info.ID, run.ID, 2); later <- err }()
	select {
	case err := <-later:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a later write waited for a held write that changed nothing")
	}
	before := g.appends.Load()
	g.hold()
	defer g.release()
	committed := make(chan error, 1)
	go func() { committed <- out.Commit() }()
	select {
	case err := <-committed:
		if err != nil {
			t.Fatal(err)
		}
	case <-g.entered:
		t.Fatal("a Commit with nothing to write waited for an append")
	case <-time.After(5 * time.Second):
		t.Fatal("a Commit with nothing to write was not answered")
	}
	if n := g.appends.Load() - before; n != 0 {
		t.Fatalf("%d appends for a Commit with nothing to write; want none", n)
	}
}
