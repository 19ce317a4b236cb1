package engine

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/objective"
)

// Run returns a copy of a run.
func (a *Agent) Run(runID string) (Run, error) {
	return a.run(runID)
}

// RunByExternalID returns the run with that external id.
func (a *Agent) RunByExternalID(ext string) (Run, error) {
	if i, ok := a.runByExternal[ext]; ok {
		return a.runs.at(int(i)), nil
	}
	return Run{}, fmt.Errorf("run external_id %s: %w", field.Quote(ext), ErrNotFound)
}

// RunSignals returns the signals of a run in receipt order: those sent to it
// by run id or session, and those sent to any object it claimed.
func (a *Agent) RunSignals(runID string) ([]Signal, error) {
	_, i, err := a.runIndex(runID)
	if err != nil {
		return nil, err
	}
	idx := a.signalIndexes(i)
	out := make([]Signal, len(idx))
	for i, j := range idx {
		out[i] = a.signals.At(int(j))
	}
	return out, nil
}

func (a *Agent) signalIndexes(i int) []int32 {
	idx := a.signals.ofRun(i)
	claims := a.runs.claims(i)
	if len(claims) == 0 {
		return idx
	}
	idx = slices.Clone(idx)
	for _, cl := range claims {
		idx = append(idx, a.signals.ofObject(cl.Object)...)
	}
	slices.Sort(idx)
	return slices.Compact(idx)
}

// Objective returns objective version v; v < 0 means the current one.
func (a *Agent) Objective(v int) (ObjectiveVersion, error) {
	if v < 0 {
		v = len(a.objectives)
	}
	switch {
	case v == 0:
		return DefaultObjective(), nil
	case v <= len(a.objectives):
		return a.objectives[v-1], nil
	}
	return ObjectiveVersion{}, fmt.Errorf("objective version %d: %w", v, ErrNotFound)
}

// Reward computes a run's reward under objective version v (< 0: current) at now.
func (a *Agent) Reward(runID string, v int, now time.Time) (objective.Reward, error) {
	_, i, err := a.runIndex(runID)
	if err != nil {
		return objective.Reward{}, err
	}
	ov, err := a.Objective(v)
	if err != nil {
		return objective.Reward{}, err
	}
	return a.reward(i, ov, now), nil
}

// reward evaluates r, gathering its signals into the agent's scratch
// buffer, which is reused so a read allocates nothing per signal. The
// evaluator orders signals itself, and a run's sources are disjoint (a
// signal has one subject; a run claims an object once), so the indexes need
// neither sorting nor deduplication here.
func (a *Agent) reward(i int, ov ObjectiveVersion, now time.Time) objective.Reward {
	var arena objective.Arena
	return a.rewardIn(&arena, i, ov, now)
}

// rewardRead is what the agent's reward reads reuse: the buffer of
// observations, and the numbering of kinds for objective version version
// as of event seq (an overview reads every run under one version).
type rewardRead struct {
	obs     []objective.Observation
	version int
	seq     uint64
	kinds   objective.Kinds
	codes   evalCodes
}

// rewardIn is reward with its results cut from arena.
func (a *Agent) rewardIn(arena *objective.Arena, i int, ov ObjectiveVersion, now time.Time) objective.Reward {
	if a.read == nil {
		a.read = &rewardRead{}
	}
	rd := a.read
	if rd.version != ov.Version || rd.seq != a.seq {
		// A version's definition never changes; the names its kinds have
		// may, with the next event.
		rd.version, rd.seq = ov.Version, a.seq
		rd.kinds.Reset()
		rd.kinds.Add(ov.Definition)
		a.codesFor(&rd.codes, &rd.kinds)
	}
	run := a.runs.objectiveRun(i)
	claims := a.runs.claims(i)
	buf := rd.obs
	n := len(a.signals.ofRun(i)) + len(a.reports.ofRun(i))
	for _, cl := range claims {
		n += len(a.signals.ofObject(cl.Object))
	}
	if cap(buf) < n {
		buf = make([]objective.Observation, 0, n)
	}
	buf = buf[:0]
	buf = a.signals.appendObserved(buf, a.signals.ofRun(i), rd.codes.signals)
	for _, cl := range claims {
		buf = a.signals.appendObserved(buf, a.signals.ofObject(cl.Object), rd.codes.signals)
	}
	buf = a.reportObservations(i, run, ov.Definition, buf, rd.codes.reports, math.MaxUint64)
	rd.obs = buf
	return arena.EvaluateObserved(ov.Definition, ov.Version, run, &rd.kinds, buf, now)
}

// VersionRewards summarises the rewards of every run of an agent version
// at now: VersionSummary and At in one.
func (a *Agent) VersionRewards(version string, v, limit int, now time.Time) (objective.Summary, error) {
	s, err := a.VersionSummary(version, v, limit, now)
	if err != nil {
		return objective.Summary{}, err
	}
	return s.At(now), nil
}

// VersionSummary returns the summary of the rewards of every run of an
// agent version, to be computed by At outside the agent's actor. A summary
// asked for again before the agent applies another event, and before any
// run it counted matures, is the one taken the first time: a page polled,
// or many readers at once, cost one evaluation of every run.
func (a *Agent) VersionSummary(version string, v, limit int, now time.Time) (*VersionSummary, error) {
	ov, err := a.Objective(v)
	if err != nil {
		return nil, err
	}
	key := summaryKey{version: version, objective: ov.Version, limit: limit}
	if s, ok := a.summaries.get(a.seq, key, now); ok {
		return s, nil
	}
	s := a.versionSummary(key, ov, now)
	a.summaries.put(a.seq, s)
	return s, nil
}
