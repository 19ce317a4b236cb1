package engine

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

func mustParse(t testing.TB, js string) objective.Definition {
	t.Helper()
	d, err := objective.Parse([]byte(js), "definition")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

const previewCurrent = `{"horizon_s": 86400, "guards": [{"signal": "run.succeeded", "op": "lt", "value": 1}],
	"terms": [{"signal": "human.rating", "weight": 0.5, "scale": [1, 5]},
	          {"signal": "external.ticket_closed", "weight": 0.5, "within_s": 43200, "missing": 0}]}`

// previewDraft weighs other evidence (a scorer's reports, feedback), scores
// runs without evidence and widens the bounds.
const previewDraft = `{"horizon_s": 43200, "default": 0.25, "bounds": [-1, 1],
	"terms": [{"signal": "human.rating", "weight": 1, "scale": [1, 5], "agg": "mean"},
	          {"signal": "ci.tests", "weight": 2},
	          {"signal": "feedback", "weight": -0.5, "scale": [-1, 1]}]}`

// previewHistory gives h an objective and n runs of two labels with every
// kind of evidence: signals to runs, sessions and claimed objects, finishes
// old enough to mature and recent ones, reports (some replaced), feedback.
func previewHistory(t testing.TB, h *harness, n int) []Run {
	h.must(PutObjective{Definition: mustParse(t, previewCurrent)})
	v := h.must(CreateVariation{Name: "v"}).(Variation)
	rnd := rand.New(rand.NewPCG(5, 6))
	var runs []Run
	for i := range n {
		h.now = h.now.Add(time.Minute)
		r := h.run(CreateRun{Version: []string{"a", "b"}[i%2], SessionID: fmt.Sprintf("s%d", i%7), VariationID: v.ID})
		runs = append(runs, r)
		if i%3 == 0 {
			h.must(ClaimObject{RunID: r.ID, Object: fmt.Sprintf("ticket/%d", i%5)})
		}
		if rnd.IntN(4) > 0 {
			h.signal(RecordSignal{Kind: "human.rating", Value: float64(1 + rnd.IntN(5)), RunID: r.ID})
		}
		if i%4 == 0 {
			h.signal(RecordSignal{Kind: "external.ticket_closed", Value: 1, Object: fmt.Sprintf("ticket/%d", i%5)})
		}
		if i%5 == 0 {
			h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(rnd.Float64()), Started: uint64(i)})
		}
		if i%6 == 0 {
			h.must(RecordFeedback{RunID: r.ID, Score: ptr(rnd.Float64()*2 - 1)})
		}
		if rnd.IntN(5) > 0 {
			at := h.now
			if i < n*2/3 {
				at = t0.Add(-48 * time.Hour) // long matured
			}
			h.must(FinishRun{RunID: r.ID, Succeeded: rnd.IntN(6) > 0, FinishedAt: at})
			if i%4 == 1 {
				h.signal(RecordSignal{Kind: "human.rating", Value: 5, SessionID: fmt.Sprintf("s%d", i%7)})
			}
		}
		if i%10 == 5 { // replace an earlier report
			j := (i / 2) / 5 * 5
			h.must(ReportReward{RunID: runs[j].ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(rnd.Float64()), Started: uint64(1000 + i)})
		}
	}
	h.now = h.now.Add(time.Hour)
	return runs
}

