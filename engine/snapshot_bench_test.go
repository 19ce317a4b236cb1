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
	a := reportingAgent(b, 150_000)
	for b.Loop() {
		_ = a.Snapshot()
	}
}

// reportingAgent is an agent with one run and n standing reports, each on
// a turn of its own.
func reportingAgent(b *testing.B, n int) *Agent {
	a := NewAgent()
	rnd := rand.New(rand.NewPCG(1, 2))
	if _, _, err := a.CreateAgent(CreateAgent{ID: "agt_1", Workspace: "default", Name: "bench"}, t0); err != nil {
		b.Fatal(err)
	}
	cr, _, err := a.CreateRun(CreateRun{}, t0, rnd)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		_, _, err := a.ReportReward(ReportReward{RunID: cr.Run.ID, Kind: ReportExternal, Scorer: "ci.tests",
			TurnID: fmt.Sprint("turn-", i), Value: ptr(0.5), Weight: 1, Started: uint64(i + 1)}, t0, rnd)
		if err != nil {
			b.Fatal(err)
		}
	}
	return a
}

// BenchmarkAppendState encodes a snapshot of 30,000 runs of 10 signals
// each, the work a snapshot does off the actor before compressing.
func BenchmarkAppendState(b *testing.B) {
	a, _ := benchHistory(b, 30000)
	st := a.Snapshot()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendState(buf[:0], st)
	}
	b.ReportMetric(float64(len(buf))/float64(st.Signals.Len()), "B/signal")
}

// BenchmarkAppendStateReports is BenchmarkAppendState of the reporting
// agent of BenchmarkSnapshotViewReports.
func BenchmarkAppendStateReports(b *testing.B) {
	a := reportingAgent(b, 150_000)
	st := a.Snapshot()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendState(buf[:0], st)
	}
}

// BenchmarkDecodeRestore rebuilds the agent of BenchmarkAppendState from
// its encoded snapshot, the engine's part of a recovery.
func BenchmarkDecodeRestore(b *testing.B) {
	a, _ := benchHistory(b, 30000)
	buf := AppendState(nil, a.Snapshot())
	b.ReportAllocs()
	for b.Loop() {
		st, err := DecodeState(buf)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Restore(st); err != nil {
			b.Fatal(err)
		}
	}
}
