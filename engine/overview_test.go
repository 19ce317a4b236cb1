package engine

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestOverview(t *testing.T) {
	h := newHarness(t)
	a := h.must(CreateVariation{Name: "a"}).(Variation)
	b := h.must(CreateVariation{Name: "b"}).(Variation)
	start := h.now
	// Runs an hour apart over ten days: run i is created at start + i h.
	var runs []Run
	for i := range 240 {
		h.now = start.Add(time.Duration(i) * time.Hour)
		c := CreateRun{Version: "1", VariationID: a.ID}
		if i%3 == 0 {
			c.VariationID = b.ID
		}
		if i >= 200 {
			c.Version = "2"
		}
		runs = append(runs, h.run(c))
	}
	for i, r := range runs[:10] {
		h.must(FinishRun{RunID: r.ID, Succeeded: true})
		h.signal(RecordSignal{Kind: "human.rating", Value: float64(i/5+1) / 2, RunID: r.ID})
	}
	score := 1.0
	h.must(RecordFeedback{RunID: runs[0].ID, Score: &score})
	now := h.now.Add(30 * time.Minute) // 239.5 h after the first run

	o := h.a.Overview(now, []time.Duration{24 * time.Hour, 7 * 24 * time.Hour}, 24, time.Hour, true)
	if o.Runs != 240 || o.Seq != h.a.LastSeq() || o.Feedback != 1 || o.ObjectiveVersion != 0 {
		t.Errorf("runs %d seq %d/%d feedback %d objective %d", o.Runs, o.Seq, h.a.LastSeq(), o.Feedback, o.ObjectiveVersion)
	}
	// Runs 216..239 were created within 24 h of now; 72..239 within 7 days.
	if !slices.Equal(o.RunsSince, []int{24, 168}) {
		t.Errorf("runs since = %v", o.RunsSince)
	}
	want := []VersionCount{{"1", 200}, {"2", 40}}
	if !slices.Equal(o.Versions, want) {
		t.Errorf("versions = %v", o.Versions)
	}
	// Later, once the finished runs have matured: the same figures as the
	// version summaries', summed over versions.
	later := now.Add(30 * 24 * time.Hour)
	mo := h.a.Overview(later, nil, 1, time.Hour, true)
	matured := 0
	for _, v := range want {
		s, err := h.a.VersionRewards(v.Version, -1, 0, later)
		if err != nil {
			t.Fatal(err)
		}
		matured += s.Matured
	}
	if o.Matured != 0 || o.Mean != nil {
		t.Errorf("matured %d mean %v before the horizon", o.Matured, o.Mean)
	}
	if mo.Matured != matured || mo.Matured != 10 {
		t.Errorf("matured %d, summaries say %d", mo.Matured, matured)
	}
	if cheap := h.a.Overview(later, nil, 1, time.Hour, false); cheap.Matured != 0 || cheap.Mean != nil || cheap.Runs != 240 {
		t.Errorf("without rewards: matured %d mean %v runs %d", cheap.Matured, cheap.Mean, cheap.Runs)
	}
	// Without rewards every count is the same as with them.
	cheap := h.a.Overview(now, []time.Duration{24 * time.Hour, 7 * 24 * time.Hour}, 24, time.Hour, false)
	cheap.Mean, cheap.Matured = o.Mean, o.Matured
	if !reflect.DeepEqual(cheap, o) {
		t.Errorf("without rewards:\n%+v\nwith:\n%+v", cheap, o)
	}
	if mo.Mean == nil || *mo.Mean != 0.75 { // five ratings of 0.5, five of 1
		t.Errorf("mean = %v", mo.Mean)
	}
	// 24 hourly buckets ending with now's hour: runs 216..239, one each.
	if len(o.Selections) != 2 || o.Selections[0].Name != "a" || o.Selections[1].VariationID != b.ID {
		t.Fatalf("selections = %+v", o.Selections)
	}
	if o.Start != now.Truncate(time.Hour).Add(-23*time.Hour) {
		t.Errorf("start = %v", o.Start)
	}
	for k := range 24 {
		i := 216 + k
		wa, wb := 1, 0
		if i%3 == 0 {
			wa, wb = 0, 1
		}
		if o.Selections[0].Counts[k] != wa || o.Selections[1].Counts[k] != wb {
			t.Errorf("bucket %d: a %d b %d, want %d %d", k, o.Selections[0].Counts[k], o.Selections[1].Counts[k], wa, wb)
		}
	}
}

// TestOverviewMeanCountsGuardedRuns: a run a guard caught has the reward
// the guard gives it (the lower bound), and the overview's mean counts it
// like a scored one.
func TestOverviewMeanCountsGuardedRuns(t *testing.T) {
	h := newHarness(t)
	h.must(PutObjective{Definition: mustParse(t, `{"horizon_s": 3600,
		"guards": [{"signal": "run.succeeded", "op": "lt", "value": 1}],
		"terms": [{"signal": "human.rating", "weight": 1}]}`)})
	ok, failed := h.run(CreateRun{}), h.run(CreateRun{})
	h.must(FinishRun{RunID: ok.ID, Succeeded: true})
	h.signal(RecordSignal{Kind: "human.rating", Value: 1, RunID: ok.ID})
	h.must(FinishRun{RunID: failed.ID, Succeeded: false})
	o := h.a.Overview(h.now.Add(2*time.Hour), nil, 1, time.Hour, true)
	if o.Matured != 2 || o.Mean == nil || *o.Mean != 0.5 {
		t.Fatalf("matured %d, mean %v; want 2 and 0.5 (a scored 1 and a guarded 0)", o.Matured, o.Mean)
	}
}