// bruteForce is what reading every run's reward under both versions says.
func bruteForce(t *testing.T, a *Agent, label *string, cur, draft, limit int, now time.Time) (objective.Summary, objective.Summary, int, []Moved) {
	ov, _ := a.Objective(cur)
	dv, _ := a.Objective(draft)
	name := ""
	if label != nil {
		name = *label
	}
	var cs, ds []objective.Reward
	changed := 0
	var moved []Moved
	for r := range a.runs.All() {
		if label != nil && r.Version != *label {
			continue
		}
		c, err := a.Reward(r.ID, cur, now)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := a.Reward(r.ID, draft, now)
		cs, ds = append(cs, c), append(ds, d)
		if c.Status != d.Status || (c.Value == nil) != (d.Value == nil) || c.Value != nil && !sameValue(*c.Value, *d.Value) {
			changed++
		}
		if c.Value != nil && d.Value != nil && !sameValue(*c.Value, *d.Value) {
			moved = append(moved, Moved{RunID: r.ID, Matured: c.Matured, Current: *c.Value, Draft: *d.Value,
				CurrentStatus: c.Status, DraftStatus: d.Status})
		}
	}
	slices.SortFunc(moved, func(a, b Moved) int {
		// By how far the reward moved, computed here rather than by Delta.
		return cmp.Or(cmp.Compare(math.Abs(b.Draft-b.Current), math.Abs(a.Draft-a.Current)), cmp.Compare(a.RunID, b.RunID))
	})
	if len(moved) > limit {
		moved = moved[:limit]
	}
	return objective.Summarize(name, ov.Version, ov.Definition.Bounds, cs, limit),
		objective.Summarize(name, dv.Version, dv.Definition.Bounds, ds, limit), changed, moved
}

func runPreview(t *testing.T, a *Agent, c PreviewObjective, now time.Time, budget int) PreviewResult {
	t.Helper()
	p, err := a.StartPreview(c, now)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for !p.Step(budget) {
	}
	return p.Result()
}

// TestPreviewEqualsPublishingThenReading: on a fixed history, the preview
// of a draft is what publishing it and reading the version summaries says,
// for one label and for every run, in one step or many.
func TestPreviewEqualsPublishingThenReading(t *testing.T) {
	h := newHarness(t)
	previewHistory(t, h, 300)
	draft := mustParse(t, previewDraft)
	a := "a"
	type result struct {
		res PreviewResult
		c   PreviewObjective
	}
	var results []result
	for _, c := range []PreviewObjective{
		{Definition: draft, Version: &a, Limit: 7},
		{Definition: draft, Limit: 1000},
	} {
		for _, budget := range []int{1, 37, 1 << 30} {
			results = append(results, result{runPreview(t, h.a, c, h.now, budget), c})
		}
	}
	if len(h.a.previews) != 0 {
		t.Fatal("a closed preview stays attached")
	}
	ov := h.must(PutObjective{Definition: draft}).(ObjectiveVersion)
	for _, r := range results {
		if r.res.Draft.ObjectiveVersion != ov.Version || r.res.Current.ObjectiveVersion != ov.Version-1 {
			t.Fatalf("versions %d and %d, want %d and %d", r.res.Draft.ObjectiveVersion, r.res.Current.ObjectiveVersion, ov.Version, ov.Version-1)
		}
		if r.c.Version != nil {
			cur, _ := h.a.VersionRewards(*r.c.Version, ov.Version-1, r.c.Limit, h.now)
			drf, _ := h.a.VersionRewards(*r.c.Version, ov.Version, r.c.Limit, h.now)
			if !reflect.DeepEqual(r.res.Current, cur) || !reflect.DeepEqual(r.res.Draft, drf) {
				t.Fatalf("preview of label a differs from the published version's summaries:\npreview %+v\nread    %+v", r.res.Draft, drf)
			}
		}
		cur, drf, changed, moved := bruteForce(t, h.a, r.c.Version, ov.Version-1, ov.Version, r.c.Limit, h.now)
		if !reflect.DeepEqual(r.res.Current, cur) || !reflect.DeepEqual(r.res.Draft, drf) {
			t.Fatalf("preview differs from reading every run")
		}
		if r.res.Changed != changed || !reflect.DeepEqual(r.res.Moved, moved) {
			t.Fatalf("changed %d moved %+v\nwant %d %+v", r.res.Changed, r.res.Moved, changed, moved)
		}
	}
	if results[4].res.Draft.Histogram.Bounds != [2]float64{-1, 1} || len(results[4].res.Moved) == 0 || results[4].res.Changed == 0 {
		t.Fatalf("the history should exercise the draft: %+v", results[4].res)
	}
}

