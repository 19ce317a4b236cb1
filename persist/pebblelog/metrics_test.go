package pebblelog

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/plaudit/plaudit/persist"
)

// Every commit is counted by its kind; only the synced ones are timed.
func TestCommitsAreCountedAndOnlySyncedOnesTimed(t *testing.T) {
	s := openTemp(t)
	must(t, s.Put(persist.KV{Key: []byte("k"), Value: []byte("v")}))
	must(t, s.PutUnsynced(persist.KV{Key: []byte("m"), Value: []byte("v")}))
	must(t, s.DeleteRangeUnsynced([]byte("m"), []byte("n")))
	var c, h dto.Metric
	if err := s.metrics.commits[commitDirectory].Write(&c); err != nil {
		t.Fatal(err)
	}
	if got := c.GetCounter().GetValue(); got != 3 {
		t.Errorf("directory commits counted: %v, want 3", got)
	}
	if err := s.metrics.latency.Write(&h); err != nil {
		t.Fatal(err)
	}
	if got := h.GetHistogram().GetSampleCount(); got != 1 {
		t.Errorf("commits timed: %d, want 1 (the synced one)", got)
	}
}
