package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// The three ways to rebuild an agent must agree: live (the agent the
// commands ran on), replayed (every event through Replay) and restored (a
// snapshot taken after any step, encoded and decoded, then the rest of the
// log replayed). Each scenario is a script of commands; after it runs, every
// query of every way is rendered and compared, and then the same probe
// commands (session and object signals, dedup repeats, a selection drawn
// with the same randomness, a late report, feedback) run on each way and
// their answers are compared too. A restored agent that only looks right
// but decides differently fails the probes.

// step is one command of a scenario, after the clock moved by advance.
type step struct {
	advance time.Duration
	cmd     any
}

type scenario struct {
	name  string
	steps []step
}

// ref lets a later step name a run or variation created by an earlier
// one: the script refers to "run#1" (the second CreateRun) and the harness
// substitutes the id, which depends on the randomness.
func ref(kind string, n int) string { return fmt.Sprintf("%s#%d", kind, n) }

var equivalenceScenarios = []scenario{
	{"claims of one object in one instant", []step{
		{0, CreateRun{}},
		{0, CreateRun{}},
		{0, CreateRun{}},
		{0, ClaimObject{RunID: ref("run", 1), Object: "zendesk.ticket/42"}},
		{0, ClaimObject{RunID: ref("run", 0), Object: "zendesk.ticket/42"}},
		{time.Second, ClaimObject{RunID: ref("run", 2), Object: "zendesk.ticket/42"}},
		{0, ClaimObject{RunID: ref("run", 2), Object: "zendesk.ticket/7"}},
		{0, ClaimObject{RunID: ref("run", 0), Object: "zendesk.ticket/7"}},
		{0, RecordSignal{Kind: "external.ticket_closed", Value: 1, Object: "zendesk.ticket/42"}},
		{time.Minute, RecordSignal{Kind: "human.rating", Value: 0.5, Object: "zendesk.ticket/7"}},
	}},
	{"sessions and finish ties", []step{
		{0, CreateRun{SessionID: "chat-7", Version: "3"}},
		{0, CreateRun{SessionID: "chat-7", Version: "3"}},
		{0, CreateRun{SessionID: "chat-8", Version: "4"}},
		{time.Second, FinishRun{RunID: ref("run", 1), Succeeded: true}},
		{0, FinishRun{RunID: ref("run", 0), Succeeded: false}},
		{0, RecordSignal{Kind: "human.rating", Value: 0.9, SessionID: "chat-7", DedupKey: "msg-1"}},
		{time.Second, FinishRun{RunID: ref("run", 2), Succeeded: true, FinishedAt: t0.Add(-time.Hour)}},
		{0, RecordSignal{Kind: "human.approval", Value: 1, SessionID: "chat-8"}},
		{0, RecordSignal{Kind: "human.rating", Value: 0.1, SessionID: "chat-7", DedupKey: "msg-1"}},
	}},
	{"variations, feedback and selection", []step{
		{0, CreateVariation{Name: "concise", Config: `{"temperature":0.2}`}},
		{0, CreateVariation{Name: "verbose"}},
		{0, CreateVariation{Name: "formal"}},
		{0, CreateRun{VariationID: ref("var", 0)}},
		{0, CreateRun{VariationID: ref("var", 1)}},
		{0, CreateRun{}},
		{0, CreateRun{ExternalID: "ticket-4521"}},
		{time.Second, RecordFeedback{RunID: ref("run", 0), Score: ptr(1)}},
		{0, RecordFeedback{RunID: ref("run", 0), Score: ptr(-0.5), Comment: "second reviewer"}},
		{0, RecordFeedback{RunID: ref("run", 1)}},
		{0, RecordFeedback{RunID: ref("run", 2), Score: ptr(0.3), Labels: map[string]string{"source": "csat"}}},
		{0, RecordFeedback{RunID: ref("run", 3), Score: ptr(0.9), ExternalID: "review-4521"}},
		{time.Minute, CreateRun{}},
		{0, RecordFeedback{RunID: ref("run", 4), Score: ptr(-1)}},
	}},
	{"reports replaced out of order", []step{
		{0, CreateRun{}},
		{0, CreateRun{}},
		{0, RegisterTrace{RunID: ref("run", 0), TraceID: "tr-1"}},
		{0, RegisterTrace{RunID: ref("run", 0), TraceID: "tr-2", TurnID: "turn-2"}},
		{0, ReportReward{RunID: ref("run", 0), Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(0.2), Weight: 1, Started: 1}},
		{time.Second, ReportReward{RunID: ref("run", 0), Kind: ReportReview, Scorer: "review", Value: ptr(1), Weight: 2, TraceID: "tr-2", Started: 2}},
		{time.Second, ReportReward{RunID: ref("run", 0), Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(0.9), Weight: 1, Started: 3}},
		{0, ReportReward{RunID: ref("run", 1), Kind: ReportChoice, Scorer: "choice", Weight: 1, Shown: `["a","b"]`, Chosen: `"b"`, Prompt: "pick", Started: 4}},
		{time.Second, ReportReward{RunID: ref("run", 0), Kind: ReportReview, Scorer: "review", Value: ptr(0), Weight: 2, TraceID: "tr-2", Started: 5}},
		{0, PutObjective{Definition: mustDefinition(`{"terms":[{"signal":"ci.tests","weight":1},{"signal":"review","weight":2}]}`)}},
		{0, FinishRun{RunID: ref("run", 0), Succeeded: true}},
	}},
	{"a report replaced after the horizon", []step{
		{0, CreateRun{Version: "1"}},
		{0, ReportReward{RunID: ref("run", 0), Kind: ReportExternal, Scorer: "ci", Value: ptr(0.3), Weight: 1, Started: 1}},
		{0, PutObjective{Definition: mustDefinition(`{"horizon_s":3600,"terms":[{"signal":"ci","weight":1}]}`)}},
		{0, FinishRun{RunID: ref("run", 0), Succeeded: true}},
		{10 * time.Minute, ReportReward{RunID: ref("run", 0), Kind: ReportExternal, Scorer: "ci", Value: ptr(0.6), Weight: 1, Started: 2}},
		{2 * time.Hour, ReportReward{RunID: ref("run", 0), Kind: ReportReview, Scorer: "ci", Value: ptr(0.9), Weight: 1, Started: 3}},
		{0, PutObjective{Definition: mustDefinition(`{"horizon_s":36000,"terms":[{"signal":"ci","weight":1}]}`)}},
		{time.Hour, ReportReward{RunID: ref("run", 0), Kind: ReportExternal, Scorer: "ci", Weight: 1, Detail: `{"why":"retracted"}`, Started: 4}},
		{0, CreateRun{Version: "1"}},
		{0, FinishRun{RunID: ref("run", 1), Succeeded: true}},
		{2 * time.Hour, ReportReward{RunID: ref("run", 1), Kind: ReportExternal, Scorer: "ci", Value: ptr(0.1), Weight: 1, Started: 5}},
	}},
	{"objective versions, late and windowed signals", []step{
		{0, CreateRun{Version: "3"}},
		{0, CreateRun{Version: "3"}},
		{0, CreateRun{Version: "4"}},
		{0, RecordSignal{Kind: "human.rating", Value: 4, RunID: ref("run", 0)}},
		{0, ClaimObject{RunID: ref("run", 1), Object: "zendesk.ticket/42"}},
		{time.Hour, FinishRun{RunID: ref("run", 0), Succeeded: true}},
		{0, FinishRun{RunID: ref("run", 1), Succeeded: false}},
		{0, PutObjective{Definition: mustDefinition(`{"horizon_s":172800,"guards":[{"signal":"run.succeeded","op":"lt","value":1}],
			"terms":[{"signal":"human.rating","weight":0.5,"scale":[1,5]},{"signal":"external.ticket_closed","weight":0.5,"within_s":86400,"missing":0}]}`),
			Note: "seed"}},
		{25 * time.Hour, RecordSignal{Kind: "external.ticket_closed", Value: 1, Object: "zendesk.ticket/42"}},
		{0, RecordSignal{Kind: "human.rating", Value: 2, RunID: ref("run", 0), OccurredAt: t0.Add(time.Minute)}},
		{48 * time.Hour, RecordSignal{Kind: "human.rating", Value: 5, RunID: ref("run", 0)}},
		{0, PutObjective{Definition: mustDefinition(`{"default":0.25,"terms":[{"signal":"human.rating","weight":1,"agg":"mean","scale":[1,5]}],"bounds":[0,10]}`)}},
		{0, ClaimObject{RunID: ref("run", 2), Object: "zendesk.ticket/42"}},
	}},
	// The compact signal log interns kinds, sessions and objects in one
	// table and stores times as Unix nanoseconds: a name used as a kind, a
	// session and an object, and the instant 0, must read back as sent.
	{"one name as kind, session and object; the epoch", []step{
		{0, CreateRun{SessionID: "human.rating"}},
		{0, CreateRun{}},
		{0, ClaimObject{RunID: ref("run", 1), Object: "human.rating"}},
		{time.Second, FinishRun{RunID: ref("run", 0), Succeeded: true}},
		{0, RecordSignal{Kind: "human.rating", Value: 1, RunID: ref("run", 1), OccurredAt: time.Unix(0, 0)}},
		{0, RecordSignal{Kind: "human.rating", Value: 2, Object: "human.rating", DedupKey: "human.rating"}},
		{time.Nanosecond, RecordSignal{Kind: "human.rating", Value: 3, SessionID: "human.rating", OccurredAt: t0.Add(-time.Nanosecond)}},
		{0, RecordSignal{Kind: "ci.tests", Value: math.Copysign(0, -1), RunID: ref("run", 0), DedupKey: "k2"}},
		{0, RecordSignal{Kind: "ci.tests", Value: 5, RunID: ref("run", 1), DedupKey: "k2"}},
		{0, CreateRun{}},
	}},
}

