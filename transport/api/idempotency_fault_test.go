package api_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/plaudit/plaudit/persist"
)

// faultStore is the real store the agent actors write through, with its
// appends held at a gate or failed on command: what a slow or failing disk
// does to a keyed write.
type faultStore struct {
	persist.Store
	mu      sync.Mutex
	gate    chan struct{} // nil: appends pass
	entered chan struct{} // an append reached the closed gate
	failN   int           // this many more appends fail
}

func (s *faultStore) wrap(st persist.Store) persist.Store { s.Store = st; return s }

func (s *faultStore) Append(b persist.Batch) error {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		s.entered <- struct{}{}
		<-gate
	}
	s.mu.Lock()
	fail := s.failN > 0
	if fail {
		s.failN--
	}
	s.mu.Unlock()
	if fail {
		return errors.New("disk gone")
	}
	return s.Store.Append(b)
}

func (s *faultStore) hold() {
	s.mu.Lock()
	s.gate, s.entered = make(chan struct{}), make(chan struct{}, 64)
	s.mu.Unlock()
}

func (s *faultStore) release() {
	s.mu.Lock()
	close(s.gate)
	s.gate = nil
	s.mu.Unlock()
}

func (s *faultStore) failNext(n int) {
	s.mu.Lock()
	s.failN = n
	s.mu.Unlock()
}

// keyedSignal is a POST /signals under an Idempotency-Key, and a count of
// the signals it wrote.
type keyedSignal struct {
	f    *idemFixture
	path string
	run  string
	body string
}

func newKeyedSignal(t *testing.T, f *idemFixture) keyedSignal {
	run := f.run(t, `{}`)
	k := keyedSignal{f: f, path: "/api/v1/agents/" + f.agent + "/signals", run: run,
		body: fmt.Sprintf(`{"kind": "idem.signal", "value": 1, "run_id": %q}`, run)}
	// Creating a run answers before its append (selection's exception); a
	// read waits for it, so a fault armed next meets the keyed write, not
	// the run's creation.
	k.count(t)
	return k
}

// send sends the write under key. A replay repeats the first answer's
// X-Request-Id, so this does not insist on a fresh one.
func (k keyedSignal) send(t *testing.T, key string) response {
	t.Helper()
	r, err := k.f.c.rawSend("POST", k.path, k.body, withKey(key))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (k keyedSignal) count(t *testing.T) int {
	t.Helper()
	path := "/api/v1/agents/" + k.f.agent + "/runs/" + k.run + "/signals"
	n := 0
	for _, it := range list(t, k.f.c.on(t).must(200, "GET", path, ""), "items") {
		if it.(map[string]any)["kind"] == "idem.signal" {
			n++
		}
	}
	return n
}

// TestKeyedWriteWhoseAppendFailsIsRetriable: a keyed write whose append
// fails is answered 503, never with the success it rendered, and the 503
// is not recorded: the retry under the same key runs and writes once.
func TestKeyedWriteWhoseAppendFailsIsRetriable(t *testing.T) {
	fs := &faultStore{}
	f := newIdemFixture(t, config{ActorStore: fs.wrap})
	op := newKeyedSignal(t, f)

	fs.failNext(1)
	if first := op.send(t, "disk"); first.status != 503 {
		t.Fatalf("keyed write whose append failed: status %d, want 503; body %s", first.status, first.body)
	}
	if n := op.count(t); n != 0 {
		t.Fatalf("%d signals after the failed append, want 0", n)
	}
	if again := op.send(t, "disk"); again.status != 201 {
		t.Fatalf("retry after a 503: status %d, want 201 (a 503 must not be replayed); body %s", again.status, again.body)
	}
	if n := op.count(t); n != 1 {
		t.Fatalf("%d signals after the retry, want 1", n)
	}
}

// TestKeyedWriteThatTimedOutKeepsItsKey: a keyed write answered 503
// because its append outlived the request timeout may still land, record
// and all; until it does, a retry under its key is 409
// idempotency_in_progress rather than a second write, and once it has
// landed the retry replays its answer.
func TestKeyedWriteThatTimedOutKeepsItsKey(t *testing.T) {
	fs := &faultStore{}
	f := newIdemFixture(t, config{ActorStore: fs.wrap, RequestTimeout: 300 * time.Millisecond})
	op := newKeyedSignal(t, f)

	fs.hold()
	if first := op.send(t, "slow"); first.status != 503 {
		t.Fatalf("keyed write whose append is held past the timeout: status %d, want 503; body %s", first.status, first.body)
	}
	<-fs.entered // the write and its record wait at the gate
	busy := op.send(t, "slow")
	apiError(t, busy, 409, "idempotency_in_progress", "")
	if busy.header.Get("Retry-After") != "1" {
		t.Errorf("409 idempotency_in_progress with Retry-After %q, want 1: a retry in a second may find the answer", busy.header.Get("Retry-After"))
	}
	fs.release()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := op.send(t, "slow")
		if r.status == 201 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retry after the held write landed: status %d, want its recorded 201; body %s", r.status, r.body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := op.count(t); n != 1 {
		t.Fatalf("%d signals, want 1: the key was released while its write could still land", n)
	}
}