// TestPreviewComparesWithTheCurrentVersion: with several versions
// published, the preview sets the draft against the newest, and lists 20
// moved runs when no limit is given.
func TestPreviewComparesWithTheCurrentVersion(t *testing.T) {
	h := newHarness(t)
	previewHistory(t, h, 120)
	cur := h.must(PutObjective{Definition: mustParse(t, previewDraft)}).(ObjectiveVersion)
	draft := mustParse(t, previewCurrent)
	res := runPreview(t, h.a, PreviewObjective{Definition: draft}, h.now, 1<<30)
	if res.Current.ObjectiveVersion != cur.Version || res.Draft.ObjectiveVersion != cur.Version+1 || cur.Version < 2 {
		t.Fatalf("versions %d and %d, want %d and %d", res.Current.ObjectiveVersion, res.Draft.ObjectiveVersion, cur.Version, cur.Version+1)
	}
	h.must(PutObjective{Definition: draft})
	_, _, _, moved := bruteForce(t, h.a, nil, cur.Version, cur.Version+1, 1<<30, h.now)
	if len(moved) <= 20 || !reflect.DeepEqual(res.Moved, moved[:20]) {
		t.Fatalf("moved %d runs, listed %+v; want the first 20 of %+v", len(moved), res.Moved, moved)
	}
	for _, m := range res.Moved {
		if m.Delta() != m.Draft-m.Current {
			t.Fatalf("%+v: Delta %v", m, m.Delta())
		}
	}
}

// TestPreviewIgnoresRounding: re-weighting two terms that read the same
// value leaves every run's reward where it was, though the arithmetic may
// land an ulp away; no run has changed or moved.
func TestPreviewIgnoresRounding(t *testing.T) {
	// On [0, 1000] an ulp of the reward is a thousand times an ulp of u:
	// the tolerance scales with the values.
	for _, bounds := range []string{``, `"bounds": [0, 1000], `} {
		h := newHarness(t)
		h.must(PutObjective{Definition: mustParse(t, `{`+bounds+`"terms": [{"signal": "a", "weight": 0.7}, {"signal": "b", "weight": 0.3}]}`)})
		ulps := 0
		for i := range 200 {
			r := h.run(CreateRun{})
			x := float64(i) / 199
			h.signal(RecordSignal{Kind: "a", Value: x, RunID: r.ID})
			h.signal(RecordSignal{Kind: "b", Value: x, RunID: r.ID})
			if 0.1*x+0.9*x != 0.7*x+0.3*x {
				ulps++
			}
		}
		if ulps == 0 {
			t.Fatal("no value lands an ulp apart: the test shows nothing")
		}
		draft := mustParse(t, `{`+bounds+`"terms": [{"signal": "a", "weight": 0.1}, {"signal": "b", "weight": 0.9}]}`)
		res := runPreview(t, h.a, PreviewObjective{Definition: draft, Limit: 10}, h.now, 1<<30)
		if res.Changed != 0 || len(res.Moved) != 0 {
			t.Fatalf("bounds %q: changed %d, moved %+v: want none (%d values an ulp apart)", bounds, res.Changed, res.Moved, ulps)
		}
	}
}

// TestPreviewReadsTheHistoryAsOfItsStart: writes between the steps (new
// runs, signals, claims, finishes, replaced reports, a new objective) do
// not show: the answer is the one a preview of the same history, stopped
// at the start, gives in one step.
func TestPreviewReadsTheHistoryAsOfItsStart(t *testing.T) {
	h := newHarness(t)
	runs := previewHistory(t, h, 120)
	atStart := slices.Clone(h.events)
	draft := mustParse(t, previewDraft)
	c := PreviewObjective{Definition: draft, Limit: 50}
	p, err := h.a.StartPreview(c, h.now)
	if err != nil {
		t.Fatal(err)
	}
	p.Step(40) // some runs read, most not
	// A second preview of the same history, opened later and not stepped
	// until the end: what the first has read, it has still to read.
	p2, err := h.a.StartPreview(c, h.now)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		if i%2 == 0 {
			h.signal(RecordSignal{Kind: "human.rating", Value: 1, RunID: r.ID})
		}
		if i%9 == 0 {
			h.must(ClaimObject{RunID: r.ID, Object: "ticket/1"}) // an object with signals already
		}
		if got, _ := h.a.Run(r.ID); !got.Finished {
			h.must(FinishRun{RunID: r.ID, Succeeded: true, FinishedAt: t0.Add(-72 * time.Hour)})
		}
		if i%5 == 0 {
			h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(-7), Started: uint64(5000 + i)})
		}
		if i%7 == 0 {
			h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci.other", Value: ptr(1), Started: 1})
		}
		h.run(CreateRun{Version: "a"})
		if i%20 == 0 {
			p.Step(13)
		}
	}
	h.must(PutObjective{Definition: mustParse(t, previewCurrent)})
	for !p.Step(25) {
	}
	got := p.Result()
	p.Close()
	for !p2.Step(25) {
	}
	got2 := p2.Result()
	p2.Close()

	then := replayAll(t, atStart)
	want := runPreview(t, then, c, h.now, 1<<30)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("preview with interleaved writes:\n%+v\nwant\n%+v", got, want)
	}
	if !reflect.DeepEqual(got2, want) {
		t.Fatalf("second preview with interleaved writes:\n%+v\nwant\n%+v", got2, want)
	}
	if got.Seq != uint64(len(atStart)) {
		t.Fatalf("seq %d, want %d", got.Seq, len(atStart))
	}
}