func mustDefinition(js string) objective.Definition {
	d, err := objective.Parse([]byte(js), "definition")
	if err != nil {
		panic(err)
	}
	return d
}

func TestLiveReplayedAndRestoredAgree(t *testing.T) {
	for _, sc := range equivalenceScenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, mode := range []string{SelectionWeighted, SelectionRandom} {
				live := runScript(t, sc, mode, len(sc.steps))
				now := live.now.Add(time.Hour)
				want := dump(live.a, now)
				wantProbes := probe(live.a, now)

				replayed := replayAll(t, live.events)
				compare(t, mode+": replayed", want, wantProbes, replayed, now)
				encoded := NewAgent()
				for i, ev := range live.events {
					if err := encoded.ReplayEncoded(uint64(i+1), AppendEvent(nil, ev)); err != nil {
						t.Fatalf("event %d replayed from its encoding: %v", i+1, err)
					}
				}
				compare(t, mode+": replayed from encodings", want, wantProbes, encoded, now)

				for k := 0; k <= len(sc.steps); k++ {
					at := runScript(t, sc, mode, k)
					st, err := DecodeState(AppendState(nil, at.a.Snapshot()))
					if err != nil {
						t.Fatal(err)
					}
					restored, err := Restore(st)
					if err != nil {
						t.Fatalf("restore after step %d: %v", k, err)
					}
					for i := len(at.events); i < len(live.events); i++ {
						if err := restored.ReplayEncoded(uint64(i+1), AppendEvent(nil, live.events[i])); err != nil {
							t.Fatalf("tail after a snapshot at step %d: %v", k, err)
						}
					}
					compare(t, fmt.Sprintf("%s: restored from a snapshot after step %d", mode, k), want, wantProbes, restored, now)
				}
			}
		})
	}
}

