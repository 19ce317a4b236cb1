package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist"
)

// TestAgentsAreFoundByExternalID: an agent created with an external id is
// found by it; a second agent claiming it is ErrConflict; an agent without
// one claims none (not even the empty one).
func TestAgentsAreFoundByExternalID(t *testing.T) {
	r := newRegistry(t, openStore(t, nil), nil)
	mk := func(ext string) (engine.AgentInfo, error) {
		return answer(r.CreateAgent(engine.CreateAgent{Workspace: "default", Name: "support", ExternalID: ext}, time.Time{}, false))
	}
	info, err := mk("crm-1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Agent("default", "external_id:crm-1"); err != nil || got.ID != info.ID {
		t.Fatalf("Agent(external_id:crm-1) = %+v, %v; want %s", got, err, info.ID)
	}
	if _, err := mk("crm-1"); !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("a second agent with external id crm-1: %v; want ErrConflict", err)
	}
	for range 2 {
		if _, err := mk(""); err != nil {
			t.Fatalf("agents without an external id: %v", err)
		}
	}
	if _, err := r.Agent("default", "external_id:"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Agent(external_id:) = %v; want ErrNotFound", err)
	}
}

// TestDamagedAgentRecordStaysAnError: a directory record that does not
// decode is an error every time it is read, never a cached empty agent.
func TestDamagedAgentRecordStaysAnError(t *testing.T) {
	store := openStore(t, nil)
	r := newRegistry(t, store, nil)
	if err := store.Put(persist.KV{Key: agentKey("default", "agt_bad"), Value: []byte("not an event")}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if info, err := r.Agent("default", "agt_bad"); err == nil {
			t.Fatalf("read %d of a damaged agent record = %+v, nil; want an error", i+1, info)
		}
	}
}

// TestRunExternalIDNotFoundThenFound: looking up an external id before its
// run exists is ErrNotFound, and does not stop the run being found once it
// is created.
func TestRunExternalIDNotFoundThenFound(t *testing.T) {
	r := newRegistry(t, openStore(t, nil), nil)
	info, _ := createAgentWithRun(t, r)
	if _, _, err := r.Run("default", "external_id:ticket-9"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("Run before creation: %v; want ErrNotFound", err)
	}
	cr, err := createRun(r, info, engine.CreateRun{ExternalID: "ticket-9"})
	if err != nil {
		t.Fatal(err)
	}
	if id, owner, err := r.Run("default", "external_id:ticket-9"); err != nil || id != cr.Run.ID || owner.ID != info.ID {
		t.Fatalf("Run after creation = %s, %s, %v; want %s of %s", id, owner.ID, err, cr.Run.ID, info.ID)
	}
}

// TestConfigDefaults: zero or negative durations and sizes take their
// defaults; set ones are kept.
func TestConfigDefaults(t *testing.T) {
	var zero Config
	zero.defaults()
	if zero.SnapshotEvery != 10000 || zero.SnapshotInterval != time.Minute || zero.IdleTimeout != 5*time.Minute ||
		zero.MailboxLimit != 1024 || zero.RequestTimeout <= 0 || zero.Now == nil || zero.Logger == nil {
		t.Fatalf("defaults = %+v", zero)
	}
	neg := Config{SnapshotEvery: -1, SnapshotInterval: -1, IdleTimeout: -1, MailboxLimit: -1, RequestTimeout: -1}
	neg.defaults()
	if neg.SnapshotEvery != zero.SnapshotEvery || neg.SnapshotInterval != zero.SnapshotInterval || neg.IdleTimeout != zero.IdleTimeout ||
		neg.MailboxLimit != zero.MailboxLimit || neg.RequestTimeout != zero.RequestTimeout {
		t.Fatalf("negative values = %+v; want the defaults", neg)
	}
	set := Config{SnapshotEvery: 5, SnapshotInterval: time.Second, IdleTimeout: time.Hour, MailboxLimit: 3, RequestTimeout: time.Second}
	set.defaults()
	if set.SnapshotEvery != 5 || set.SnapshotInterval != time.Second || set.IdleTimeout != time.Hour || set.MailboxLimit != 3 || set.RequestTimeout != time.Second {
		t.Fatalf("set values = %+v", set)
	}
}

// TestSeedMakesRandomnessReproducible: two registries with the same seed
// give their actors the same random streams, one stream per actor.
func TestSeedMakesRandomnessReproducible(t *testing.T) {
	a := newRegistry(t, openStore(t, nil), nil)
	b := newRegistry(t, openStore(t, nil), nil)
	x1, x2 := a.newRand(), a.newRand()
	y1, y2 := b.newRand(), b.newRand()
	for range 4 {
		v1, v2, w1, w2 := x1.Uint64(), x2.Uint64(), y1.Uint64(), y2.Uint64()
		if v1 != w1 || v2 != w2 || v1 == v2 {
			t.Fatalf("streams %x %x and %x %x: want the same pairs, two streams apart", v1, v2, w1, w2)
		}
	}
}

// TestAgentLookupOnceKeptAllocatesNothing: every request resolves its
// agent; once found, an agent's info is read from the registry's cache
// without an allocation, and is the agent's.
func TestAgentLookupOnceKeptAllocatesNothing(t *testing.T) {
	r := newRegistry(t, openStore(t, nil), nil)
	info, err := answer(r.CreateAgent(engine.CreateAgent{Workspace: "default", Name: "support"}, time.Time{}, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Agent("default", info.ID); err != nil {
		t.Fatal(err)
	}
	var got engine.AgentInfo
	allocs := testing.AllocsPerRun(100, func() { got, err = r.Agent("default", info.ID) })
	if err != nil || got.ID != info.ID || got.Name != "support" {
		t.Fatalf("Agent = %+v, %v; want %s", got, err, info.ID)
	}
	if allocs != 0 {
		t.Fatalf("a kept agent's lookup allocated %v times; want 0", allocs)
	}
	if _, err := r.Agent("other", info.ID); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("the agent from another workspace: %v; want ErrNotFound", err)
	}
}
