package actors

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine"
)

// TestExpiredRequestIsDroppedUnexecuted: a write still queued behind a busy
// actor when its deadline passes gets ErrExpired at the deadline, and is
// never applied.
func TestExpiredRequestIsDroppedUnexecuted(t *testing.T) {
	r := newRegistry(t, openStore(t, nil), nil)
	info, run := createAgentWithRun(t, r)
	gate := make(chan struct{})
	busy := make(chan error, 1)
	go func() {
		_, err := Read(r, info.ID, time.Time{}, func(*engine.Agent, time.Time) (struct{}, error) {
			<-gate
			return struct{}{}, nil
		})
		busy <- err
	}()
	time.Sleep(20 * time.Millisecond) // the actor is inside the gated read

	start := time.Now()
	_, err := answer(Write(r, info.ID, start.Add(50*time.Millisecond), false,
		func(a *engine.Agent, now time.Time, rnd *rand.Rand) (engine.SignalResult, []engine.Event, error) {
			return a.RecordSignal(engine.RecordSignal{Kind: "late", Value: 1, RunID: run.ID}, now, rnd)
		}))
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("write queued past its deadline: %v, want ErrExpired", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the caller waited %v, not until its deadline", waited)
	}
	close(gate)
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	sigs, err := runSignals(r, info.ID, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sigs {
		if s.Kind == "late" {
			t.Fatal("the expired write was applied")
		}
	}
}

// TestOverloadAnswersWithinTheDeadline overloads one agent with reads that
// each take a millisecond of its time, from far more callers than it can
// serve within the deadline: every request is answered or expired, and the
// answered ones' latencies are logged (p50, p99, max) beside the deadline.
func TestOverloadAnswersWithinTheDeadline(t *testing.T) {
	if testing.Short() {
		t.Skip("overload run")
	}
	const (
		callers  = 200
		deadline = 50 * time.Millisecond
		runFor   = time.Second
	)
	r := newRegistry(t, openStore(t, nil), func(c *Config) { c.MailboxLimit = 4 * callers })
	info, _ := createAgentWithRun(t, r)
	var (
		mu       sync.Mutex
		answered []time.Duration
		expired  int
	)
	stop := time.Now().Add(runFor)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for time.Now().Before(stop) {
				start := time.Now()
				_, err := Read(r, info.ID, start.Add(deadline), func(*engine.Agent, time.Time) (struct{}, error) {
					time.Sleep(time.Millisecond) // an expensive read
					return struct{}{}, nil
				})
				took := time.Since(start)
				mu.Lock()
				switch {
				case err == nil:
					answered = append(answered, took)
				case errors.Is(err, ErrExpired):
					expired++
				default:
					mu.Unlock()
					t.Errorf("read under overload: %v", err)
					return
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(answered) == 0 || expired == 0 {
		t.Fatalf("%d answered, %d expired: the agent was not overloaded", len(answered), expired)
	}
	slices.Sort(answered)
	q := func(p float64) time.Duration { return answered[int(p*float64(len(answered)-1))] }
	t.Logf("deadline %v, %d callers: %d answered (p50 %v, p99 %v, max %v), %d expired",
		deadline, callers, len(answered), q(0.5), q(0.99), answered[len(answered)-1], expired)
}

// TestTakenWriteIsWaitedForUntilTheTimeout: a write the actor has taken
// before its deadline is not abandoned at the deadline (it may land): its
// caller waits for it up to RequestTimeout in all, and only then answers
// ErrUnknownOutcome.
func TestTakenWriteIsWaitedForUntilTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	g := &gatedStore{Store: openStore(t, nil)}
	r := newRegistry(t, g, func(c *Config) { c.RequestTimeout = timeout })
	info, run := createAgentWithRun(t, r)
	g.hold()
	defer g.release()
	start := time.Now()
	_, err := answer(Write(r, info.ID, start.Add(50*time.Millisecond), false,
		func(a *engine.Agent, now time.Time, rnd *rand.Rand) (engine.SignalResult, []engine.Event, error) {
			return a.RecordSignal(engine.RecordSignal{Kind: "k", Value: 1, RunID: run.ID}, now, rnd)
		}))
	if !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("a taken write whose append stalls: %v; want ErrUnknownOutcome", err)
	}
	// Timers never fire early, so this bound cannot flake.
	if waited := time.Since(start); waited < timeout {
		t.Fatalf("the caller gave up after %v, before the request timeout %v", waited, timeout)
	}
}
