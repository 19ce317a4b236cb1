package actors

import (
	"runtime"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/plaudit/plaudit/engine"
)

// TestIdleAgentMemory: a live agent that holds nothing costs a few
// kilobytes of heap, not a mailbox of MailboxLimit slots (52 KB an agent
// with protoactor's bounded mailbox).
func TestIdleAgentMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("creates thousands of agents")
	}
	const agents = 2000
	r := newRegistry(t, openStore(t, vfs.NewMem()), nil)
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	before := heap()
	for range agents {
		info, err := answer(r.CreateAgent(engine.CreateAgent{Workspace: "default", Name: "idle"}, time.Time{}, false))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Read(r, info.ID, time.Time{}, func(*engine.Agent, time.Time) (struct{}, error) { return struct{}{}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	// Signed: what earlier tests left behind may be freed meanwhile.
	per := (heap() - before) / agents
	t.Logf("%d B of heap per idle agent", per)
	if per > 8<<10 {
		t.Fatalf("%d B of heap per idle agent, want at most 8 KiB", per)
	}
}
