package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkSnapshotView takes the view a snapshot is encoded from, which
// the agent's actor takes in its own turn (serving nothing else
// meanwhile), over 300,000 runs of 10 signals each.
func BenchmarkSnapshotView(b *testing.B) {
	a, _ := benchHistory(b, 300000)
	for b.Loop() {
		_ = a.Snapshot()
	}
}

// BenchmarkSnapshotViewReports is BenchmarkSnapshotView of a reporting
// agent: one run, 150,000 standing reports, each on a turn of its own, as
// the keyed report row of the harness leaves it.
func BenchmarkSnapshotViewReports(b *testing.B) {
	a := NewAgent()
	rnd := rand.New(rand.NewPCG(1, 2))
	if _, _, err := a.CreateAgent(CreateAgent{ID: "agt_1", Workspace: "default", Name: "bench"}, t0); err != nil {
		b.Fatal(err)
	}
	cr, _, err := a.CreateRun(CreateRun{}, t0, rnd)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 150_000 {
		_, _, err := a.ReportReward(ReportReward{RunID: cr.Run.ID, Kind: ReportExternal, Scorer: "ci.tests",
			TurnID: fmt.Sprint("turn-", i), Value: ptr(0.5), Weight: 1, Started: uint64(i + 1)}, t0, rnd)
		if err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		_ = a.Snapshot()
	}
}
