package actors

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/persist/pebblelog"
)

// Selections no request waits for wait to be appended (see
// agentActor.maybeAppend). These tests crash a copy of a strict
// in-memory filesystem, which keeps only what was synced, to see which runs
// a crash would leave.

// durableRuns counts the runs of ids that a crash now would leave.
func durableRuns(t *testing.T, fs *vfs.MemFS, agentID string, ids []string) int {
	t.Helper()
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	store, err := pebblelog.Open("db", pebblelog.Options{FS: clone})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	r := New(Config{Store: store, Seed: 9})
	defer r.Close()
	n, err := Read(r, agentID, time.Time{}, func(a *engine.Agent, _ time.Time) (int, error) {
		n := 0
		for _, id := range ids {
			if _, err := a.Run(id); err == nil {
				n++
			}
		}
		return n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// selections creates n runs on info's agent, one after another.
func selections(t *testing.T, r *Registry, info engine.AgentInfo, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		cr, err := createRun(r, info, engine.CreateRun{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, cr.Run.ID)
	}
	return ids
}

// TestSelectionsAloneAreSyncedWithinTheirWindow: with no request after
// them, selections become durable on their own, within the window.
func TestSelectionsAloneAreSyncedWithinTheirWindow(t *testing.T) {
	fs := vfs.NewCrashableMem()
	r := newRegistry(t, openStore(t, fs), func(c *Config) { c.SelectSyncWindow = 20 * time.Millisecond })
	info, _ := createAgentWithRun(t, r)
	ids := selections(t, r, info, 20)
	waitFor(t, func() bool { return durableRuns(t, fs, info.ID, ids) == len(ids) })
}

// TestWhatWaitsForDurabilityWaitsForTheSelectionsBeforeIt: a read or a
// write answered after selections is answered only once they are durable,
// however long their window.
func TestWhatWaitsForDurabilityWaitsForTheSelectionsBeforeIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		ask  func(r *Registry, info engine.AgentInfo, run engine.Run) error
	}{
		{"a read", func(r *Registry, info engine.AgentInfo, _ engine.Run) error {
			_, err := Read(r, info.ID, time.Time{}, func(*engine.Agent, time.Time) (struct{}, error) { return struct{}{}, nil })
			return err
		}},
		{"a signal", func(r *Registry, info engine.AgentInfo, run engine.Run) error {
			_, err := signal(r, info.ID, run.ID, 1)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			r := newRegistry(t, openStore(t, fs), func(c *Config) { c.SelectSyncWindow = time.Hour })
			info, run := createAgentWithRun(t, r)
			ids := selections(t, r, info, 20)
			time.Sleep(20 * time.Millisecond)
			if n := durableRuns(t, fs, info.ID, ids); n == len(ids) {
				t.Fatal("every selection was synced with nothing waiting for it: they did not wait")
			}
			if err := tc.ask(r, info, run); err != nil {
				t.Fatal(err)
			}
			if n := durableRuns(t, fs, info.ID, ids); n != len(ids) {
				t.Fatalf("%s answered while %d of %d selections before it were not durable", tc.name, len(ids)-n, len(ids))
			}
		})
	}
}

// TestCloseSyncsWaitingSelections: a clean shutdown leaves every selection
// durable.
func TestCloseSyncsWaitingSelections(t *testing.T) {
	fs := vfs.NewCrashableMem()
	store := openStore(t, fs)
	r := New(Config{Store: store, Seed: 7, SelectSyncWindow: time.Hour})
	info, _ := createAgentWithRun(t, r)
	ids := selections(t, r, info, 20)
	r.Close()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	if n := durableRuns(t, fs, info.ID, ids); n != len(ids) {
		t.Fatalf("%d of %d selections lost after a clean shutdown", len(ids)-n, len(ids))
	}
}

// TestSelectionsThatKeepComingDoNotDelayTheOldest: the window runs from
// the oldest selection waiting, so a stream of them, each sooner than the
// window after the last, still leaves the first durable within it.
func TestSelectionsThatKeepComingDoNotDelayTheOldest(t *testing.T) {
	fs := vfs.NewCrashableMem()
	r := newRegistry(t, openStore(t, fs), func(c *Config) { c.SelectSyncWindow = 30 * time.Millisecond })
	info, _ := createAgentWithRun(t, r)
	first := selections(t, r, info, 1)
	deadline := time.Now().Add(3 * time.Second)
	for i := 1; durableRuns(t, fs, info.ID, first) == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("the first selection is not durable after %d more, each within 2 ms of the last", i)
		}
		selections(t, r, info, 1)
		time.Sleep(2 * time.Millisecond)
	}
}

// TestANegativeWindowIsKept: a negative window (a cluster node's) means
// selections are appended at once, not the default window.
func TestANegativeWindowIsKept(t *testing.T) {
	for _, tc := range []struct{ set, want time.Duration }{
		{0, 5 * time.Millisecond},
		{-1, -1},
		{time.Second, time.Second},
	} {
		c := Config{SelectSyncWindow: tc.set}
		c.defaults()
		if c.SelectSyncWindow != tc.want {
			t.Errorf("SelectSyncWindow %v after defaults: %v, want %v", tc.set, c.SelectSyncWindow, tc.want)
		}
	}
}
