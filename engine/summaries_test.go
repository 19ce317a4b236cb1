package engine

import (
	"reflect"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// TestVersionSummaryReadAgainIsWhatAFreshReadGives reads summaries of one
// agent as its state and the clock move, each beside the same read of a
// copy restored from its snapshot, which has never summarised anything.
func TestVersionSummaryReadAgainIsWhatAFreshReadGives(t *testing.T) {
	h := newHarness(t)
	def, err := objective.Parse([]byte(`{"horizon_s":60,"terms":[{"signal":"human.rating","weight":1,"scale":[1,5]}]}`), "definition")
	if err != nil {
		t.Fatal(err)
	}
	h.must(PutObjective{Definition: def})
	r1 := h.run(CreateRun{Version: "3"})
	h.signal(RecordSignal{Kind: "human.rating", Value: 4, RunID: r1.ID})
	h.must(FinishRun{RunID: r1.ID, Succeeded: true}) // matures at t0 + 60 s
	h.run(CreateRun{Version: "4"})

	type read struct {
		version   string
		objective int
		limit     int
		at        time.Duration // after t0
	}
	check := func(step string, reads ...read) {
		t.Helper()
		fresh, err := Restore(h.a.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reads {
			now := t0.Add(r.at)
			got, err := h.a.VersionRewards(r.version, r.objective, r.limit, now)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := fresh.VersionRewards(r.version, r.objective, r.limit, now)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: %+v read %+v, a fresh read %+v", step, r, got, want)
			}
		}
		if n := len(h.a.summaries.entries); n > summaryCacheSize {
			t.Fatalf("%s: %d summaries kept, at most %d", step, n, summaryCacheSize)
		}
	}
	check("before maturity", read{"3", -1, 20, 10 * time.Second}, read{"3", -1, 20, 20 * time.Second})
	check("the horizon passes", read{"3", -1, 20, 60 * time.Second}, read{"3", -1, 20, 61 * time.Second})
	check("the clock goes back", read{"3", -1, 20, 59 * time.Second})
	check("other keys", read{"3", 0, 20, 61 * time.Second}, read{"3", 1, 20, 61 * time.Second},
		read{"3", -1, 1, 61 * time.Second}, read{"4", -1, 20, 61 * time.Second}, read{"5", -1, 20, 61 * time.Second},
		read{"3", -1, 20, 61 * time.Second})

	h.signal(RecordSignal{Kind: "human.rating", Value: 2, RunID: r1.ID})
	check("a signal lands", read{"3", -1, 20, 61 * time.Second}, read{"3", -1, 1, 61 * time.Second})
	h.must(PutObjective{Definition: objective.Default()})
	check("a new objective", read{"3", -1, 20, 61 * time.Second}, read{"3", 1, 20, 61 * time.Second})
	r3 := h.run(CreateRun{Version: "3"})
	check("a new run", read{"3", -1, 20, 61 * time.Second})
	h.must(FinishRun{RunID: r3.ID, Succeeded: false})
	check("it finishes", read{"3", -1, 20, 61 * time.Second}, read{"3", -1, 20, 2 * time.Hour})
}
