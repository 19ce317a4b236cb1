package api_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plaudit/plaudit/transport/api"
)

// scriptedRouter is a cluster node's Router that serves no agent itself:
// Forward gives the answers of forwards in turn, then the last one again.
type scriptedRouter struct {
	local    atomic.Bool // every agent is served here while set
	mu       sync.Mutex
	forwards []func() (api.Response, error)
	sent     int
}

func (r *scriptedRouter) Local(string) bool { return r.local.Load() }

func (r *scriptedRouter) Forward(*api.Request, string) (api.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.forwards[min(r.sent, len(r.forwards)-1)]
	r.sent++
	return f()
}

func (r *scriptedRouter) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sent
}

// A request forwarded to a node that does not serve its agent (still
// taking its partition, or it let it go) is answered at once as not
// served, and nothing is done: held until the node serves it, the sender
// could not tell, once the partition went elsewhere, whether it was done.
func TestAForwardedRequestThisNodeDoesNotServeIsAnsweredNotServed(t *testing.T) {
	router := &scriptedRouter{forwards: []func() (api.Response, error){func() (api.Response, error) {
		t.Error("a forwarded request was forwarded again")
		return api.Response{}, errors.New("forwarded again")
	}}}
	router.local.Store(true)
	h := newHarness(t, config{Router: router})
	c := h.client(adminKey)
	agent := str(t, c.must(201, "POST", "/api/v1/agents", `{"name": "bot"}`), "id")
	run := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{"version": "1"}`), "id")
	p, err := h.ten.AuthenticateKey(adminKey)
	if err != nil {
		t.Fatal(err)
	}
	forward := func(dedup string) api.Response {
		return h.svc.Handle(&api.Request{Op: api.RecordSignal, Principal: p, Forwarded: true,
			Target:   api.Target{Agent: agent},
			Body:     []byte(`{"kind": "human.rating", "value": 5, "run_id": "` + run + `", "dedup_key": "` + dedup + `"}`),
			Deadline: time.Now().Add(3 * time.Second), RequestID: "req_" + dedup})
	}
	router.local.Store(false)
	if resp := forward("elsewhere"); resp.Status != 503 || !resp.NotServed {
		t.Fatalf("forwarded request for an agent not served here: status %d, not served %v; want 503, not served",
			resp.Status, resp.NotServed)
	}
	router.local.Store(true)
	if resp := forward("here"); resp.Status != 201 || resp.NotServed {
		t.Fatalf("forwarded request for an agent served here: status %d, not served %v; want 201", resp.Status, resp.NotServed)
	}
	items := list(t, c.must(200, "GET", "/api/v1/agents/"+agent+"/runs/"+run+"/signals", ""), "items")
	if len(items) != 1 || at(t, items[0], "dedup_key") != "here" {
		t.Errorf("signals stored: %v, want only the one served here", items)
	}
	if router.count() != 0 {
		t.Errorf("forwarded again %d times", router.count())
	}
}

// The node a request arrives at sends it again, to the owner it sees then,
// while no node serves its agent (ErrNoOwner: between owners, or the node
// it reached answered not served), until one answers.
func TestARequestIsSentAgainUntilANodeServesIt(t *testing.T) {
	noOwner := func() (api.Response, error) { return api.Response{}, api.ErrNoOwner }
	router := &scriptedRouter{forwards: []func() (api.Response, error){noOwner, noOwner,
		func() (api.Response, error) { return api.Response{Status: 201, Body: []byte(`{}`)}, nil }}}
	h := newHarness(t, config{Router: router})
	agent := str(t, h.client(adminKey).must(201, "POST", "/api/v1/agents", `{"name": "bot"}`), "id")
	p, err := h.ten.AuthenticateKey(adminKey)
	if err != nil {
		t.Fatal(err)
	}
	resp := h.svc.Handle(&api.Request{Op: api.RecordSignal, Principal: p,
		Target: api.Target{Agent: agent}, Body: []byte(`{"kind": "human.rating", "value": 5}`),
		Deadline: time.Now().Add(time.Minute), RequestID: "req_1"})
	if resp.Status != 201 || router.count() != 3 {
		t.Fatalf("status %d after %d forwards, want 201 after 3", resp.Status, router.count())
	}
	if resp.NotServed {
		t.Error("the answer the client gets is marked not served")
	}
}
