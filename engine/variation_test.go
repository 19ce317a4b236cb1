package engine

import (
	"errors"
	"math"
	"testing"
	"time"
)

func ptr(f float64) *float64 { return &f }

func (h *harness) variation(name string) Variation {
	h.t.Helper()
	return h.must(CreateVariation{Name: name}).(Variation)
}

// TestSeedPosteriorExample is seed 004's worked example: +1.0, -0.5 and 0.0
// on three runs of one variation give Beta(2.5, 2.0), score 2.5/4.5 ≈ 0.556.
func TestSeedPosteriorExample(t *testing.T) {
	h := newHarness(t)
	v := h.variation("concise")
	if v.Alpha != 1 || v.Beta != 1 || v.Score() != 0.5 {
		t.Fatalf("new variation = %+v, want Beta(1,1) scoring 0.5", v)
	}
	for _, s := range []*float64{ptr(1), ptr(-0.5), ptr(0)} {
		r := h.run(CreateRun{VariationID: v.ID})
		h.must(RecordFeedback{RunID: r.ID, Score: s})
	}
	got, _ := h.a.Variation(v.ID)
	if got.Alpha != 2.5 || got.Beta != 2 || got.FeedbackCount != 3 {
		t.Fatalf("posterior = Beta(%v, %v) after %d, want Beta(2.5, 2) after 3", got.Alpha, got.Beta, got.FeedbackCount)
	}
	if math.Abs(got.Score()-0.5555555) > 1e-6 {
		t.Fatalf("score = %v, want ≈ 0.556", got.Score())
	}
}

func TestOmittedScoreIsNeutral(t *testing.T) {
	h := newHarness(t)
	v := h.variation("a")
	r := h.run(CreateRun{VariationID: v.ID})
	h.must(RecordFeedback{RunID: r.ID})
	got, _ := h.a.Variation(v.ID)
	if got.Alpha != 1.5 || got.Beta != 1.5 || got.FeedbackCount != 1 {
		t.Fatalf("posterior after an omitted score = %+v", got)
	}
	sigs, _ := h.a.RunSignals(r.ID)
	if len(sigs) != 1 || sigs[0].Kind != FeedbackSignal || sigs[0].Value != 0 {
		t.Fatalf("feedback signal = %+v, want one feedback signal of value 0", sigs)
	}
}

func TestFeedbackValidation(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	for _, s := range []float64{1.0001, -1.5, math.NaN()} {
		if _, err := h.exec(RecordFeedback{RunID: r.ID, Score: ptr(s)}); !errors.Is(err, ErrInvalid) {
			t.Errorf("score %v: err = %v, want invalid", s, err)
		}
	}
	if _, err := h.exec(RecordFeedback{RunID: "run_x", Score: ptr(1)}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown run: err = %v", err)
	}
	// Feedback on a run without a variation is kept; no posterior moves.
	fb := h.must(RecordFeedback{RunID: r.ID, Score: ptr(1)}).(Feedback)
	if fb.VariationID != "" {
		t.Fatalf("feedback = %+v", fb)
	}
}

