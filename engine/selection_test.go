package engine

import (
	"math/rand/v2"
	"testing"
)

// scored gives variation v feedback on runs pinned to it: plus × +1 and
// minus × -1, so its posterior is Beta(1+plus, 1+minus).
func (h *harness) scored(v Variation, plus, minus int) {
	h.t.Helper()
	for range plus {
		h.must(RecordFeedback{RunID: h.run(CreateRun{VariationID: v.ID}).ID, Score: ptr(1)})
	}
	for range minus {
		h.must(RecordFeedback{RunID: h.run(CreateRun{VariationID: v.ID}).ID, Score: ptr(-1)})
	}
}

// TestSelectionSharesMatchProbabilityOfBeingBest: Thompson sampling picks
// each variation as often as it is the best under the posteriors. The
// shares of many selections are held against ProbBest's Monte Carlo
// estimate with a chi-square test (fixed seeds, so the test is
// deterministic; the bound is the 0.1% critical value).
func TestSelectionSharesMatchProbabilityOfBeingBest(t *testing.T) {
	tests := []struct {
		name  string
		score [][2]int // per variation: +1 and -1 feedback counts
		chi2  float64  // critical value at 0.1% for len(score)-1 degrees of freedom
	}{
		{"close rivals", [][2]int{{6, 4}, {4, 3}, {2, 2}}, 13.82},
		{"a leader and an unknown", [][2]int{{20, 8}, {0, 0}}, 10.83},
		{"four spread", [][2]int{{9, 3}, {5, 5}, {3, 1}, {1, 4}}, 16.27},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			vs := make([]Variation, len(tc.score))
			for i, s := range tc.score {
				vs[i] = h.variation(string(rune('a' + i)))
				h.scored(vs[i], s[0], s[1])
			}
			want := ProbBest(h.a.Variations(), probBestBudget, rand.New(rand.NewPCG(3, 4)))
			const n = 4000
			idx := map[string]int{}
			for i, v := range vs {
				idx[v.ID] = i
			}
			got := make([]int, len(vs))
			for range n {
				// The runs are not given feedback: the posteriors stay put.
				got[idx[h.run(CreateRun{}).VariationID]]++
			}
			chi2 := 0.0
			for i, p := range want {
				e := p * n
				d := float64(got[i]) - e
				chi2 += d * d / e
			}
			if chi2 > tc.chi2 {
				t.Fatalf("selections %v of %d against P(best) %.3f: chi-square %.1f > %.2f", got, n, want, chi2, tc.chi2)
			}
		})
	}
}

// TestWiderPosteriorIsStillExplored: a variation with a worse posterior
// mean but a wider posterior may still be the best, so selection keeps
// trying it, as often as it is the best.
func TestWiderPosteriorIsStillExplored(t *testing.T) {
	h := newHarness(t)
	known, fresh := h.variation("known"), h.variation("fresh")
	h.scored(known, 29, 19) // Beta(30, 20): mean 0.6, narrow
	// fresh stays Beta(1, 1): mean 0.5, the widest there is.
	const n = 2000
	explored := 0
	for range n {
		if h.run(CreateRun{}).VariationID == fresh.ID {
			explored++
		}
	}
	// P(fresh is best) = P(U > Beta(30, 20)) = 0.4; 4 standard deviations
	// of 2000 draws is ±88.
	if explored < 712 || explored > 888 {
		t.Fatalf("the wider, worse-mean variation was chosen %d of %d times, want about 800", explored, n)
	}
}
