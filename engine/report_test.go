package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/objective"
)

func TestReportReplacesPerScorerAndTurn(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	first := h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.2), Weight: 1, Started: 1}).(Report)
	h.now = h.now.Add(time.Minute)
	again := h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.9), Weight: 1, Started: 2}).(Report)
	if again.ID != first.ID || !again.CreatedAt.Equal(first.CreatedAt) || !again.UpdatedAt.After(first.UpdatedAt) || *again.Value != 0.9 {
		t.Fatalf("replacement = %+v, first = %+v", again, first)
	}
	other := h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", TurnID: "t2", Value: ptr(0.5), Weight: 1, Started: 3}).(Report)
	if other.ID == first.ID {
		t.Fatal("another turn replaced the first report")
	}
	reps, _ := h.a.Reports(r.ID)
	if len(reps) != 2 || reps[0].ID != first.ID || *reps[0].Value != 0.9 {
		t.Fatalf("reports = %+v", reps)
	}
}

func TestReportThatStartedEarlierIsSuperseded(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	h.must(ReportReward{RunID: r.ID, Kind: ReportReview, Scorer: "review", Value: ptr(1), Weight: 2, Started: 20})
	_, err := h.exec(ReportReward{RunID: r.ID, Kind: ReportReview, Scorer: "review", Value: ptr(0), Weight: 2, Started: 10})
	if !errors.Is(err, ErrSuperseded) {
		t.Fatalf("earlier-started report: err = %v, want ErrSuperseded", err)
	}
	reps, _ := h.a.Reports(r.ID)
	if *reps[0].Value != 1 {
		t.Fatalf("the later-started report no longer stands: %+v", reps[0])
	}
}

func TestReportTraceSetsTurn(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	h.must(RegisterTrace{RunID: r.ID, TraceID: "tr-1", TurnID: "turn-1"})
	rep := h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "s", TraceID: "tr-1", Value: ptr(1), Weight: 1}).(Report)
	if rep.TurnID != "turn-1" {
		t.Fatalf("turn = %q, want the trace's turn", rep.TurnID)
	}
	cases := []struct {
		cmd  ReportReward
		path string
	}{
		{ReportReward{RunID: r.ID, Scorer: "s", TraceID: "tr-unknown"}, "trace_id"},
		{ReportReward{RunID: r.ID, Scorer: "s", TraceID: "tr-1", TurnID: "turn-9"}, "turn_id"},
		{ReportReward{RunID: r.ID, Scorer: "bad scorer"}, "scorer"},
	}
	for _, c := range cases {
		_, err := h.exec(c.cmd)
		var fe *field.Error
		if !errors.As(err, &fe) || fe.Path != c.path {
			t.Errorf("%+v: err = %v, want a field error at %s", c.cmd, err, c.path)
		}
	}
	if _, err := h.exec(ReportReward{RunID: "run_x", Scorer: "s"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown job: err = %v", err)
	}
}

// TestStandingReportIsASignal: an objective term on the scorer's kind sees
// the standing value, and only it, after a replacement.
func TestStandingReportIsASignal(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	h.must(FinishRun{RunID: r.ID, Succeeded: true})
	def, err := objective.Parse([]byte(`{"terms":[{"signal":"ci","weight":1,"agg":"sum"}]}`), "definition")
	if err != nil {
		t.Fatal(err)
	}
	h.must(PutObjective{Definition: def})
	h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.25), Weight: 1, Started: 1})
	h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.5), Weight: 1, Started: 2})
	rw, _ := h.a.Reward(r.ID, -1, t0)
	// sum over the standing report only: 0.5, not 0.75.
	if rw.Value == nil || *rw.Value != 0.5 || rw.Terms[0].Count != 1 {
		t.Fatalf("reward = %+v", rw)
	}
	// A null-valued report (a choice) is evidence for listing, not a signal.
	h.must(ReportReward{RunID: r.ID, Kind: ReportChoice, Scorer: "ci", TurnID: "t", Chosen: "null", Shown: `[1,2]`, Weight: 1, Started: 3})
	if rw, _ := h.a.Reward(r.ID, -1, t0); rw.Terms[0].Count != 1 {
		t.Fatalf("a null report became a signal: %+v", rw.Terms[0])
	}
}

