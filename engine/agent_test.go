package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/objective"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// harness drives an agent and keeps every event it emitted, so tests can
// replay them and compare.
type harness struct {
	t      *testing.T
	a      *Agent
	now    time.Time
	rnd    *rand.Rand
	events []Event
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, a: NewAgent(), now: t0, rnd: rand.New(rand.NewPCG(1, 2))}
	h.must(CreateAgent{ID: "agt_1", Workspace: "default", Name: "support"})
	return h
}

func (h *harness) exec(cmd any) (any, error) {
	res, evs, err := executeAny(h.a, cmd, h.now, h.rnd)
	if err != nil && len(evs) != 0 {
		h.t.Fatalf("%T failed with events %v", cmd, evs)
	}
	h.events = append(h.events, evs...)
	return res, err
}

func (h *harness) must(cmd any) any {
	h.t.Helper()
	res, err := h.exec(cmd)
	if err != nil {
		h.t.Fatalf("%T: %v", cmd, err)
	}
	return res
}

func (h *harness) run(c CreateRun) Run { h.t.Helper(); return h.must(c).(CreatedRun).Run }

func (h *harness) signal(c RecordSignal) SignalResult {
	h.t.Helper()
	return h.must(c).(SignalResult)
}

func TestCommandErrors(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{ExternalID: "ticket-1"})
	h.must(FinishRun{RunID: r.ID, Succeeded: true})
	cases := []struct {
		name   string
		cmd    any
		want   error
		path   string // for field errors
		reason string // when set, the field error's reason
	}{
		{"agent twice", CreateAgent{ID: "agt_1", Name: "x"}, ErrConflict, "", ""},
		{"unknown variation", CreateRun{VariationID: "var_x"}, ErrNotFound, "", ""},
		{"external id reused", CreateRun{ExternalID: "ticket-1"}, ErrConflict, "", ""},
		{"finish unknown run", FinishRun{RunID: "run_x"}, ErrNotFound, "", ""},
		{"finish twice", FinishRun{RunID: r.ID}, ErrConflict, "", ""},
		{"claim without object", ClaimObject{RunID: r.ID}, ErrInvalid, "object", "is required"},
		{"trace without id", RegisterTrace{RunID: r.ID}, ErrInvalid, "trace_id", "is required"},
		{"bad kind", RecordSignal{Kind: "no spaces", Value: 1, RunID: r.ID}, ErrInvalid, "kind", ""},
		{"empty kind", RecordSignal{Value: 1, RunID: r.ID}, ErrInvalid, "kind", ""},
		{"NaN value", RecordSignal{Kind: "k", Value: math.NaN(), RunID: r.ID}, ErrInvalid, "value", ""},
		{"infinite value", RecordSignal{Kind: "k", Value: math.Inf(1), RunID: r.ID}, ErrInvalid, "value", ""},
		{"no subject", RecordSignal{Kind: "k", Value: 1}, ErrInvalid, "", ""},
		{"two subjects", RecordSignal{Kind: "k", Value: 1, RunID: r.ID, Object: "o/1"}, ErrInvalid, "", ""},
		{"unknown run", RecordSignal{Kind: "k", Value: 1, RunID: "run_x"}, ErrNotFound, "", ""},
		{"session without finished run", RecordSignal{Kind: "k", Value: 1, SessionID: "s-none"}, ErrNotFound, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.a.Snapshot()
			_, err := h.exec(c.cmd)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			var fe *field.Error
			if c.want == ErrInvalid && (!errors.As(err, &fe) || fe.Path != c.path) {
				t.Fatalf("err = %v, want a field error at %q", err, c.path)
			}
			if c.reason != "" && (fe == nil || fe.Reason != c.reason) {
				t.Fatalf("err = %v, want the reason %q", err, c.reason)
			}
			if after := h.a.Snapshot(); !reflect.DeepEqual(before, after) {
				t.Fatal("a failed command changed the agent")
			}
		})
	}
}

