package engine

import (
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkSelectVariation8 is one run creation by Thompson sampling over 8
// variations with feedback: the engine's share of a selection, next to
// BenchmarkSampleBeta's one draw (8 draws are its floor). The agent is the
// shape bench.NewSelectAgent makes: 3 scored runs per variation, the scores
// spread from -1 for the first to +1 for the last. Execute applies each run,
// so the agent grows by one run per iteration, as a served agent does.
func BenchmarkSelectVariation8(b *testing.B) {
	const variations, feedback = 8, 3
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	rnd := rand.New(rand.NewPCG(1, 2))
	a := NewAgent()
	exec := func(cmd any) any {
		res, _, err := executeAny(a, cmd, now, rnd)
		if err != nil {
			b.Fatalf("%T: %v", cmd, err)
		}
		return res
	}
	exec(CreateAgent{ID: "agt_bench", Workspace: "default", Name: "bench-select"})
	for i := range variations {
		v := exec(CreateVariation{Name: "v" + string(rune('1'+i))}).(Variation)
		score := -1 + 2*float64(i)/(variations-1)
		for range feedback {
			r := exec(CreateRun{VariationID: v.ID}).(CreatedRun)
			exec(RecordFeedback{RunID: r.Run.ID, Score: &score})
		}
	}
	for b.Loop() {
		res, _, err := executeAny(a, CreateRun{}, now, rnd)
		if err != nil {
			b.Fatal(err)
		}
		if res.(CreatedRun).Variation == nil {
			b.Fatal("no variation selected")
		}
	}
}