// TestReportStandsAsOfItsLatestReplacement: a replaced report is a signal
// stamped when it was last replaced, not when first made; with agg "last" it
// outranks a signal recorded between the two. A report whose request
// started at the same stamp as the standing one's replaces it.
func TestReportStandsAsOfItsLatestReplacement(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	h.must(FinishRun{RunID: r.ID, Succeeded: true})
	def, err := objective.Parse([]byte(`{"terms":[{"signal":"ci","weight":1,"agg":"last"}]}`), "definition")
	if err != nil {
		t.Fatal(err)
	}
	h.must(PutObjective{Definition: def})
	h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.2), Weight: 1, Started: 1})
	h.now = h.now.Add(time.Minute)
	h.must(RecordSignal{Kind: "ci", Value: 0.7, RunID: r.ID})
	h.now = h.now.Add(time.Minute)
	h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.9), Weight: 1, Started: 2})
	if rw, _ := h.a.Reward(r.ID, -1, h.now); rw.Value == nil || *rw.Value != 0.9 {
		t.Fatalf("last ci after the report's replacement = %+v, want the replaced report's 0.9", rw.Terms)
	}
	h.now = h.now.Add(time.Minute)
	if _, err := h.exec(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.4), Weight: 1, Started: 2}); err != nil {
		t.Fatalf("a report started at the standing one's stamp: %v, want it to replace", err)
	}
	if reps, _ := h.a.Reports(r.ID); len(reps) != 1 || *reps[0].Value != 0.4 {
		t.Fatalf("reports after an equal-stamp replacement = %+v", reps)
	}
}

// TestReportReplacedAfterTheHorizonIsLate: a report is received when it was
// last replaced. One made within the horizon and replaced after it stands as
// a late signal: counted in late_signals and not in the reward, which goes
// on reading the value that stood at the horizon (seed 000: a signal
// received later is "never used", and the reward closed at the horizon).
func TestReportReplacedAfterTheHorizonIsLate(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	h.must(FinishRun{RunID: r.ID, Succeeded: true})
	def, err := objective.Parse([]byte(`{"horizon_s":3600,"terms":[{"signal":"ci","weight":1}]}`), "definition")
	if err != nil {
		t.Fatal(err)
	}
	h.must(PutObjective{Definition: def})
	h.now = h.now.Add(10 * time.Minute)
	h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.2), Weight: 1, Started: 1})
	if rw, _ := h.a.Reward(r.ID, -1, h.now); rw.Value == nil || *rw.Value != 0.2 || rw.LateSignals != 0 {
		t.Fatalf("reward with the report made within the horizon = %+v (late %d), want 0.2", rw.Value, rw.LateSignals)
	}
	h.now = h.now.Add(2 * time.Hour)
	h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.9), Weight: 1, Started: 2})
	rw, _ := h.a.Reward(r.ID, -1, h.now)
	if rw.LateSignals != 1 || rw.Value == nil || *rw.Value != 0.2 {
		t.Fatalf("reward after the report was replaced past the horizon: late %d, value %v; want 1 late and 0.2",
			rw.LateSignals, rw.Value)
	}
	// Replaced again past the horizon, and with no value: still the value
	// of the horizon, the late one counted once.
	h.now = h.now.Add(time.Hour)
	h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: ptr(0.5), Weight: 1, Started: 3})
	h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Weight: 1, Started: 4})
	if rw, _ := h.a.Reward(r.ID, -1, h.now); rw.LateSignals != 0 || rw.Value == nil || *rw.Value != 0.2 {
		t.Fatalf("reward after a late replacement without a value: late %d, value %v; want 0 late (no value, no signal) and 0.2",
			rw.LateSignals, rw.Value)
	}
	// A longer horizon reads the latest replacement within it.
	def, err = objective.Parse([]byte(`{"horizon_s":36000,"terms":[{"signal":"ci","weight":1}]}`), "definition")
	if err != nil {
		t.Fatal(err)
	}
	h.must(PutObjective{Definition: def})
	h.now = h.now.Add(time.Minute)
	if rw, _ := h.a.Reward(r.ID, -1, h.now); rw.Value != nil || rw.Status != objective.StatusExcluded {
		t.Fatalf("under a 10 h horizon: %v %s, want the standing report's no value: excluded", rw.Value, rw.Status)
	}
	if rw, _ := h.a.Reward(r.ID, 1, h.now); rw.Value == nil || *rw.Value != 0.2 {
		t.Fatalf("version 1 read again: %v, want 0.2", rw.Value)
	}
}
