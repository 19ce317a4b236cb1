package transport

import (
	"errors"
	"testing"
	"time"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/persist/pebblelog"
	"github.com/plaudit/plaudit/transport/auth"
)

func newTestHTTP(t *testing.T) *HTTP {
	t.Helper()
	store, err := pebblelog.Open(t.TempDir(), pebblelog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	reg := actors.New(actors.Config{Store: store})
	t.Cleanup(reg.Close)
	ten, _, err := auth.Open(store, "k", time.Now)
	if err != nil {
		t.Fatal(err)
	}
	h := NewHTTP(HTTPConfig{}, reg, ten)
	t.Cleanup(func() { _ = h.Shutdown() })
	return h
}

// TestIdempotencyKeyInProgress: while a key's first request runs, another
// request with it is 409 idempotency_in_progress; once the first has
// finished, the same request replays its answer.
func TestIdempotencyKeyInProgress(t *testing.T) {
	h := newTestHTTP(t)
	p, _ := h.tenancy.Authenticate("Bearer k")
	first := &call{h: h, p: p, body: []byte(`{"a":1}`), reqID: "req_1"}
	if rec, err := h.replayOrReserve(first, "POST /x", "key-1"); rec != nil || err != nil {
		t.Fatalf("first reserve = %v, %v", rec, err)
	}
	second := &call{h: h, p: p, body: []byte(`{"a":1}`), reqID: "req_2"}
	if _, err := h.replayOrReserve(second, "POST /x", "key-1"); !errors.Is(err, ErrIdempotencyBusy) {
		t.Fatalf("second while the first runs: err = %v, want ErrIdempotencyBusy", err)
	}
	h.finish(first, result{status: 201, body: []byte(`{"ok":true}`)}, nil)
	third := &call{h: h, p: p, body: []byte(`{"a":1}`), reqID: "req_3"}
	rec, err := h.replayOrReserve(third, "POST /x", "key-1")
	if err != nil || rec == nil || rec.status != 201 || string(rec.body) != `{"ok":true}` || rec.reqID != "req_1" {
		t.Fatalf("after the first finished: %+v, %v", rec, err)
	}
	other := &call{h: h, p: p, body: []byte(`{"a":2}`), reqID: "req_4"}
	if _, err := h.replayOrReserve(other, "POST /x", "key-1"); !errors.Is(err, ErrIdempotencyKeyReused) {
		t.Fatalf("another body: err = %v, want ErrIdempotencyKeyReused", err)
	}
}

// TestAbandonedReservationGoesStale: a key left reserved by a write that
// timed out frees itself after staleReservation, and not before.
func TestAbandonedReservationGoesStale(t *testing.T) {
	h := newTestHTTP(t)
	p, _ := h.tenancy.Authenticate("Bearer k")
	c := &call{h: h, p: p, body: []byte(`{}`)}
	if _, err := h.replayOrReserve(c, "POST /y", "key-2"); err != nil {
		t.Fatal(err)
	}
	k := string(c.idem.key)
	if _, err := h.replayOrReserve(&call{h: h, p: p, body: []byte(`{}`)}, "POST /y", "key-2"); !errors.Is(err, ErrIdempotencyBusy) {
		t.Fatalf("fresh reservation: err = %v, want busy", err)
	}
	h.idem.running.Store(k, time.Now().Add(-staleReservation-time.Second))
	if rec, err := h.replayOrReserve(&call{h: h, p: p, body: []byte(`{}`)}, "POST /y", "key-2"); rec != nil || err != nil {
		t.Fatalf("stale reservation not taken over: %v, %v", rec, err)
	}
}
