package objective

import (
	"cmp"
	"math"
	"slices"
)

// Summary aggregates the rewards of one agent version's runs.
type Summary struct {
	Version          string
	ObjectiveVersion int
	Runs             int
	Matured          int
	Scored           int
	Guarded          int
	Excluded         int
	Mean             *float64 // nil when no matured run is scored or guarded
	Lowest           []Reward
	Histogram        Histogram
}

// HistogramBins is how many equal bins a Histogram cuts the bounds into.
const HistogramBins = 20

// Histogram counts rewards by value in HistogramBins equal bins over the
// objective's bounds: bin i holds values in [lo + i·w, lo + (i+1)·w), the
// last bin also hi (w = (hi − lo)/HistogramBins). Values lie within the
// bounds by construction; a guarded run's value, lo, falls in bin 0.
type Histogram struct {
	Bounds [2]float64
	// Matured counts the rewards Mean averages: matured, scored or guarded.
	// They sum to the mean's denominator.
	Matured [HistogramBins]int
	// Unmatured counts the rewards with a value that may still move.
	Unmatured [HistogramBins]int
}

// Bin returns the bin of value v.
func (h *Histogram) Bin(v float64) int {
	lo, hi := h.Bounds[0], h.Bounds[1]
	num, den := v-lo, hi-lo
	if math.IsInf(den, 0) { // bounds wider than MaxFloat64; halves cannot overflow
		num, den = v/2-lo/2, hi/2-lo/2
	}
	i := int(num / den * HistogramBins)
	return min(max(i, 0), HistogramBins-1)
}

const defaultLowest = 20

// Summarize aggregates the rewards of one agent version's runs under an
// objective with the given bounds, as a Summarizer fed them in order does.
func Summarize(version string, objectiveVersion int, bounds [2]float64, rewards []Reward, limit int) Summary {
	z := NewSummarizer(version, objectiveVersion, bounds, limit)
	for i := range rewards {
		z.Add(&rewards[i])
	}
	return z.Summary()
}

// A Summarizer aggregates rewards one at a time, keeping none but the
// lowest, so a summary of n runs holds limit rewards, not n:
//   - Runs counts every reward, and Scored, Guarded and Excluded count their
//     statuses over all runs, matured or not; Matured counts matured runs.
//   - Mean is the arithmetic mean of Value over matured runs that are scored
//     or guarded. Unmatured runs stay out because their rewards may still move.
//   - Lowest holds the matured runs with a value, ascending by Value, ties by
//     RunID, at most limit of them (limit ≤ 0 means 20).
//   - Histogram counts the values of the matured runs Mean averages and of
//     the unmatured runs with a value.
//
// The result does not depend on the order rewards are added in.
type Summarizer struct {
	s     Summary
	sum   float64
	n     int
	limit int
	// lowest is a max-heap of the lowest matured values seen so far, at
	// most limit: a run above the highest of a full heap is passed over in
	// one comparison, one below it costs log(limit), so a summary of n
	// runs costs n log(limit) at worst, whatever order they come in.
	lowest []Reward
}

// NewSummarizer starts a summary; bounds are the objective's.
func NewSummarizer(version string, objectiveVersion int, bounds [2]float64, limit int) *Summarizer {
	if limit <= 0 {
		limit = defaultLowest
	}
	if bounds == [2]float64{} {
		bounds = [2]float64{0, 1}
	}
	return &Summarizer{s: Summary{Version: version, ObjectiveVersion: objectiveVersion, Histogram: Histogram{Bounds: bounds}},
		limit: limit}
}

func lessReward(a, b *Reward) bool {
	return cmp.Or(cmp.Compare(*a.Value, *b.Value), cmp.Compare(a.RunID, b.RunID)) < 0
}

// Add counts one reward; it is copied only if it is among the lowest.
func (z *Summarizer) Add(r *Reward) {
	s := &z.s
	s.Runs++
	switch r.Status {
	case StatusScored:
		s.Scored++
	case StatusGuarded:
		s.Guarded++
	case StatusExcluded:
		s.Excluded++
	}
	if !r.Matured {
		if r.Value != nil {
			s.Histogram.Unmatured[s.Histogram.Bin(*r.Value)]++
		}
		return
	}
	s.Matured++
	if r.Value == nil {
		return
	}
	if r.Status == StatusScored || r.Status == StatusGuarded {
		z.sum += *r.Value
		z.n++
		s.Histogram.Matured[s.Histogram.Bin(*r.Value)]++
	}
	h := z.lowest
	switch {
	case len(h) < z.limit:
		h = append(h, *r)
		for i := len(h) - 1; i > 0; { // sift up
			p := (i - 1) / 2
			if !lessReward(&h[p], &h[i]) {
				break
			}
			h[p], h[i] = h[i], h[p]
			i = p
		}
	case lessReward(r, &h[0]):
		h[0] = *r
		for i := 0; ; { // sift down
			big, l := i, 2*i+1
			if l < len(h) && lessReward(&h[big], &h[l]) {
				big = l
			}
			if l+1 < len(h) && lessReward(&h[big], &h[l+1]) {
				big = l + 1
			}
			if big == i {
				break
			}
			h[i], h[big] = h[big], h[i]
			i = big
		}
	}
	z.lowest = h
}

// Summary returns the summary of the rewards added so far.
func (z *Summarizer) Summary() Summary {
	s := z.s
	if z.n > 0 {
		mean := z.sum / float64(z.n)
		s.Mean = &mean
	}
	s.Lowest = slices.Clone(z.lowest)
	if s.Lowest == nil {
		s.Lowest = []Reward{}
	}
	slices.SortFunc(s.Lowest, func(a, b Reward) int {
		return cmp.Or(cmp.Compare(*a.Value, *b.Value), cmp.Compare(a.RunID, b.RunID))
	})
	return s
}