// compare fails on the first query or probe whose answer differs.
func compare(t *testing.T, way string, want []string, wantProbes []string, a *Agent, now time.Time) {
	t.Helper()
	got := dump(a, now)
	if i := firstDiff(want, got); i >= 0 {
		t.Fatalf("%s: query answers differ at\n got %s\nwant %s", way, at(got, i), at(want, i))
	}
	gotProbes := probe(a, now)
	if i := firstDiff(wantProbes, gotProbes); i >= 0 {
		t.Fatalf("%s: probe answers differ at\n got %s\nwant %s", way, at(gotProbes, i), at(wantProbes, i))
	}
}

func firstDiff(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(nothing)"
}

// scripted is a live run of a scenario's first steps.
type scripted struct {
	a      *Agent
	now    time.Time
	events []Event
}

// runScript runs the first n steps on a fresh agent with fixed randomness,
// so two runs of the same prefix produce the same events.
func runScript(t *testing.T, sc scenario, mode string, n int) scripted {
	t.Helper()
	s := scripted{a: NewAgent(), now: t0}
	rnd := rand.New(rand.NewPCG(7, 11))
	_, evs, err := s.a.CreateAgent(CreateAgent{ID: "agt_1", Workspace: "default", Name: "support", SelectionMode: mode}, s.now)
	if err != nil {
		t.Fatal(err)
	}
	s.events = append(s.events, evs...)
	var runs, variations []string
	for i, st := range sc.steps[:n] {
		s.now = s.now.Add(st.advance)
		cmd := resolveRefs(st.cmd, runs, variations)
		res, evs, err := executeAny(s.a, cmd, s.now, rnd)
		if err != nil {
			t.Fatalf("step %d %T: %v", i, cmd, err)
		}
		s.events = append(s.events, evs...)
		switch r := res.(type) {
		case CreatedRun:
			runs = append(runs, r.Run.ID)
		case Variation:
			variations = append(variations, r.ID)
		}
	}
	return s
}

