package judge

import "slices"

// DistributionBins is how many equal bins a Distribution cuts [0, 1], the
// range of a reward, into.
const DistributionBins = 20

// Distribution counts the judged rewards of one task version by status and
// by value: the reward distribution the console draws beside calibration.
//
//   - Scored, Pending and Failed count the rewards by status; a scored or a
//     failed reward is final.
//   - Mean is the mean of scores.reward over the scored rewards, nil when
//     none is scored. A flagged reward is scored with reward 0 and counts.
//   - Histogram counts the scored rewards' values: bin i holds [i/20,
//     (i+1)/20), the last bin also 1.
//   - Flags counts the scored rewards carrying each flag (a reward with two
//     flags counts in both).
//
// Pending and failed rewards have no value: they are in no mean, bin or
// flag count. The result does not depend on the order rewards are added in
// (the mean up to floating-point rounding).
type Distribution struct {
	Scored, Pending, Failed int
	Mean                    *float64
	Histogram               [DistributionBins]int
	Flags                   map[string]int
	sum                     float64
}

// DistributionBin returns the bin of reward v, clamped into [0, 1].
func DistributionBin(v float64) int {
	return min(max(int(v*DistributionBins), 0), DistributionBins-1)
}

// AddScored counts a scored reward of value v with its flags.
func (d *Distribution) AddScored(v float64, flags []string) {
	d.Scored++
	d.sum += v
	mean := d.sum / float64(d.Scored)
	d.Mean = &mean
	d.Histogram[DistributionBin(v)]++
	for _, f := range flags {
		if d.Flags == nil {
			d.Flags = map[string]int{}
		}
		d.Flags[f]++
	}
}

// Rewards is how many rewards d counts, whatever their status.
func (d *Distribution) Rewards() int { return d.Scored + d.Pending + d.Failed }

// FlagNames lists the flags d counts, in the order Score lists them
// (empty_answer, over_length, instructs_judge, unscorable), any other after
// them by name.
func (d *Distribution) FlagNames() []string {
	order := []string{FlagEmptyAnswer, FlagOverLength, FlagInstructsJudge, FlagUnscorable}
	var out []string
	for _, f := range order {
		if d.Flags[f] > 0 {
			out = append(out, f)
		}
	}
	var rest []string
	for f := range d.Flags {
		if !slices.Contains(order, f) {
			rest = append(rest, f)
		}
	}
	slices.Sort(rest)
	return append(out, rest...)
}