func TestSelection(t *testing.T) {
	h := newHarness(t)
	if r := h.run(CreateRun{}); r.VariationID != "" {
		t.Fatalf("agent without variations chose %q", r.VariationID)
	}
	good, bad := h.variation("good"), h.variation("bad")
	if _, err := h.exec(CreateRun{VariationID: "var_missing"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pinning an unknown variation: err = %v", err)
	}
	if r := h.run(CreateRun{VariationID: bad.ID}); r.VariationID != bad.ID {
		t.Fatalf("pinned run got %s", r.VariationID)
	}
	// Clearly better feedback: good earns 20 × +1, bad 20 × -1.
	for range 20 {
		h.must(RecordFeedback{RunID: h.run(CreateRun{VariationID: good.ID}).ID, Score: ptr(1)})
		h.must(RecordFeedback{RunID: h.run(CreateRun{VariationID: bad.ID}).ID, Score: ptr(-1)})
	}
	const n = 2000
	wins := 0
	for range n {
		if h.run(CreateRun{}).VariationID == good.ID {
			wins++
		}
	}
	// Beta(21,1) against Beta(1,21): the better one wins all but a vanishing share.
	if wins < n*95/100 {
		t.Fatalf("better variation won %d of %d weighted selections, want ≥ 95%%", wins, n)
	}
}

func TestRandomModeIsUniform(t *testing.T) {
	h := &harness{t: t, a: NewAgent(), now: t0, rnd: newHarness(t).rnd}
	h.must(CreateAgent{ID: "agt_r", Name: "r", SelectionMode: SelectionRandom})
	a, b := h.variation("a"), h.variation("b")
	for range 10 {
		h.must(RecordFeedback{RunID: h.run(CreateRun{VariationID: a.ID}).ID, Score: ptr(1)})
	}
	const n = 4000
	count := map[string]int{}
	for range n {
		count[h.run(CreateRun{}).VariationID]++
	}
	// Uniform: each near n/2 whatever the feedback; 4 standard deviations is ±126.
	if d := count[a.ID] - n/2; d > 126 || d < -126 || count[a.ID]+count[b.ID] != n {
		t.Fatalf("random mode chose %v", count)
	}
}

func TestListFeedbackFiltersAndPages(t *testing.T) {
	h := newHarness(t)
	va, vb := h.variation("a"), h.variation("b")
	ra := h.run(CreateRun{VariationID: va.ID})
	rb := h.run(CreateRun{VariationID: vb.ID})
	add := func(r Run, score *float64, comment string, labels map[string]string) Feedback {
		h.now = h.now.Add(time.Second)
		return h.must(RecordFeedback{RunID: r.ID, Score: score, Comment: comment, Labels: labels}).(Feedback)
	}
	f1 := add(ra, ptr(1), "Short and on point.", map[string]string{"source": "csat"})
	f2 := add(ra, ptr(-0.5), "Second reviewer disagrees.", nil)
	f3 := add(rb, ptr(0), "neutral", map[string]string{"source": "csat", "team": "x"})
	f4 := add(rb, nil, "", nil)
	ids := func(fbs []Feedback) []string {
		out := []string{}
		for _, f := range fbs {
			out = append(out, f.ID)
		}
		return out
	}
	cases := []struct {
		name string
		f    FeedbackFilter
		want []Feedback
	}{
		{"all, newest first", FeedbackFilter{}, []Feedback{f4, f3, f2, f1}},
		{"per run", FeedbackFilter{RunID: ra.ID}, []Feedback{f2, f1}},
		{"positive", FeedbackFilter{Sentiment: SentimentPositive}, []Feedback{f1}},
		{"negative; 0.0 and omitted match neither", FeedbackFilter{Sentiment: SentimentNegative}, []Feedback{f2}},
		{"unspecified is everything", FeedbackFilter{Sentiment: SentimentUnspecified}, []Feedback{f4, f3, f2, f1}},
		{"variation", FeedbackFilter{VariationID: vb.ID}, []Feedback{f4, f3}},
		{"query is case-insensitive", FeedbackFilter{Query: "ON POINT"}, []Feedback{f1}},
		{"created after", FeedbackFilter{CreatedAfter: f2.CreatedAt}, []Feedback{f4, f3}},
		{"created before", FeedbackFilter{CreatedBefore: f2.CreatedAt}, []Feedback{f1}},
		{"labels: all pairs", FeedbackFilter{Labels: map[string]string{"source": "csat"}}, []Feedback{f3, f1}},
		{"labels: two pairs", FeedbackFilter{Labels: map[string]string{"source": "csat", "team": "x"}}, []Feedback{f3}},
		{"labels: another value", FeedbackFilter{Labels: map[string]string{"team": "y"}}, []Feedback{}},
	}
	for _, c := range cases {
		got, next := h.a.ListFeedback(c.f, 0, 100)
		if len(got) != len(c.want) || next != 0 {
			t.Errorf("%s: got %v (next %d), want %v", c.name, ids(got), next, ids(c.want))
			continue
		}
		for i := range got {
			if got[i].ID != c.want[i].ID {
				t.Errorf("%s: got %v, want %v", c.name, ids(got), ids(c.want))
				break
			}
		}
	}
	// Pages of 1 walk the same order, and a cursor survives new feedback.
	page, next := h.a.ListFeedback(FeedbackFilter{}, 0, 1)
	var walked []Feedback
	walked = append(walked, page...)
	add(ra, ptr(1), "arrives mid-walk", nil)
	for next != 0 {
		page, next = h.a.ListFeedback(FeedbackFilter{}, next, 1)
		walked = append(walked, page...)
	}
	if got, want := ids(walked), ids([]Feedback{f4, f3, f2, f1}); len(got) != 4 || got[0] != want[0] || got[3] != want[3] {
		t.Fatalf("paged walk = %v, want %v", got, want)
	}
}
