package objective

import (
	"cmp"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func reward(id string, status Status, value *float64, matured bool) Reward {
	return Reward{RunID: id, ObjectiveVersion: 2, Status: status, Value: value, Matured: matured}
}

func TestSummarize(t *testing.T) {
	rewards := []Reward{
		reward("r1", StatusScored, f(0.9), true),
		reward("r2", StatusGuarded, f(0), true),
		reward("r3", StatusExcluded, nil, true),
		reward("r4", StatusScored, f(0.1), false), // unmatured: counted, not averaged or listed
		reward("r6", StatusScored, f(0.3), true),
		reward("r5", StatusScored, f(0.3), true), // ties with r6, listed first by RunID
	}
	s := Summarize("v3", 2, [2]float64{0, 1}, rewards, 3)
	if s.Version != "v3" || s.ObjectiveVersion != 2 || s.Runs != 6 || s.Matured != 5 ||
		s.Scored != 4 || s.Guarded != 1 || s.Excluded != 1 {
		t.Fatalf("counts: %+v", s)
	}
	// mean over r1, r2, r5, r6 = (0.9 + 0 + 0.3 + 0.3) / 4 = 0.375
	if s.Mean == nil || *s.Mean != (0.9+0+0.3+0.3)/4 {
		t.Fatalf("mean %v", show(s.Mean))
	}
	var ids []string
	for _, r := range s.Lowest {
		ids = append(ids, r.RunID)
	}
	if got := strings.Join(ids, " "); got != "r2 r5 r6" {
		t.Fatalf("lowest %q, want r2 r5 r6", got)
	}
}

func TestSummarizeWithoutMaturedValues(t *testing.T) {
	s := Summarize("v1", 0, [2]float64{0, 1}, []Reward{reward("r1", StatusScored, f(1), false), reward("r2", StatusExcluded, nil, true)}, 0)
	if s.Mean != nil || len(s.Lowest) != 0 || s.Matured != 1 {
		t.Fatalf("got %+v", s)
	}
	const want = `{"version":"v1","objective_version":0,"runs":2,"matured":1,"scored":1,"guarded":0,"excluded":1,"mean":null,"lowest":[],` +
		`"histogram":{"bounds":[0,1],"matured":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"unmatured":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1]}}`
	if got := string(s.AppendJSON(nil)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestSummarizeLimit(t *testing.T) {
	var rewards []Reward
	for i := range 25 {
		rewards = append(rewards, reward("r"+strconv.Itoa(100+i), StatusScored, f(float64(25-i)), true))
	}
	for _, tt := range []struct{ limit, want int }{{0, 20}, {-1, 20}, {5, 5}, {100, 25}} {
		s := Summarize("v", 1, [2]float64{0, 1}, rewards, tt.limit)
		if len(s.Lowest) != tt.want || *s.Lowest[0].Value != 1 {
			t.Errorf("limit %d: %d lowest starting at %v", tt.limit, len(s.Lowest), show(s.Lowest[0].Value))
		}
		out := s.AppendJSON(nil)
		var parsed struct{ Lowest []json.RawMessage }
		if err := json.Unmarshal(out, &parsed); err != nil || len(parsed.Lowest) != tt.want {
			t.Errorf("limit %d: %v, %d rendered", tt.limit, err, len(parsed.Lowest))
		}
	}
}

// TestSummarizeLowestIsTheSortedPrefix: over random values with many ties,
// Lowest is exactly the first limit matured rewards in (value, run id)
// order, whatever order they come in.
func TestSummarizeLowestIsTheSortedPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		n, limit := rng.IntN(60), 1+rng.IntN(25)
		var rewards []Reward
		for i := range n {
			id := "r" + strconv.Itoa(rng.IntN(1000)*1000+i) // unique, in no order
			rewards = append(rewards, reward(id, StatusScored, f(float64(rng.IntN(5))), rng.IntN(4) > 0))
		}
		var want []Reward
		for _, r := range rewards {
			if r.Matured {
				want = append(want, r)
			}
		}
		slices.SortFunc(want, func(a, b Reward) int {
			return cmp.Or(cmp.Compare(*a.Value, *b.Value), cmp.Compare(a.RunID, b.RunID))
		})
		want = want[:min(limit, len(want))]
		got := Summarize("v", 1, [2]float64{0, 1}, rewards, limit).Lowest
		if len(got) != len(want) {
			t.Fatalf("round %d: %d lowest, want %d", round, len(got), len(want))
		}
		for i := range got {
			if got[i].RunID != want[i].RunID {
				t.Fatalf("round %d: lowest[%d] = %s, want %s", round, i, got[i].RunID, want[i].RunID)
			}
		}
	}
}

// TestSummaryHistogram: bins are equal slices of the bounds, closed at hi;
// matured bins count what the mean averages, unmatured ones every value
// that may still move.
func TestSummaryHistogram(t *testing.T) {
	bounds := [2]float64{-1, 1} // bins 0.1 wide
	for _, c := range []struct {
		name      string
		r         Reward
		matured   int // bin, -1 for none
		unmatured int
	}{
		{"lower bound, guarded", reward("a", StatusGuarded, f(-1), true), 0, -1},
		{"upper bound", reward("b", StatusScored, f(1), true), HistogramBins - 1, -1},
		{"a bin's lower edge belongs to it", reward("c", StatusScored, f(0), true), 10, -1},
		{"just below an edge", reward("d", StatusScored, f(-0.0001), true), 9, -1},
		{"unmatured", reward("e", StatusScored, f(0.55), false), -1, 15},
		{"excluded: no value", reward("f", StatusExcluded, nil, true), -1, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := Summarize("v", 1, bounds, []Reward{c.r}, 0).Histogram
			var want Histogram
			want.Bounds = bounds
			if c.matured >= 0 {
				want.Matured[c.matured] = 1
			}
			if c.unmatured >= 0 {
				want.Unmatured[c.unmatured] = 1
			}
			if h != want {
				t.Fatalf("got %+v\nwant %+v", h, want)
			}
		})
	}
}

// TestHistogramBinsOfTheWidestBounds: bounds whose width overflows a double
// still cut into equal bins (each value used to fall in bin 0).
func TestHistogramBinsOfTheWidestBounds(t *testing.T) {
	h := Histogram{Bounds: [2]float64{-math.MaxFloat64, math.MaxFloat64}}
	for _, c := range []struct {
		v    float64
		want int
	}{{-math.MaxFloat64, 0}, {0, HistogramBins / 2}, {math.MaxFloat64 / 2, HistogramBins * 3 / 4}, {math.MaxFloat64, HistogramBins - 1}} {
		if got := h.Bin(c.v); got != c.want {
			t.Errorf("Bin(%g) = %d, want %d", c.v, got, c.want)
		}
	}
}