func resolveRefs(cmd any, runs, variations []string) any {
	sub := func(s string) string {
		var n int
		switch {
		case strings.HasPrefix(s, "run#"):
			fmt.Sscanf(s, "run#%d", &n)
			return runs[n]
		case strings.HasPrefix(s, "var#"):
			fmt.Sscanf(s, "var#%d", &n)
			return variations[n]
		}
		return s
	}
	switch c := cmd.(type) {
	case CreateRun:
		c.VariationID = sub(c.VariationID)
		return c
	case FinishRun:
		c.RunID = sub(c.RunID)
		return c
	case ClaimObject:
		c.RunID = sub(c.RunID)
		return c
	case RegisterTrace:
		c.RunID = sub(c.RunID)
		return c
	case RecordSignal:
		c.RunID = sub(c.RunID)
		return c
	case RecordFeedback:
		c.RunID = sub(c.RunID)
		return c
	case ReportReward:
		c.RunID = sub(c.RunID)
		return c
	}
	return cmd
}

// dump renders the answer of every query the agent serves, one line each.
func dump(a *Agent, now time.Time) []string {
	var out []string
	add := func(query string, v any, err error) {
		b, jerr := json.Marshal(v)
		if jerr != nil {
			panic(jerr)
		}
		out = append(out, fmt.Sprintf("%s = %s (err %v)", query, b, err))
	}
	add("info", a.Info(), nil)
	add("created", a.Created(), nil)
	add("last seq", a.LastSeq(), nil)
	st := a.Snapshot()
	versions := len(st.Objectives)
	for v := -1; v <= versions+1; v++ {
		o, err := a.Objective(v)
		add(fmt.Sprintf("objective %d", v), o, err)
	}
	labels := map[string]bool{}
	objects := map[string]bool{}
	for r := range st.Runs.All() {
		labels[r.Version] = true
		run, err := a.Run(r.ID)
		add("run "+r.ID, run, err)
		if r.ExternalID != "" {
			byExt, err := a.RunByExternalID(r.ExternalID)
			add("run external "+r.ExternalID, byExt.ID, err)
		}
		sigs, err := a.RunSignals(r.ID)
		add("signals of "+r.ID, sigs, err)
		for _, s := range sigs {
			add("runs of signal "+s.ID, a.SignalRuns(s), nil)
		}
		for v := 0; v <= versions; v++ {
			rw, err := a.Reward(r.ID, v, now)
			add(fmt.Sprintf("reward of %s under %d", r.ID, v), rw, err)
		}
		reps, err := a.Reports(r.ID)
		add("reports of "+r.ID, reps, err)
		add("feedback of "+r.ID, a.RunFeedback(r.ID), nil)
		for _, cl := range r.Claims {
			objects[cl.Object] = true
		}
	}
	for _, l := range sortedKeys(labels) {
		for v := 0; v <= versions; v++ {
			sum, err := a.VersionRewards(l, v, 1000, now)
			add(fmt.Sprintf("version %q rewards under %d", l, v), sum, err)
		}
	}
	add("variations", a.Variations(), nil)
	for _, v := range st.Variations {
		got, err := a.Variation(v.ID)
		add("variation "+v.ID, got, err)
	}
	for _, f := range []FeedbackFilter{{}, {Sentiment: SentimentPositive}, {Sentiment: SentimentNegative},
		{Labels: map[string]string{"source": "csat"}}, {Query: "REVIEWER"}} {
		before := 0
		for page := 0; ; page++ {
			items, next := a.ListFeedback(f, before, 2)
			add(fmt.Sprintf("feedback %+v page %d", f, page), items, nil)
			if next == 0 {
				break
			}
			before = next
		}
	}
	for _, o := range sortedKeys(objects) {
		add("object "+o, a.SignalRuns(Signal{Object: o}), nil)
	}
	return out
}

