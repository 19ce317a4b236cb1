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
	var lowest []int // indexes into rewards, so a large version copies no Reward
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
		lowest = append(lowest, i)
	}
	if n > 0 {
		mean := sum / float64(n)
		s.Mean = &mean
	}
	slices.SortFunc(lowest, func(a, b int) int {
		ra, rb := &rewards[a], &rewards[b]
		return cmp.Or(cmp.Compare(*ra.Value, *rb.Value), cmp.Compare(ra.RunID, rb.RunID))
	})
	s.Lowest = make([]Reward, min(limit, len(lowest)))
	for i := range s.Lowest {
		s.Lowest[i] = rewards[lowest[i]]
	}
	return s
}
