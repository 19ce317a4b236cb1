package judge

import (
	"math"
	"slices"
	"testing"
)

// TestDistribution: counts by status, the mean of the scored rewards only
// (flagged zeros included), the bins' edges and the flag counts.
func TestDistribution(t *testing.T) {
	type scored struct {
		v     float64
		flags []string
	}
	tests := []struct {
		name            string
		scored          []scored
		pending, failed int
		mean            *float64
		bins            map[int]int
		flags           map[string]int
		names           []string
	}{
		{name: "none", pending: 2, failed: 1},
		{
			name:   "edges",
			scored: []scored{{0, nil}, {0.05, nil}, {0.0499, nil}, {0.5, nil}, {0.95, nil}, {1, nil}},
			mean:   ptr((0 + 0.05 + 0.0499 + 0.5 + 0.95 + 1) / 6),
			bins:   map[int]int{0: 2, 1: 1, 10: 1, 19: 2},
		},
		{
			name: "flags",
			scored: []scored{{0, []string{FlagInstructsJudge}}, {0, []string{FlagOverLength, FlagInstructsJudge}},
				{0.75, nil}, {0, []string{"custom"}}},
			failed: 1,
			mean:   ptr(0.75 / 4),
			bins:   map[int]int{0: 3, 15: 1},
			flags:  map[string]int{FlagInstructsJudge: 2, FlagOverLength: 1, "custom": 1},
			names:  []string{FlagOverLength, FlagInstructsJudge, "custom"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d Distribution
			for _, s := range tt.scored {
				d.AddScored(s.v, s.flags)
			}
			d.Pending += tt.pending
			d.Failed += tt.failed
			if d.Scored != len(tt.scored) || d.Rewards() != len(tt.scored)+tt.pending+tt.failed {
				t.Errorf("scored %d of %d, want %d of %d", d.Scored, d.Rewards(), len(tt.scored), len(tt.scored)+tt.pending+tt.failed)
			}
			switch {
			case (d.Mean == nil) != (tt.mean == nil):
				t.Errorf("mean = %v, want %v", d.Mean, tt.mean)
			case d.Mean != nil && math.Abs(*d.Mean-*tt.mean) > 1e-12:
				t.Errorf("mean = %v, want %v", *d.Mean, *tt.mean)
			}
			for i, n := range d.Histogram {
				if n != tt.bins[i] {
					t.Errorf("bin %d = %d, want %d", i, n, tt.bins[i])
				}
			}
			for f, n := range tt.flags {
				if d.Flags[f] != n {
					t.Errorf("flag %s = %d, want %d", f, d.Flags[f], n)
				}
			}
			if len(d.Flags) != len(tt.flags) {
				t.Errorf("flags = %v, want %v", d.Flags, tt.flags)
			}
			if got := d.FlagNames(); !slices.Equal(got, tt.names) {
				t.Errorf("flag names = %v, want %v", got, tt.names)
			}
		})
	}
}

func ptr(v float64) *float64 { return &v }
