package objective

import (
	"cmp"
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
}

const defaultLowest = 20

// Summarize aggregates the rewards of one agent version's runs:
//   - Runs counts every reward, and Scored, Guarded and Excluded count their
//     statuses over all runs, matured or not; Matured counts matured runs.
//   - Mean is the arithmetic mean of Value over matured runs that are scored
//     or guarded. Unmatured runs stay out because their rewards may still move.
//   - Lowest holds the matured runs with a value, ascending by Value, ties by
//     RunID, at most limit of them (limit ≤ 0 means 20).
func Summarize(version string, objectiveVersion int, rewards []Reward, limit int) Summary {
	if limit <= 0 {
		limit = defaultLowest
	}
	s := Summary{Version: version, ObjectiveVersion: objectiveVersion, Runs: len(rewards)}
	var sum float64
	var n int
	// lowest holds the indexes (into rewards, so a large version copies no
	// Reward) of the lowest matured values seen so far, at most limit, in
	// order: a run above the highest of a full list is passed over in one
	// comparison, so a summary of n runs costs n, not n log n.
	lowest := make([]int, 0, min(limit, len(rewards)))
	less := func(a, b int) bool {
		ra, rb := &rewards[a], &rewards[b]
		return cmp.Or(cmp.Compare(*ra.Value, *rb.Value), cmp.Compare(ra.RunID, rb.RunID)) < 0
	}
	for i := range rewards {
		r := &rewards[i]
		switch r.Status {
		case StatusScored:
			s.Scored++
		case StatusGuarded:
			s.Guarded++
		case StatusExcluded:
			s.Excluded++
		}
		if !r.Matured {
			continue
		}
		s.Matured++
		if r.Value == nil {
			continue
		}
		if r.Status == StatusScored || r.Status == StatusGuarded {
			sum += *r.Value
			n++
		}
		if len(lowest) == limit && !less(i, lowest[limit-1]) {
			continue
		}
		at, _ := slices.BinarySearchFunc(lowest, i, func(e, t int) int {
			if less(e, t) {
				return -1
			}
			return 1 // run ids are unique: never equal
		})
		if len(lowest) == limit {
			lowest = lowest[:limit-1]
		}
		lowest = slices.Insert(lowest, at, i)
	}
	if n > 0 {
		mean := sum / float64(n)
		s.Mean = &mean
	}
	s.Lowest = make([]Reward, len(lowest))
	for i := range s.Lowest {
		s.Lowest[i] = rewards[lowest[i]]
	}
	return s
}
