package engine

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// minuteHorizon is an agent whose objective (version 1) scores
// human.rating on [1,5] and matures a run a minute after it finished.
func minuteHorizon(t *testing.T) *harness {
	h := newHarness(t)
	def, err := objective.Parse([]byte(`{"horizon_s":60,"terms":[{"signal":"human.rating","weight":1,"scale":[1,5]}]}`), "definition")
	if err != nil {
		t.Fatal(err)
	}
	h.must(PutObjective{Definition: def})
	return h
}

// TestVersionSummaryReadAgainIsWhatAFreshReadGives reads summaries of one
// agent as its state and the clock move, each beside the same read of a
// copy restored from its snapshot, which has never summarised anything.
func TestVersionSummaryReadAgainIsWhatAFreshReadGives(t *testing.T) {
	h := minuteHorizon(t)
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
	// r1 matures at 60 s and r3 is unfinished: the first sets when the
	// summary read at 10 s stops holding, the second must not undo it.
	check("an unfinished run after a maturing one", read{"3", -1, 20, 10 * time.Second}, read{"3", -1, 20, 60 * time.Second})
	h.must(FinishRun{RunID: r3.ID, Succeeded: false})
	check("it finishes", read{"3", -1, 20, 61 * time.Second}, read{"3", -1, 20, 2 * time.Hour})
}

