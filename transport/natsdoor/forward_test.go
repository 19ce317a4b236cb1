package natsdoor

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/plaudit/plaudit/internal/jstest"
	"github.com/plaudit/plaudit/transport/api"
)

// A node that stops answering (paused, cut off) while its partition moves
// on must not hold a forwarded request until its deadline; a node that
// answers slowly but keeps its partition must be waited for.
func TestAForwardedRequestEndsWhenItsOwnerLosesThePartition(t *testing.T) {
	for _, tc := range []struct {
		name      string
		answer    bool // b answers, after a while
		moveAfter time.Duration
		wantErr   string
	}{
		{name: "owner paused, partition moved", moveAfter: 300 * time.Millisecond, wantErr: "lost the agent's partition"},
		{name: "owner slow, partition kept", answer: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := jstest.Server(t)
			sub, err := nc.Subscribe(ForwardSubject("b"), func(m *nats.Msg) {
				if tc.answer {
					time.Sleep(8 * ownerPoll)
					_ = m.Respond([]byte(`{"status": 201, "body": "e30="}`))
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = sub.Unsubscribe() }()
			var owner atomic.Value
			owner.Store("b")
			f := NewForwarder(nc, func(string) bool { return false }, func(string) string { return owner.Load().(string) }, nil)
			if tc.moveAfter > 0 {
				time.AfterFunc(tc.moveAfter, func() { owner.Store("c") })
			}
			resp, err := f.Forward(&api.Request{Deadline: time.Now().Add(20 * time.Second)}, "agt_1")
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.Is(err, nats.ErrTimeout) {
					t.Fatalf("Forward: %v, want an error saying %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("Forward: %v", err)
			case resp.Status != 201:
				t.Fatalf("Forward: status %d, want 201", resp.Status)
			}
		})
	}
}

// A node's answer that it does not serve the request's agent goes back as
// such, and Forward reports no owner (the caller sends it again), not an
// answer to pass on; the owners it was sent by are reported stale.
func TestANotServedAnswerIsNoOwner(t *testing.T) {
	nc := jstest.Server(t)
	sub, err := nc.Subscribe(ForwardSubject("b"), func(m *nats.Msg) {
		reply(m, api.Response{Status: 503, Body: []byte(`{}`), NotServed: true}, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	var stale atomic.Int32
	f := NewForwarder(nc, func(string) bool { return false }, func(string) string { return "b" }, func() { stale.Add(1) })
	if _, err := f.Forward(&api.Request{Deadline: time.Now().Add(20 * time.Second)}, "agt_1"); !errors.Is(err, api.ErrNoOwner) {
		t.Fatalf("Forward: %v, want ErrNoOwner", err)
	}
	if stale.Load() != 1 {
		t.Errorf("the owner's refusal told stale %d times, want once", stale.Load())
	}
}
