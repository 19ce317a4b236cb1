package engine

import (
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// Overview is an agent at a glance: what the console's agent list and
// agent page show besides the variations' posteriors.
type Overview struct {
	// Seq is the sequence of the agent's last event: it changes on every
	// write, so a reader polls it to learn that something moved.
	Seq uint64
	// ObjectiveVersion is the current objective version; Mean, Matured and
	// Runs are over all the agent's runs under it, as a version summary's
	// (objective.Summarize) are over one release's.
	ObjectiveVersion int
	Runs, Matured    int
	Mean             *float64
	// RunsSince counts the runs created within each of the windows asked
	// for, in their order: [now − w, now].
	RunsSince []int
	// Versions are the release labels runs carry, in first-seen order,
	// each with its run count; runs without one count under "".
	Versions []VersionCount
	Feedback int // feedback records
	// Selections counts the runs created per variation (in creation
	// order; runs without one are left out) in consecutive buckets of
	// width Bucket ending with the one holding now. The first starts at
	// Start; bucket edges are multiples of Bucket since the Unix epoch.
	Start      time.Time
	Bucket     time.Duration
	Selections []VariationSelections
}

// VersionCount is one release label and its number of runs.
type VersionCount struct {
	Version string
	Runs    int
}

// VariationSelections is one variation's run counts per bucket.
type VariationSelections struct {
	VariationID, Name string
	Counts            []int
}

// Overview computes the agent's overview at now: run counts in each of
// windows, and selections in buckets buckets of width bucket (both ≥ 1).
// With rewards it evaluates every run's reward under the current objective
// for Mean and Matured, which costs what a version summary of all runs
// costs; without, they stay nil and 0 and the rest is a count.
func (a *Agent) Overview(now time.Time, windows []time.Duration, buckets int, bucket time.Duration, rewards bool) Overview {
	ov, _ := a.Objective(-1) // the current version always exists
	o := Overview{Seq: a.seq, ObjectiveVersion: ov.Version, Runs: a.runs.len(), RunsSince: make([]int, len(windows)),
		Feedback: a.feedback.Len(), Bucket: bucket}
	end := now.Truncate(bucket).Add(bucket)
	o.Start = end.Add(-time.Duration(buckets) * bucket)
	col := make(map[string]int, len(a.variationList))
	o.Selections = make([]VariationSelections, len(a.variationList))
	for i, v := range a.variationList {
		col[v.ID] = i
		o.Selections[i] = VariationSelections{VariationID: v.ID, Name: v.Name, Counts: make([]int, buckets)}
	}
	version := map[string]int{}
	var arena objective.Arena
	var sum float64
	var n int
	for i := range a.runs.len() {
		r := a.runs.at(i)
		at, ok := version[r.Version]
		if !ok {
			at = len(o.Versions)
			version[r.Version] = at
			o.Versions = append(o.Versions, VersionCount{Version: r.Version})
		}
		o.Versions[at].Runs++
		for w, d := range windows {
			if !r.CreatedAt.Before(now.Add(-d)) && !r.CreatedAt.After(now) {
				o.RunsSince[w]++
			}
		}
		if c, ok := col[r.VariationID]; ok && !r.CreatedAt.Before(o.Start) && r.CreatedAt.Before(end) {
			o.Selections[c].Counts[int(r.CreatedAt.Sub(o.Start)/bucket)]++
		}
		if !rewards {
			continue
		}
		rw := a.rewardIn(&arena, i, ov, now)
		if !rw.Matured {
			continue
		}
		o.Matured++
		if rw.Value != nil && (rw.Status == objective.StatusScored || rw.Status == objective.StatusGuarded) {
			sum += *rw.Value
			n++
		}
	}
	if n > 0 {
		mean := sum / float64(n)
		o.Mean = &mean
	}
	return o
}