// probe runs the same commands on the agent and renders their answers: they
// exercise what the indexes decide (sessions, objects, dedup keys, the
// posteriors behind selection, the standing reports).
func probe(a *Agent, now time.Time) []string {
	var out []string
	rnd := rand.New(rand.NewPCG(99, 100))
	run := func(name string, cmd any) {
		res, _, err := executeAny(a, cmd, now, rnd)
		b, jerr := json.Marshal(res)
		if jerr != nil {
			panic(jerr)
		}
		out = append(out, fmt.Sprintf("%s = %s (err %v)", name, b, err))
	}
	st := a.Snapshot()
	sessions, objects, dedups := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for r := range st.Runs.All() {
		if r.SessionID != "" {
			sessions[r.SessionID] = true
		}
		for _, cl := range r.Claims {
			objects[cl.Object] = true
		}
	}
	for s := range st.Signals.All() {
		if s.DedupKey != "" {
			dedups[s.DedupKey] = true
		}
	}
	for _, s := range sortedKeys(sessions) {
		run("session signal "+s, RecordSignal{Kind: "probe", Value: 1, SessionID: s})
	}
	for _, o := range sortedKeys(objects) {
		run("object signal "+o, RecordSignal{Kind: "probe", Value: 1, Object: o})
	}
	for _, k := range sortedKeys(dedups) {
		run("dedup repeat "+k, RecordSignal{Kind: "probe", Value: 2, Object: "probe/1", DedupKey: k})
	}
	for i := range 5 {
		run(fmt.Sprintf("selection %d", i), CreateRun{})
	}
	for r := range st.Runs.All() {
		run("finish "+r.ID, FinishRun{RunID: r.ID, Succeeded: true})
		run("late report on "+r.ID, ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci.tests", Value: ptr(0.5), Weight: 1, Started: 3})
		run("feedback on "+r.ID, RecordFeedback{RunID: r.ID, Score: ptr(0.75)})
	}
	run("selection after feedback", CreateRun{})
	return append(out, dump(a, now)...)
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestLongHistoriesAgreeAcrossBlocks is the three ways again over histories
// longer than a block (chunkLen) of runs, signals and feedback, with a
// snapshot inside the second block and one at the end: the views and the
// decoder cross block boundaries that the scenarios above never reach.
func TestLongHistoriesAgreeAcrossBlocks(t *testing.T) {
	var steps []step
	steps = append(steps, step{0, CreateVariation{Name: "short"}}, step{0, CreateVariation{Name: "long"}})
	n := 2*chunkLen + chunkLen/3
	for i := range n {
		steps = append(steps, step{time.Millisecond, CreateRun{SessionID: fmt.Sprintf("chat-%d", i%50)}})
		score := float64(i%5)/2 - 1
		fb := RecordFeedback{RunID: ref("run", i), Score: &score}
		if i%7 == 0 {
			fb.Comment = fmt.Sprintf("reviewer %d", i)
		}
		steps = append(steps, step{0, fb},
			step{0, RecordSignal{Kind: "latency_ms", Value: float64(i), RunID: ref("run", i), DedupKey: fmt.Sprintf("lat-%d", i)}})
	}
	sc := scenario{name: "long histories", steps: steps}
	live := runScript(t, sc, SelectionWeighted, len(steps))
	if got := live.a.feedback.Len(); got != n {
		t.Fatalf("%d feedback records, want %d", got, n)
	}
	now := live.now.Add(time.Hour)
	want, wantProbes := dump(live.a, now), probe(live.a, now) // probe adds feedback of its own
	compare(t, "replayed", want, wantProbes, replayAll(t, live.events), now)
	for _, k := range []int{len(steps) / 2, len(steps)} {
		at := runScript(t, sc, SelectionWeighted, k)
		st, err := DecodeState(AppendState(nil, at.a.Snapshot()))
		if err != nil {
			t.Fatal(err)
		}
		restored, err := Restore(st)
		if err != nil {
			t.Fatalf("restore after step %d: %v", k, err)
		}
		for i := len(at.events); i < len(live.events); i++ {
			if err := restored.Replay(uint64(i+1), live.events[i]); err != nil {
				t.Fatalf("tail after a snapshot at step %d: %v", k, err)
			}
		}
		compare(t, fmt.Sprintf("restored from a snapshot after step %d", k), want, wantProbes, restored, now)
	}
}
