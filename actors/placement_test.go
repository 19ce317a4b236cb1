package actors

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist"
)

// evenLast serves the agents whose id ends in an even digit or letter byte:
// a stand-in for "this node owns the agent's partition".
func evenLast(agentID string) bool { return agentID[len(agentID)-1]%2 == 0 }

func TestAnAgentCreatedHereGetsAnIDThisNodeServes(t *testing.T) {
	r := newRegistry(t, openStore(t, nil), func(c *Config) { c.Serves = evenLast })
	for range 20 {
		info, err := answer(r.CreateAgent(engine.CreateAgent{Workspace: "default", Name: "a"}, time.Time{}, false))
		if err != nil {
			t.Fatal(err)
		}
		if !evenLast(info.ID) {
			t.Fatalf("agent %s created on a node that does not serve it", info.ID)
		}
	}
}

func TestANodeServingNoAgentCreatesNone(t *testing.T) {
	r := newRegistry(t, openStore(t, nil), func(c *Config) { c.Serves = func(string) bool { return false } })
	_, err := answer(r.CreateAgent(engine.CreateAgent{Workspace: "default", Name: "a"}, time.Time{}, false))
	if !errors.Is(err, persist.ErrMoved) {
		t.Fatalf("CreateAgent: %v, want ErrMoved", err)
	}
}

func TestAnAgentThisNodeStoppedServingIsEvictedAndRefused(t *testing.T) {
	store := openStore(t, nil)
	var moved atomic.Bool
	r := newRegistry(t, store, func(c *Config) {
		c.Serves = func(string) bool { return !moved.Load() }
	})
	info, run := createAgentWithRun(t, r)
	if _, err := signal(r, info.ID, run.ID, 1); err != nil {
		t.Fatal(err)
	}
	moved.Store(true)
	r.Evict(func(agentID string) bool { return agentID == info.ID })
	if n := r.Live(); n != 0 {
		t.Fatalf("%d actors live after the eviction", n)
	}
	if _, err := signal(r, info.ID, run.ID, 2); !errors.Is(err, persist.ErrMoved) {
		t.Fatalf("a signal for an agent this node no longer serves: %v, want ErrMoved", err)
	}
	// What the evicted actor wrote is durable: a node serving the agent
	// again recovers it.
	moved.Store(false)
	again, err := signal(r, info.ID, run.ID, 1)
	if err != nil || !again.Duplicate {
		t.Fatalf("the signal written before the eviction, sent again: %+v, %v; want a duplicate", again, err)
	}
}