// TestVersionSummaryReadAgainIsNotComputedAgain checks which reads are
// answered from an earlier computation.
func TestVersionSummaryReadAgainIsNotComputedAgain(t *testing.T) {
	h := minuteHorizon(t)
	old := h.run(CreateRun{Version: "3"})
	h.must(FinishRun{RunID: old.ID, Succeeded: true, FinishedAt: t0.Add(-time.Hour)}) // matured
	r1 := h.run(CreateRun{Version: "3"})
	h.must(FinishRun{RunID: r1.ID, Succeeded: true}) // matures at t0 + 60 s

	type read struct {
		limit  int
		at     time.Duration // after t0
		cached bool          // answered from an earlier computation
	}
	steps := []struct {
		name  string
		event any // applied before the reads
		reads []read
	}{
		{"first read", nil, []read{{20, 10 * time.Second, false}}},
		{"again", nil, []read{{20, 20 * time.Second, true}}},
		{"another limit keeps the first", nil, []read{{1, 20 * time.Second, false}, {20, 20 * time.Second, true}}},
		{"a run matures, the other limit holds until it is read", nil, []read{{20, 60 * time.Second, false}, {1, 30 * time.Second, true}}},
		{"nothing left to mature", nil, []read{{20, time.Hour, true}}},
		{"an event", RecordSignal{Kind: "human.rating", Value: 2, RunID: r1.ID}, []read{{20, time.Hour, false}, {20, time.Hour, true}}},
	}
	for _, st := range steps {
		if st.event != nil {
			h.must(st.event)
		}
		for _, r := range st.reads {
			key := summaryKey{version: "3", objective: 1, limit: r.limit}
			_, cached := h.a.summaries.get(h.a.seq, key, t0.Add(r.at))
			if cached != r.cached {
				t.Fatalf("%s: limit %d at %v: cached %v, want %v", st.name, r.limit, r.at, cached, r.cached)
			}
			if _, err := h.a.VersionRewards("3", -1, r.limit, t0.Add(r.at)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestASummaryTakenButNotComputedServesOnlyTheReadsItHolds takes a summary,
// and before anyone computes it, asks again past the maturity of a run it
// counts: the second read shares the view but not the first one's answer.
func TestASummaryTakenButNotComputedServesOnlyTheReadsItHolds(t *testing.T) {
	h := minuteHorizon(t)
	r := h.run(CreateRun{Version: "3"})
	h.signal(RecordSignal{Kind: "human.rating", Value: 4, RunID: r.ID})
	h.must(FinishRun{RunID: r.ID, Succeeded: true}) // matures at t0 + 60 s
	fresh, err := Restore(h.a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	early, late := t0.Add(10*time.Second), t0.Add(61*time.Second)
	first, err := h.a.VersionSummary("3", -1, 20, early)
	if err != nil {
		t.Fatal(err)
	}
	second, err := h.a.VersionSummary("3", -1, 20, late)
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Fatal("a read while the summary is not computed yet took a view of its own")
	}
	for _, at := range []time.Time{late, early, late} {
		want, _ := fresh.VersionRewards("3", -1, 20, at)
		if got := first.At(at); !reflect.DeepEqual(got, want) {
			t.Fatalf("at %v: %+v, a fresh read %+v", at.Sub(t0), got, want)
		}
	}
	if want, _ := fresh.VersionRewards("3", -1, 20, early); want.Matured != 0 {
		t.Fatalf("the early read counts %d matured runs: the test reads nothing that matures", want.Matured)
	}
}

// TestAVersionSummaryIsComputedBesideTheAgent computes a summary on other
// goroutines while the agent applies events touching every source of its
// runs' rewards: their signals, the objects they claim and their signals,
// their reports (replaced in place), finishes, new runs of the version.
// Every computation gives what a fresh read at the moment of the view
// gives; under -race, it also shows that the view shares nothing the agent
// writes.
func TestAVersionSummaryIsComputedBesideTheAgent(t *testing.T) {
	h := newHarness(t)
	def, err := objective.Parse([]byte(`{"horizon_s":60,"terms":[{"signal":"human.rating","weight":1,"scale":[1,5]},{"signal":"ci","weight":1,"scale":[0,1]}]}`), "definition")
	if err != nil {
		t.Fatal(err)
	}
	h.must(PutObjective{Definition: def})
	var runs []Run
	for i := range 30 {
		r := h.run(CreateRun{Version: "3"})
		runs = append(runs, r)
		h.signal(RecordSignal{Kind: "human.rating", Value: float64(1 + i%5), RunID: r.ID})
		if i%3 == 0 {
			obj := fmt.Sprintf("ticket/%d", i)
			h.must(ClaimObject{RunID: r.ID, Object: obj})
			h.signal(RecordSignal{Kind: "human.rating", Value: 5, Object: obj})
		}
		if i%4 == 0 {
			v := float64(i%2) / 2
			h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: &v, Weight: 1})
		}
		if i%2 == 0 {
			h.must(FinishRun{RunID: r.ID, Succeeded: true})
		}
	}
	fresh, err := Restore(h.a.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	now, back := h.now.Add(time.Second), h.now.Add(-time.Second) // back: before the view, so computed afresh each time
	want, _ := fresh.VersionRewards("3", -1, 5, now)
	wantBack, _ := fresh.VersionRewards("3", -1, 5, back)
	s, err := h.a.VersionSummary("3", -1, 5, now)
	if err != nil {
		t.Fatal(err)
	}

	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for n := 0; ; n++ {
				if got := s.At(now); !reflect.DeepEqual(got, want) {
					errs <- fmt.Errorf("computation %d: %+v, want %+v", n, got, want)
					return
				}
				if got := s.At(back); !reflect.DeepEqual(got, wantBack) {
					errs <- fmt.Errorf("computation %d, read earlier: %+v, want %+v", n, got, wantBack)
					return
				}
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
			}
		}()
	}
	for i := range 300 {
		r := runs[i%len(runs)]
		h.signal(RecordSignal{Kind: "human.rating", Value: 1, RunID: r.ID})
		obj := fmt.Sprintf("ticket/%d", i%len(runs))
		if i < len(runs) {
			h.must(ClaimObject{RunID: r.ID, Object: obj + "/late"})
		}
		h.signal(RecordSignal{Kind: "human.rating", Value: 1, Object: obj})
		v := 1.0
		h.must(ReportReward{RunID: r.ID, Kind: ReportExternal, Scorer: "ci", Value: &v, Weight: 1})
		if i%2 == 1 {
			h.exec(FinishRun{RunID: r.ID, Succeeded: false}) // refused once finished
		}
		h.run(CreateRun{Version: "3"})
	}
	close(stop)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if live, _ := h.a.VersionRewards("3", -1, 5, now); reflect.DeepEqual(live, want) {
		t.Fatal("the events after the view changed nothing in the agent's summary: the test shows nothing")
	}
}

// TestTheAgentDoesNotWaitForASummaryBeingComputed: while a reader computes a
// summary, the agent's actor asking for the same summary gets it at once:
// it must not wait out the computation, as the readers do.
func TestTheAgentDoesNotWaitForASummaryBeingComputed(t *testing.T) {
	h := minuteHorizon(t)
	for i := range 20000 {
		r := h.run(CreateRun{Version: "3"})
		if i%4 == 0 {
			h.signal(RecordSignal{Kind: "human.rating", Value: 4, RunID: r.ID})
		}
	}
	for limit := 1; limit <= 20; limit++ {
		s, err := h.a.VersionSummary("3", -1, limit, h.now)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { s.At(h.now); close(done) }()
		missed := false
		for !missed && s.first.TryLock() { // until the reader holds it: it is computing
			s.first.Unlock()
			select {
			case <-done:
				missed = true // computed before the test saw it start: try again
			default:
			}
		}
		if missed {
			continue
		}
		again, err := h.a.VersionSummary("3", -1, limit, h.now)
		if err != nil || again != s {
			t.Fatalf("asked again during the computation: %p, %v; want the same summary %p", again, err, s)
		}
		computing := !s.first.TryLock()
		if !computing {
			s.first.Unlock()
		}
		<-done
		if computing {
			return // the agent got it while the reader still computed
		}
	}
	t.Fatal("in 20 tries, the agent never got a summary back before its computation ended")
}