// TestPreviewStepsFollowTheBudget: a step spends its budget on runs, each
// costing at least one (a run of another label too), so a budget of 1
// takes one step per run, and a budget beyond the history takes one step.
func TestPreviewStepsFollowTheBudget(t *testing.T) {
	h := newHarness(t)
	runs := previewHistory(t, h, 60)
	a := "a"
	c := PreviewObjective{Definition: mustParse(t, previewDraft), Version: &a}
	for _, tc := range []struct {
		budget, steps int
	}{
		{1 << 30, 1},
		{1, h.a.runs.len()},
	} {
		p, err := h.a.StartPreview(c, h.now)
		if err != nil {
			t.Fatal(err)
		}
		steps := 1
		for !p.Step(tc.budget) {
			steps++
		}
		p.Close()
		if steps != tc.steps {
			t.Errorf("budget %d: %d steps over %d runs, want %d", tc.budget, steps, len(runs), tc.steps)
		}
	}
}

// TestPreviewAsOfItsStartAtTheEdges: a claim or a report that is the very
// last event before a preview starts counts in it; and the run the preview
// reads next, finished and re-reported after the start, still reads as it
// stood at the start.
func TestPreviewAsOfItsStartAtTheEdges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		last  func(h *harness, x Run) // the last event before the start
		after func(h *harness, x Run) // events once the preview has read up to x
	}{
		{"claim", func(h *harness, x Run) {
			h.must(FinishRun{RunID: x.ID, Succeeded: true, FinishedAt: t0.Add(-72 * time.Hour)})
			h.must(ClaimObject{RunID: x.ID, Object: "ticket/1"})
		}, nil},
		{"report", func(h *harness, x Run) {
			h.must(ReportReward{RunID: x.ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(0.5), Started: 9000})
		}, nil},
		{"report made after the start, then replaced", func(*harness, Run) {}, func(h *harness, x Run) {
			h.must(ReportReward{RunID: x.ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(0.5), Started: 9000})
			h.must(ReportReward{RunID: x.ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(-3), Started: 9001})
		}},
		{"report replaced, run finished", func(h *harness, x Run) {
			h.must(ReportReward{RunID: x.ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(0.5), Started: 9000})
		}, func(h *harness, x Run) {
			h.must(ReportReward{RunID: x.ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(-3), Started: 9001})
			h.must(FinishRun{RunID: x.ID, Succeeded: true, FinishedAt: t0.Add(-72 * time.Hour)})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			previewHistory(t, h, 30)
			h.signal(RecordSignal{Kind: "ci.tests", Value: 2, Object: "ticket/1"})
			x := h.run(CreateRun{Version: "a"})
			xi := h.a.runs.len() - 1
			tc.last(h, x)
			atStart := slices.Clone(h.events)
			c := PreviewObjective{Definition: mustParse(t, previewDraft), Limit: 50}
			p, err := h.a.StartPreview(c, h.now)
			if err != nil {
				t.Fatal(err)
			}
			for range xi { // a budget of 1 reads one run a step: x is next
				p.Step(1)
			}
			if tc.after != nil {
				tc.after(h, x)
			}
			for !p.Step(1 << 30) {
			}
			got := p.Result()
			p.Close()
			then := replayAll(t, atStart)
			if want := runPreview(t, then, c, h.now, 1<<30); !reflect.DeepEqual(got, want) {
				t.Fatalf("preview:\n%+v\nwant, as of its start:\n%+v", got, want)
			}
			// And what publishing the draft at the start and reading every
			// run's reward says, without the preview's code.
			ov, _, err := executeAny(then, PutObjective{Definition: c.Definition}, h.now, rand.New(rand.NewPCG(1, 1)))
			if err != nil {
				t.Fatal(err)
			}
			v := ov.(ObjectiveVersion).Version
			cur, drf, changed, moved := bruteForce(t, then, nil, v-1, v, c.Limit, h.now)
			if !reflect.DeepEqual(got.Current, cur) || !reflect.DeepEqual(got.Draft, drf) || got.Changed != changed || !reflect.DeepEqual(got.Moved, moved) {
				t.Fatalf("preview differs from reading every run as of its start")
			}
		})
	}
}

