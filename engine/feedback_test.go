package engine

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/id"
)

// Every feedback record reads back exactly as it was added, the odd ones
// (which a record cannot hold and the side table does) included.
func TestFeedbackLogReadsBackWhatWasAdded(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 123456789, time.UTC)
	plus, minus := 0.75, -1.0
	var runs SignalLog
	runs.addRun("run_a")
	runs.addRun("run_b")
	good := id.New(id.Feedback, now, rand.New(rand.NewPCG(1, 2)))
	cases := []struct {
		name string
		fb   Feedback
		run  int
	}{
		{"plain", Feedback{ID: good, RunID: "run_a", VariationID: "var_1", Score: &plus, CreatedAt: now}, 0},
		{"no score", Feedback{ID: good, RunID: "run_b", VariationID: "var_2", CreatedAt: now}, 1},
		{"negative, with profile", Feedback{ID: good, RunID: "run_a", Score: &minus, ProfileID: "prf_x", CreatedAt: now}, 0},
		{"comment, external id, labels", Feedback{ID: good, RunID: "run_a", Comment: "fine", ExternalID: "ext-1",
			Labels: map[string]string{"team": "a"}, CreatedAt: now}, 0},
		{"an id not made here", Feedback{ID: "fb_custom", RunID: "run_a", CreatedAt: now}, 0},
		{"no id", Feedback{RunID: "run_a", CreatedAt: now}, 0},
		{"a run the agent does not know", Feedback{ID: good, RunID: "run_gone", CreatedAt: now}, -1},
		{"no time", Feedback{ID: good, RunID: "run_b"}, 1},
		{"after 2262", Feedback{ID: good, RunID: "run_b", CreatedAt: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}, 1},
		{"not in UTC", Feedback{ID: good, RunID: "run_b", CreatedAt: now.In(time.FixedZone("X", 3600))}, 1},
	}
	var l feedbackLog
	for _, tc := range cases {
		l.add(tc.fb, tc.run, &runs)
	}
	v := l.view()
	l.add(Feedback{ID: good, RunID: "run_a", CreatedAt: now}, 0, &runs) // not in the view
	if v.Len() != len(cases) || l.Len() != len(cases)+1 {
		t.Fatalf("lengths: view %d, log %d, want %d and %d", v.Len(), l.Len(), len(cases), len(cases)+1)
	}
	for i, tc := range cases {
		for name, log := range map[string]*feedbackLog{"log": &l, "view": &v} {
			if got := log.at(i, &runs); !reflect.DeepEqual(got, tc.fb) {
				t.Errorf("%s: %s reads back %+v, want %+v", tc.name, name, got, tc.fb)
			}
			var fromRecord, fromValue writer
			fromRecord.feedbackAt(log, i, &runs)
			fromValue.feedback(log.at(i, &runs))
			if !bytes.Equal(fromRecord, fromValue) {
				t.Errorf("%s: %s encodes from its record as %x, from its value as %x", tc.name, name, fromRecord, fromValue)
			}
			if got := log.ofRun(i, tc.run, tc.fb.RunID); !got {
				t.Errorf("%s: %s: not of its own run", tc.name, name)
			}
			if other := "run_other"; log.ofRun(i, -1, other) {
				t.Errorf("%s: %s: of run %s", tc.name, name, other)
			}
		}
	}
}

func TestFeedbackLogRefusesAMisnumberedRun(t *testing.T) {
	var runs SignalLog
	runs.addRun("run_a")
	defer func() {
		if recover() == nil {
			t.Fatal("a feedback record numbered with another run's number was added")
		}
	}()
	var l feedbackLog
	l.add(Feedback{RunID: "run_b"}, 0, &runs)
}

// TestFeedbackMemoryBudget holds the layout to its figure: a feedback record
// and the signal it appends to its run in at most 200 heap bytes (a
// Feedback per record took 260).
func TestFeedbackMemoryBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100k feedback records")
	}
	if got := heapFeedback(t, 100_000, 1_000); got > 200 {
		t.Fatalf("%.0f heap bytes per feedback record, want at most 200", got)
	}
}