func TestCreateAgentValidates(t *testing.T) {
	cases := []struct {
		cmd  CreateAgent
		path string
	}{
		{CreateAgent{ID: "agt_1"}, "name"},
		{CreateAgent{ID: "agt_1", Name: "x", SelectionMode: "BEST"}, "selection_mode"},
		{CreateAgent{ID: "agt_1", Name: "x", Labels: map[string]string{"": "v"}}, `labels[""]`},
		{CreateAgent{ID: "agt_1", Name: "x", Labels: map[string]string{strings.Repeat("k", 318): "v"}}, "labels." + strings.Repeat("k", 318)},
	}
	for _, c := range cases {
		_, evs, err := executeAny(NewAgent(), c.cmd, t0, rand.New(rand.NewPCG(1, 1)))
		var fe *field.Error
		if !errors.As(err, &fe) || fe.Path != c.path || evs != nil {
			t.Errorf("%+v: err = %v, want a field error at %q", c.cmd, err, c.path)
		}
	}
	info, _, err := executeAny(NewAgent(), CreateAgent{ID: "agt_1", Name: "x"}, t0, rand.New(rand.NewPCG(1, 1)))
	if err != nil || info.(AgentInfo).SelectionMode != SelectionWeighted {
		t.Fatalf("default selection mode: %+v, %v", info, err)
	}
}

