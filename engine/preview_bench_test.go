package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// BenchmarkPreview previews a draft over 100,000 runs of 10 signals each
// and reports how long one step holds the agent (its owner, the actor,
// serves nothing else meanwhile): the mean and the longest, in
// milliseconds, beside the whole preview's time per op. The longest steps
// are the collector's and the scheduler's, not the evaluation's: p99 is the
// figure to hold against the budget.
func BenchmarkPreview(b *testing.B) {
	const runs = 100000
	a, now := benchHistory(b, runs)
	draft := mustParse(b, previewDraft)
	var steps int

	var total, longest time.Duration
	var all []time.Duration
	for b.Loop() {
		p, err := a.StartPreview(PreviewObjective{Definition: draft}, now)
		if err != nil {
			b.Fatal(err)
		}
		for done := false; !done; {
			start := time.Now()
			done = p.Step(PreviewStepBudget)
			d := time.Since(start)
			steps++
			total += d
			longest = max(longest, d)
			all = append(all, d)
		}
		if res := p.Result(); res.Draft.Runs != runs {
			b.Fatalf("%d runs previewed, want %d", res.Draft.Runs, runs)
		}
		p.Close()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(steps), "ms/step")
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms/step")
	b.ReportMetric(float64(longest.Microseconds())/1000, "max-ms/step")
	b.ReportMetric(float64(steps)/float64(b.N), "steps/op")
}

// benchHistory is an agent with runs runs of 10 signals each (nine posted,
// run.succeeded at the finish), in three version labels, all matured at the
// instant it returns.
func benchHistory(b *testing.B, runs int) (*Agent, time.Time) {
	const perRun = 10
	a := NewAgent()
	now := t0
	rnd := rand.New(rand.NewPCG(1, 2))
	must := func(_ any, _ []Event, err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(a.CreateAgent(CreateAgent{ID: "agt_1", Workspace: "default", Name: "bench"}, now))
	must(a.PutObjective(PutObjective{Definition: mustParse(b, previewCurrent)}, now))
	kinds := []string{"human.rating", "external.ticket_closed", "ci.tests", "feedback", "custom.reply_sent"}
	for i := range runs {
		now = now.Add(time.Second)
		cr, _, err := a.CreateRun(CreateRun{Version: fmt.Sprint(i % 3)}, now, rnd)
		if err != nil {
			b.Fatal(err)
		}
		for j := range perRun - 1 {
			must(a.RecordSignal(RecordSignal{Kind: kinds[j%len(kinds)], Value: float64(1 + rnd.IntN(5)), RunID: cr.Run.ID}, now, rnd))
		}
		must(a.FinishRun(FinishRun{RunID: cr.Run.ID, Succeeded: i%7 > 0}, now, rnd)) // the tenth signal: run.succeeded
	}
	return a, now.Add(48 * time.Hour)
}

// BenchmarkVersionRewards is the version summary of one label of 30,000
// runs (10,000 of them), computed each time.
func BenchmarkVersionRewards(b *testing.B) {
	a, now := benchHistory(b, 30000)
	b.ReportAllocs()
	for b.Loop() {
		a.summaries = summaryCache{}
		if _, err := a.VersionRewards("1", -1, 20, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVersionSummaryView is the share of BenchmarkVersionRewards that
// holds the agent: taking the view its runs are evaluated from.
func BenchmarkVersionSummaryView(b *testing.B) {
	a, now := benchHistory(b, 30000)
	b.ReportAllocs()
	for b.Loop() {
		a.summaries = summaryCache{}
		if _, err := a.VersionSummary("1", -1, 20, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVersionRewardsAgain is the same summary read again with nothing
// applied in between.
func BenchmarkVersionRewardsAgain(b *testing.B) {
	a, now := benchHistory(b, 30000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.VersionRewards("1", -1, 20, now); err != nil {
			b.Fatal(err)
		}
	}
}
