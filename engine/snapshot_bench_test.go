package engine

import "testing"

// BenchmarkSnapshotView takes the view a snapshot is encoded from, which
// the agent's actor takes in its own turn (serving nothing else
// meanwhile), over 300,000 runs of 10 signals each.
func BenchmarkSnapshotView(b *testing.B) {
	a, _ := benchHistory(b, 300000)
	for b.Loop() {
		_ = a.Snapshot()
	}
}