func TestCommandsBeforeCreationAreNotFound(t *testing.T) {
	_, _, err := executeAny(NewAgent(), CreateRun{}, t0, rand.New(rand.NewPCG(1, 1)))
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

func TestFinishAppendsSucceededSignal(t *testing.T) {
	for _, succeeded := range []bool{true, false} {
		h := newHarness(t)
		r := h.run(CreateRun{})
		at := t0.Add(-time.Hour)
		got := h.must(FinishRun{RunID: r.ID, Succeeded: succeeded, FinishedAt: at}).(Run)
		if !got.Finished || got.Succeeded != succeeded || !got.FinishedAt.Equal(at) {
			t.Fatalf("finished run = %+v", got)
		}
		sigs, _ := h.a.RunSignals(r.ID)
		want := 0.0
		if succeeded {
			want = 1
		}
		if len(sigs) != 1 || sigs[0].Kind != SucceededSignal || sigs[0].Value != want || !sigs[0].OccurredAt.Equal(at) {
			t.Fatalf("signals after finish = %+v", sigs)
		}
	}
}

func TestClaimAndTraceAreIdempotent(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	if !h.must(ClaimObject{RunID: r.ID, Object: "zendesk.ticket/42"}).(ClaimResult).Created {
		t.Fatal("first claim not created")
	}
	if h.must(ClaimObject{RunID: r.ID, Object: "zendesk.ticket/42"}).(ClaimResult).Created {
		t.Fatal("second claim of the same object created again")
	}
	tr := h.must(RegisterTrace{RunID: r.ID, TraceID: "tr-1"}).(TraceResult)
	if !tr.Created || tr.Trace.TurnID != "tr-1" {
		t.Fatalf("trace = %+v, want turn defaulting to the trace id", tr)
	}
	if h.must(RegisterTrace{RunID: r.ID, TraceID: "tr-1"}).(TraceResult).Created {
		t.Fatal("same trace registered twice")
	}
	if _, err := h.exec(RegisterTrace{RunID: r.ID, TraceID: "tr-1", TurnID: "other"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting turn: err = %v", err)
	}
	// A second trace of the run is found again past the first.
	if !h.must(RegisterTrace{RunID: r.ID, TraceID: "tr-2"}).(TraceResult).Created {
		t.Fatal("second trace not created")
	}
	if h.must(RegisterTrace{RunID: r.ID, TraceID: "tr-2"}).(TraceResult).Created {
		t.Fatal("second trace registered twice")
	}
	if _, err := h.exec(RegisterTrace{RunID: r.ID, TraceID: "tr-2", TurnID: "other"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflicting turn of the second trace: err = %v", err)
	}
	got, _ := h.a.Run(r.ID)
	if len(got.Claims) != 1 || len(got.Traces) != 2 {
		t.Fatalf("run has %d claims, %d traces", len(got.Claims), len(got.Traces))
	}
}

func TestDedupKeyRecordsOnce(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{})
	first := h.signal(RecordSignal{Kind: "human.rating", Value: 0.8, RunID: r.ID, DedupKey: "msg-19"})
	n := len(h.events)
	again := h.signal(RecordSignal{Kind: "human.rating", Value: 0.1, RunID: r.ID, DedupKey: "msg-19"})
	if !again.Duplicate || again.Signal.ID != first.Signal.ID || again.Signal.Value != 0.8 {
		t.Fatalf("repeat = %+v, want the first signal marked duplicate", again)
	}
	if len(h.events) != n {
		t.Fatal("a duplicate appended an event")
	}
	sigs, _ := h.a.RunSignals(r.ID)
	if len(sigs) != 1 {
		t.Fatalf("run has %d signals, want 1", len(sigs))
	}
}

func TestSessionSignalGoesToLatestFinishedRunAtReceipt(t *testing.T) {
	h := newHarness(t)
	older := h.run(CreateRun{SessionID: "s"})
	newer := h.run(CreateRun{SessionID: "s"})
	h.must(FinishRun{RunID: newer.ID, Succeeded: true, FinishedAt: t0.Add(-time.Minute)})
	h.must(FinishRun{RunID: older.ID, Succeeded: true, FinishedAt: t0.Add(-2 * time.Minute)})
	s := h.signal(RecordSignal{Kind: "human.rating", Value: 1, SessionID: "s"})
	if s.Signal.RunID != newer.ID {
		t.Fatalf("session signal went to %s, want the most recently finished %s", s.Signal.RunID, newer.ID)
	}
	// A run of the session finishing later does not take the earlier signal.
	third := h.run(CreateRun{SessionID: "s"})
	h.must(FinishRun{RunID: third.ID, Succeeded: true})
	sigs, _ := h.a.RunSignals(third.ID)
	if len(sigs) != 1 || sigs[0].Kind != SucceededSignal {
		t.Fatalf("third run signals = %+v, want only its run.succeeded", sigs)
	}
	later := h.signal(RecordSignal{Kind: "human.rating", Value: 1, SessionID: "s"})
	if later.Signal.RunID != third.ID {
		t.Fatalf("later session signal went to %s, want %s", later.Signal.RunID, third.ID)
	}
}

func TestObjectSignalReachesRunsThatClaimLater(t *testing.T) {
	h := newHarness(t)
	early := h.run(CreateRun{})
	h.must(ClaimObject{RunID: early.ID, Object: "zendesk.ticket/42"})
	s := h.signal(RecordSignal{Kind: "human.approval", Value: 1, Object: "zendesk.ticket/42"})
	if !reflect.DeepEqual(s.RunIDs, []string{early.ID}) {
		t.Fatalf("run_ids at receipt = %v", s.RunIDs)
	}
	late := h.run(CreateRun{})
	h.must(ClaimObject{RunID: late.ID, Object: "zendesk.ticket/42"})
	h.must(FinishRun{RunID: late.ID, Succeeded: true})
	rw, err := h.a.Reward(late.ID, -1, t0)
	if err != nil {
		t.Fatal(err)
	}
	// Default objective: human.approval 1 scaled [0,1] is the only term with
	// a value, so u = 1 and the value is 1.
	if rw.Status != objective.StatusScored || rw.Value == nil || *rw.Value != 1 {
		t.Fatalf("late claimer's reward = %+v", rw)
	}
}

func TestObjectiveVersions(t *testing.T) {
	h := newHarness(t)
	if ov, _ := h.a.Objective(-1); ov.Version != 0 || !reflect.DeepEqual(ov.Definition, objective.Default()) {
		t.Fatalf("before any PUT the current objective is %+v, want version 0 = default", ov)
	}
	def := objective.Default()
	def.HorizonS = 60
	for want := 1; want <= 2; want++ {
		ov := h.must(PutObjective{Definition: def, Note: "n"}).(ObjectiveVersion)
		if ov.Version != want {
			t.Fatalf("version = %d, want %d", ov.Version, want)
		}
	}
	if _, err := h.a.Objective(3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("version 3: err = %v", err)
	}
	if ov, _ := h.a.Objective(1); ov.Definition.HorizonS != 60 {
		t.Fatalf("version 1 = %+v", ov)
	}
}

func TestNewObjectiveRescoresHistory(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{Version: "3"})
	h.signal(RecordSignal{Kind: "human.rating", Value: 4, RunID: r.ID})
	h.must(FinishRun{RunID: r.ID, Succeeded: true})
	v0, _ := h.a.Reward(r.ID, -1, t0)
	def, err := objective.Parse([]byte(`{"terms":[{"signal":"human.rating","weight":1,"scale":[1,5]}]}`), "definition")
	if err != nil {
		t.Fatal(err)
	}
	h.must(PutObjective{Definition: def})
	v1, _ := h.a.Reward(r.ID, -1, t0)
	// v0 clamps the raw 4 to 1; v1 scales (4-1)/(5-1) = 0.75.
	if *v0.Value != 1 || *v1.Value != 0.75 || v1.ObjectiveVersion != 1 {
		t.Fatalf("v0 = %v, v1 = %v (version %d)", *v0.Value, *v1.Value, v1.ObjectiveVersion)
	}
	sum, _ := h.a.VersionRewards("3", -1, 20, t0.Add(8*24*time.Hour))
	if sum.Runs != 1 || sum.Matured != 1 || sum.Mean == nil || *sum.Mean != 0.75 {
		t.Fatalf("summary = %+v", sum)
	}
}

// buildHistory runs one of each command so replay and codec tests cover
// every event type.
func buildHistory(t *testing.T) *harness {
	h := newHarness(t)
	v := h.must(CreateVariation{Name: "concise", Config: `{"temperature":0.2}`}).(Variation)
	r1 := h.run(CreateRun{Version: "3", SessionID: "s", ExternalID: "ticket-9", ProfileID: "profile_1", Labels: map[string]string{"team": "a"}})
	r2 := h.run(CreateRun{Version: "3"})
	h.must(ClaimObject{RunID: r1.ID, Object: "zendesk.ticket/42"})
	h.must(ClaimObject{RunID: r2.ID, Object: "zendesk.ticket/42"})
	h.must(RegisterTrace{RunID: r1.ID, TraceID: "tr", TurnID: "t1"})
	h.signal(RecordSignal{Kind: "human.rating", Value: 0.8, RunID: r1.ID, DedupKey: "msg-19"})
	h.now = h.now.Add(time.Second)
	h.must(FinishRun{RunID: r1.ID, Succeeded: true})
	h.signal(RecordSignal{Kind: "human.approval", Value: 1, SessionID: "s", OccurredAt: t0.Add(-time.Hour)})
	h.signal(RecordSignal{Kind: "external.ticket_closed", Value: 1, Object: "zendesk.ticket/42"})
	def, err := objective.Parse([]byte(`{"horizon_s":172800,"terms":[{"signal":"human.rating","weight":0.5,"scale":[1,5]},{"signal":"external.ticket_closed","weight":0.5,"within_s":86400,"missing":0}]}`), "definition")
	if err != nil {
		t.Fatal(err)
	}
	h.must(PutObjective{Definition: def, Note: "seed"})
	score := -0.5
	h.must(RecordFeedback{RunID: r1.ID, Score: &score, Comment: "meh", ExternalID: "review-1",
		Labels: map[string]string{"source": "csat"}, ProfileID: "profile_1"})
	h.must(RecordFeedback{RunID: r1.ID})
	h.must(ReportReward{RunID: r1.ID, Kind: ReportReview, Scorer: "review", TraceID: "tr", Value: &score,
		Weight: 2, Detail: `{"why":"ok"}`, Started: 5})
	h.must(ReportReward{RunID: r1.ID, Kind: ReportChoice, Scorer: "choice", Weight: 1, Shown: `["a","b"]`,
		Chosen: `"a"`, Prompt: "pick", Started: 6})
	if got, _ := h.a.Variation(v.ID); r1.VariationID != v.ID || got.FeedbackCount != 2 {
		t.Fatalf("history: run variation %q, variation %+v", r1.VariationID, got)
	}
	return h
}

func TestReplayEqualsLiveState(t *testing.T) {
	h := buildHistory(t)
	replayed := replayAll(t, h.events)
	if !reflect.DeepEqual(replayed.Snapshot(), h.a.Snapshot()) {
		t.Fatal("replayed state differs from live state")
	}
	if err := replayed.Replay(uint64(len(h.events)+5), h.events[0]); err == nil {
		t.Fatal("replay accepted a sequence gap")
	}
}

// ReplayEncoded rebuilds from the log's encodings the agent that Replay
// rebuilds from the events, indexes included, and refuses what Replay
// refuses.
func TestReplayEncodedEqualsReplay(t *testing.T) {
	h := buildHistory(t)
	encoded := NewAgent()
	for i, ev := range h.events {
		if err := encoded.ReplayEncoded(uint64(i+1), AppendEvent(nil, ev)); err != nil {
			t.Fatalf("event %d (%T): %v", i+1, ev, err)
		}
	}
	if !sameAgent(encoded, replayAll(t, h.events)) {
		t.Fatal("agent replayed from encodings differs from the agent replayed from events")
	}
	next := uint64(len(h.events) + 1)
	runID := h.a.runs.id(0)
	signal := AppendEvent(nil, SignalRecorded{Signal: Signal{ID: "sig_01KB6ZQ2XJCQ3J0AWVMZ5ZQK7X", Kind: "k", RunID: runID}})
	for name, tc := range map[string]struct {
		seq uint64
		b   []byte
	}{
		"a sequence gap":                     {next + 1, signal},
		"a signal of a run it does not hold": {next, AppendEvent(nil, SignalRecorded{Signal: Signal{ID: "sig_x", Kind: "k", RunID: "run_gone"}})},
		"trailing bytes":                     {next, append(slices.Clip(signal), 0)},
		"a cut":                              {next, signal[:len(signal)-1]},
		"another format":                     {next, append([]byte{codecVersion + 1}, signal[1:]...)},
	} {
		before := encoded.Snapshot()
		if err := encoded.ReplayEncoded(tc.seq, tc.b); err == nil {
			t.Errorf("%s: replayed", name)
		}
		if !reflect.DeepEqual(encoded.Snapshot(), before) {
			t.Errorf("%s: the refused event changed the agent", name)
		}
	}
	if err := encoded.ReplayEncoded(next, signal); err != nil || encoded.LastSeq() != next || encoded.signals.At(encoded.signals.Len()-1).Seq != next {
		t.Fatalf("a signal after the history: %v, last seq %d", err, encoded.LastSeq())
	}
}

// A restore refuses signals numbered by runs other than the state's.
func TestRestoreRefusesSignalsOfOtherRuns(t *testing.T) {
	mine := newHarness(t)
	r := mine.run(CreateRun{})
	mine.signal(RecordSignal{Kind: "k", Value: 1, RunID: r.ID})
	for name, tc := range map[string]struct {
		runs  int
		shift time.Duration // 0: the same first run id as mine
	}{"another run": {1, time.Hour}, "one more run": {2, 0}} {
		other := newHarness(t)
		other.now = t0.Add(tc.shift)
		for range tc.runs {
			other.run(CreateRun{})
		}
		other.signal(RecordSignal{Kind: "k", Value: 1, RunID: other.a.runs.id(0)})
		st := mine.a.Snapshot()
		st.Signals = other.a.Snapshot().Signals
		if _, err := Restore(st); err == nil {
			t.Errorf("%s: restored", name)
		}
	}
}

func TestRestoreEqualsLiveState(t *testing.T) {
	h := buildHistory(t)
	restored, err := Restore(h.a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(restored.Snapshot(), h.a.Snapshot()) {
		t.Fatal("restored snapshot differs")
	}
	if !sameAgent(restored, h.a) {
		t.Fatal("restored agent (indexes included) differs from the live agent")
	}
}

// sameAgent reports whether two agents hold the same state, indexes
// included. The copy-on-write marks that views leave (on runs and reports)
// say which blocks a view may still hold, not what the agent is: they are
// left out.
func sameAgent(a, b *Agent) bool {
	x, y := *a, *b
	for _, c := range []*Agent{&x, &y} {
		if c.runs != nil {
			r := *c.runs
			r.recs.shared, r.extras.shared = nil, nil
			c.runs = &r
		}
		if c.reports != nil {
			r := *c.reports
			r.recs.shared, r.extras.shared = nil, nil
			c.reports = &r
		}
	}
	return reflect.DeepEqual(&x, &y)
}

// BenchmarkReward reads one run's reward under the seed objective, signals
// gathered from the run and a claimed object included.
func BenchmarkReward(b *testing.B) {
	def, err := objective.Parse([]byte(`{"horizon_s":172800,"guards":[{"signal":"run.succeeded","op":"lt","value":1}],
		"terms":[{"signal":"human.rating","weight":0.5,"scale":[1,5]},{"signal":"external.ticket_closed","weight":0.5,"within_s":86400,"missing":0}]}`), "definition")
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprint("signals=", n), func(b *testing.B) {
			h := newHarness(&testing.T{})
			r := h.run(CreateRun{})
			h.must(ClaimObject{RunID: r.ID, Object: "zendesk.ticket/42"})
			h.must(FinishRun{RunID: r.ID, Succeeded: true})
			h.must(PutObjective{Definition: def})
			for i := range n - 1 {
				if i%10 == 0 {
					h.signal(RecordSignal{Kind: "external.ticket_closed", Value: 1, Object: "zendesk.ticket/42"})
				} else {
					h.signal(RecordSignal{Kind: "human.rating", Value: float64(1 + i%5), RunID: r.ID})
				}
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := h.a.Reward(r.ID, -1, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestValidKind: the kind check agrees with the pattern it replaced,
// ^[a-zA-Z0-9_.-]{1,100}$, over edge cases and random strings.
func TestValidKind(t *testing.T) {
	pattern := regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,100}$`)
	cases := []string{"", "a", "human.rating", "A-Z_0.9", strings.Repeat("k", 100), strings.Repeat("k", 101),
		"with space", "ünï", "a/b", "a\x00", "-", ".", "tab\t"}
	rng := rand.New(rand.NewPCG(5, 6))
	const alphabet = "azAZ09_.-/ \x00é`{@[:" // each bound of each range, and one past it
	for range 2000 {
		b := make([]byte, rng.IntN(8))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		if got, want := validKind(s), pattern.MatchString(s); got != want {
			t.Fatalf("validKind(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}

// TestReplayRefusesObjectiveVersionsOutOfSequence: a log whose objective
// versions skip, repeat or start at 0 is damaged; replay says so rather than
// numbering the objectives wrongly (Objective(1) answering version 2's).
func TestReplayRefusesObjectiveVersionsOutOfSequence(t *testing.T) {
	def := objective.Default()
	tests := []struct {
		name     string
		versions []int // the last one must be refused
	}{
		{"first is 2", []int{2}},
		{"first is 0", []int{0}},
		{"1 twice", []int{1, 1}},
		{"1 then 3", []int{1, 3}},
	}
	for _, tt := range tests {
		a := NewAgent()
		if err := a.Replay(1, AgentCreated{Info: AgentInfo{ID: "agt_1", Workspace: "default", Name: "n", CreatedAt: t0}}); err != nil {
			t.Fatal(err)
		}
		var err error
		for i, v := range tt.versions {
			err = a.Replay(uint64(i+2), ObjectivePut{Version: v, Definition: def, CreatedAt: t0})
			if i < len(tt.versions)-1 && err != nil {
				t.Fatalf("%s: version %d: %v", tt.name, v, err)
			}
		}
		if err == nil {
			t.Errorf("%s: replay accepted objective version %d", tt.name, tt.versions[len(tt.versions)-1])
		}
		if ov, _ := a.Objective(-1); ov.Version != len(tt.versions)-1 {
			t.Errorf("%s: current objective after the refusal is version %d, want %d", tt.name, ov.Version, len(tt.versions)-1)
		}
	}
}

// TestSessionTieGoesToTheLaterCreatedRun: two runs of a session finished at
// the same instant; a session signal goes to the one created later, in
// whichever order they finished, live and after a restore, also when both
// were created in the same millisecond (their ids then in no order).
func TestSessionTieGoesToTheLaterCreatedRun(t *testing.T) {
	finishedAt := t0.Add(time.Hour)
	for _, tc := range []struct {
		laterFirst bool
		gap        time.Duration
		seed       uint64
	}{{false, time.Second, 0}, {true, time.Second, 0}, {false, 0, 1}, {true, 0, 2}, {false, 0, 3}, {true, 0, 4}} {
		laterFirst := tc.laterFirst
		h := newHarness(t)
		h.rnd = rand.New(rand.NewPCG(tc.seed, tc.seed))
		earlier := h.run(CreateRun{SessionID: "s"})
		h.now = h.now.Add(tc.gap)
		later := h.run(CreateRun{SessionID: "s"})
		order := []Run{earlier, later}
		if laterFirst {
			order = []Run{later, earlier}
		}
		for _, r := range order {
			h.must(FinishRun{RunID: r.ID, Succeeded: true, FinishedAt: finishedAt})
		}
		restored, err := Restore(h.a.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		for name, a := range map[string]*Agent{"live": h.a, "restored": restored} {
			h.a = a
			s := h.signal(RecordSignal{Kind: "human.rating", Value: 1, SessionID: "s"})
			if s.Signal.RunID != later.ID {
				t.Errorf("%s, later finished first %v: session signal went to %s, want the later-created %s",
					name, laterFirst, s.Signal.RunID, later.ID)
			}
		}
	}
}

// TestRunQueries: a run is found by its external id (an unknown one is
// ErrNotFound), its signals include those sent to an object it claimed, and
// signal times outside int64 nanoseconds (before 1678, after 2262) come back
// exactly as they were recorded.
func TestRunQueries(t *testing.T) {
	h := newHarness(t)
	r := h.run(CreateRun{ExternalID: "ticket-1"})
	if got, err := h.a.RunByExternalID("ticket-1"); err != nil || got.ID != r.ID {
		t.Fatalf("RunByExternalID(ticket-1) = %s, %v; want %s", got.ID, err, r.ID)
	}
	if _, err := h.a.RunByExternalID("ticket-2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("RunByExternalID(ticket-2) = %v; want ErrNotFound", err)
	}
	h.must(ClaimObject{RunID: r.ID, Object: "zendesk.ticket/42"})
	times := []time.Time{
		time.Date(1500, 3, 1, 12, 0, 0, 0, time.UTC),
		time.Date(2500, 3, 1, 12, 0, 0, 0, time.UTC),
		time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	h.signal(RecordSignal{Kind: "to.run", Value: 1, RunID: r.ID, OccurredAt: times[0]})
	h.signal(RecordSignal{Kind: "to.object", Value: 2, Object: "zendesk.ticket/42", OccurredAt: times[1]})
	h.signal(RecordSignal{Kind: "to.run", Value: 3, RunID: r.ID, OccurredAt: times[2]})
	sigs, err := h.a.RunSignals(r.ID)
	if err != nil || len(sigs) != 3 {
		t.Fatalf("signals of the run = %+v, %v; want the two sent to it and the one to its object", sigs, err)
	}
	for i, s := range sigs {
		if s.Value != float64(i+1) || !s.OccurredAt.Equal(times[i]) {
			t.Errorf("signal %d = value %v at %v; want %d at %v", i, s.Value, s.OccurredAt, i+1, times[i])
		}
	}
}

// TestReadsOfOneRunOrVersion: Objective(0) is version 0 even once others
// are published; a run's feedback is its own; a report of an infinite
// value is refused.
func TestReadsOfOneRunOrVersion(t *testing.T) {
	h := newHarness(t)
	h.must(PutObjective{Definition: mustParse(t, `{"terms": [{"signal": "a", "weight": 1}]}`)})
	if o, err := h.a.Objective(0); err != nil || o.Version != 0 {
		t.Fatalf("Objective(0) = version %d, %v; want 0", o.Version, err)
	}
	r1, r2 := h.run(CreateRun{}), h.run(CreateRun{})
	one, two := 1.0, 0.0
	h.must(RecordFeedback{RunID: r1.ID, Score: &one})
	h.must(RecordFeedback{RunID: r2.ID, Score: &two})
	if fb := h.a.RunFeedback(r1.ID); len(fb) != 1 || fb[0].RunID != r1.ID {
		t.Fatalf("feedback of run 1 = %+v; want its one record", fb)
	}
	inf := math.Inf(1)
	if _, err := h.exec(ReportReward{RunID: r1.ID, Kind: ReportExternal, Scorer: "ci", Value: &inf}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a report of +Inf: %v; want ErrInvalid", err)
	}
}

// replayAll rebuilds an agent from events, as recovery from the log does.
func replayAll(t *testing.T, events []Event) *Agent {
	t.Helper()
	a := NewAgent()
	for i, ev := range events {
		if err := a.Replay(uint64(i+1), ev); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// A snapshot view shares the agent's runs instead of copying them, so what
// the agent does next must not show in a view already taken: the actor
// encodes the view on another goroutine, after later commands ran.
func TestASnapshotViewIsNotChangedByLaterCommands(t *testing.T) {
	h := newHarness(t)
	session := h.run(CreateRun{SessionID: "s1", ExternalID: "ext-1"})
	h.must(ClaimObject{RunID: session.ID, Object: "zendesk.ticket/1"})
	h.must(RegisterTrace{RunID: session.ID, TraceID: "tr-1"})
	open := h.run(CreateRun{})
	h.must(ReportReward{RunID: open.ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(0.25), Weight: 1, Started: 1})
	view := h.a.Snapshot()
	before := AppendState(nil, view)

	h.must(ClaimObject{RunID: session.ID, Object: "zendesk.ticket/2"})
	h.must(RegisterTrace{RunID: session.ID, TraceID: "tr-2"})
	h.must(FinishRun{RunID: session.ID, Succeeded: true})
	h.must(ClaimObject{RunID: open.ID, Object: "zendesk.ticket/1"})
	h.must(ReportReward{RunID: open.ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(0.75), Weight: 1, Started: 2})
	h.must(FinishRun{RunID: open.ID, Succeeded: false})
	h.run(CreateRun{})

	if after := AppendState(nil, view); !slices.Equal(before, after) {
		t.Fatal("the view taken before later commands encodes differently after them")
	}
	if first := view.Runs.at(0); view.Runs.len() != 2 || first.Finished || len(first.Claims) != 1 || len(first.Traces) != 1 {
		t.Fatalf("the view's first run changed: %+v", first)
	}
	// The agent itself has moved on, and its indexes follow its runs.
	r, err := h.a.RunByExternalID("ext-1")
	if err != nil || !r.Finished || len(r.Claims) != 2 || len(r.Traces) != 2 {
		t.Fatalf("the run by its external id: %+v, %v; want it finished with two claims and traces", r, err)
	}
	sr := h.signal(RecordSignal{Kind: "human.rating", Value: 1, SessionID: "s1"})
	if sr.Signal.RunID != session.ID {
		t.Errorf("a session signal went to run %s, want the finished run %s", sr.Signal.RunID, session.ID)
	}
}

// One state is one snapshot: its reports come run by run in run order,
// whatever order the agent's maps keep them in, so taking, restoring and
// taking again encode the same bytes.
func TestSnapshotsOfOneStateEncodeTheSame(t *testing.T) {
	h := newHarness(t)
	for i := range 12 {
		r := h.run(CreateRun{})
		v := float64(i) / 12
		h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: &v, Weight: 1})
		if i%3 == 0 {
			h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "lint", Value: &v, Weight: 1})
		}
	}
	first := AppendState(nil, h.a.Snapshot())
	for range 5 {
		if again := AppendState(nil, h.a.Snapshot()); !slices.Equal(first, again) {
			t.Fatal("two snapshots of one state encode differently")
		}
	}
	restored, err := Restore(h.a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendState(nil, restored.Snapshot()); !slices.Equal(first, got) {
		t.Fatal("the restored agent's snapshot encodes differently")
	}
}