// TestPreviewKeepsTheFirstRunsAmongEqualMoves: when more runs move by the
// same amount than the limit lists, the preview lists those with the
// smallest ids, as sorting every run would.
func TestPreviewKeepsTheFirstRunsAmongEqualMoves(t *testing.T) {
	h := newHarness(t)
	h.must(PutObjective{Definition: mustParse(t, `{"horizon_s": 60, "terms": [{"signal": "a", "weight": 1}]}`)})
	for range 30 {
		r := h.run(CreateRun{})
		h.signal(RecordSignal{Kind: "a", Value: 1, RunID: r.ID})
		h.must(FinishRun{RunID: r.ID, Succeeded: true})
	}
	draft := mustParse(t, `{"horizon_s": 60, "terms": [{"signal": "a", "weight": 1, "scale": [0, 2]}]}`)
	later := h.now.Add(2 * time.Minute) // past the horizon: every run matured
	got := runPreview(t, h.a, PreviewObjective{Definition: draft, Limit: 5}, later, 1<<30)
	ov := h.must(PutObjective{Definition: draft}).(ObjectiveVersion)
	_, _, changed, moved := bruteForce(t, h.a, nil, ov.Version-1, ov.Version, 5, later)
	if changed != 30 || len(moved) != 5 || !reflect.DeepEqual(got.Moved, moved) {
		t.Fatalf("moved %+v (%d changed); want %+v", got.Moved, got.Changed, moved)
	}
}

// TestPreviewOfALongerHorizonReadsALateReplacement: a report replaced after
// the current objective's horizon reads, under it, as the value that stood
// at the horizon; a draft whose horizon the replacement is within reads
// the replacement, as publishing the draft would.
func TestPreviewOfALongerHorizonReadsALateReplacement(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.3), Weight: 1, Started: 1})
	h.must(PutObjective{Definition: mustParse(t, `{"horizon_s": 3600, "terms": [{"signal": "ci", "weight": 1}]}`)})
	h.must(FinishRun{RunID: r.ID, Succeeded: true})
	h.now = h.now.Add(2 * time.Hour)
	h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.9), Weight: 1, Started: 2})
	draft := mustParse(t, `{"horizon_s": 36000, "terms": [{"signal": "ci", "weight": 1}]}`)
	got := runPreview(t, h.a, PreviewObjective{Definition: draft}, h.now, 1<<30)
	if len(got.Moved) != 1 || got.Moved[0].Current != 0.3 || got.Moved[0].Draft != 0.9 {
		t.Fatalf("moved %+v, want the run from 0.3 (current: the value at its horizon) to 0.9", got.Moved)
	}
	h.must(PutObjective{Definition: draft})
	if rw, _ := h.a.Reward(r.ID, -1, h.now); rw.Value == nil || *rw.Value != 0.9 {
		t.Fatalf("the draft published reads %v, want 0.9", rw.Value)
	}
}
