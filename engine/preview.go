package engine

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// PreviewObjective asks what a draft objective would make of the agent's
// history: the summary it would give, beside the current version's.
type PreviewObjective struct {
	Definition objective.Definition
	// Version selects the runs of one release label, as VersionRewards
	// does; nil selects every run of the agent.
	Version *string
	Limit   int // lowest runs and moved runs listed; ≤ 0 means 20
}

// PreviewResult is a preview's answer. Both summaries are of the history
// as it stood at sequence Seq and instant At: exactly what publishing the
// draft then (as version Draft.ObjectiveVersion) and reading both versions'
// summaries at that instant would have answered.
type PreviewResult struct {
	Seq     uint64
	At      time.Time
	Draft   objective.Summary
	Current objective.Summary
	// Changed counts the runs whose status or value differs.
	Changed int
	// Moved lists the runs whose value moved most, by |Δ| descending (ties
	// by run id), among the runs with a value under both; a Δ within
	// rounding (1e-12 of the values) is no move, and no change.
	Moved []Moved
}

// Moved is one run's reward under the current version and the draft.
type Moved struct {
	RunID          string
	Matured        bool
	Current, Draft float64
	CurrentStatus  objective.Status
	DraftStatus    objective.Status
}

// Delta is Draft − Current.
func (m Moved) Delta() float64 { return m.Draft - m.Current }

// A Preview evaluates a draft over the history in steps, so its owner can
// interleave other work between them (an actor serves other messages).
// It reads the agent as of the sequence number and instant it started at,
// while writes go on:
//
//   - runs, signals and claims are append-only and carry the sequence of
//     the event that made them, so the ones after the start are skipped;
//   - a report replaced after the start is read as the version that stood
//     at it, which its table keeps with the sequence that made it;
//   - a run's finish, the one thing changed in place, is noted by apply
//     while the preview is open (the agent knows its open previews): a
//     run finished after the start was unfinished at it (a run finishes
//     once).
//
// The rejected alternative, an immutable copy taken at the start, costs a
// copy of every run and report in one actor turn: the blocking the steps
// avoid. Keeping what writes overwrite costs only while a preview is open.
//
// A Preview must be ended by Close (done or not), which detaches it.
type Preview struct {
	a                *Agent
	seq              uint64
	runs             int // runs at the start
	now              time.Time
	version          *string
	draft, current   ObjectiveVersion
	draftSum, curSum *objective.Summarizer
	limit            int
	next             int // next run to evaluate
	changed          int
	moved            []Moved // min-heap by |Δ| (then the larger run id first), at most limit
	arena            objective.Arena
	buf              []objective.Observation
	kinds            objective.Kinds // of the current and the draft definition
	codes            evalCodes       // as kinds numbers them, at the start
	finishedAfter    map[int]bool    // runs finished after the start
	closed           bool
}

// StartPreview opens a preview of the agent as of now; the draft is
// evaluated as the version PutObjective would publish next.
func (a *Agent) StartPreview(c PreviewObjective, now time.Time) (*Preview, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	cur, err := a.Objective(-1)
	if err != nil {
		return nil, err
	}
	draft := ObjectiveVersion{Version: len(a.objectives) + 1, Definition: c.Definition}
	limit := c.Limit
	if limit <= 0 {
		limit = 20
	}
	label := ""
	if c.Version != nil {
		label = *c.Version
	}
	p := &Preview{a: a, seq: a.seq, runs: a.runs.len(), now: now, version: c.Version, draft: draft, current: cur,
		draftSum: objective.NewSummarizer(label, draft.Version, draft.Definition.Bounds, limit),
		curSum:   objective.NewSummarizer(label, cur.Version, cur.Definition.Bounds, limit),
		limit:    limit}
	p.kinds.Add(cur.Definition)
	p.kinds.Add(draft.Definition)
	a.codesFor(&p.codes, &p.kinds)
	a.previews = append(a.previews, p)
	return p, nil
}

// PreviewStepBudget is the Step budget that holds an agent about 2 ms
// (BenchmarkPreview: 100,000 runs of 10 signals each).
const PreviewStepBudget = 10000

// Step evaluates runs until about budget units of work are done (a run
// costs 1 plus its signals and reports) or none is left, and reports
// whether the preview is done. It holds the agent for one budget's work:
// the caller picks the budget that keeps one step within its latency.
func (p *Preview) Step(budget int) (done bool) {
	a := p.a
	spent := 0
	for p.next < p.runs && spent < budget {
		i := p.next
		p.next++
		r := a.runs.at(i)
		if p.version != nil && r.Version != *p.version {
			spent++
			continue
		}
		run := objective.Run{ID: r.ID, Finished: r.Finished && !p.finishedAfter[i], FinishedAt: r.FinishedAt}
		if !run.Finished {
			run.FinishedAt = time.Time{}
		}
		p.buf = p.gatherSignals(i, &r, p.buf[:0])
		signals := len(p.buf)
		p.buf = a.reportObservations(i, run, p.current.Definition, p.buf, p.codes.reports, p.seq)
		spent += 1 + len(p.buf)
		cur := p.arena.EvaluateObserved(p.current.Definition, p.current.Version, run, &p.kinds, p.buf, p.now)
		if a.reports.replacedOf(i) {
			// Which version of a report a reward reads depends on the
			// definition's horizon. (The evaluator leaves buf as it was.)
			p.buf = a.reportObservations(i, run, p.draft.Definition, p.buf[:signals], p.codes.reports, p.seq)
		}
		drf := p.arena.EvaluateObserved(p.draft.Definition, p.draft.Version, run, &p.kinds, p.buf, p.now)
		p.curSum.Add(&cur)
		p.draftSum.Add(&drf)
		p.compare(&cur, &drf)
	}
	return p.next >= p.runs
}

// gatherSignals appends run i's signals as of the start: those recorded
// by then, to it or to the objects it had claimed by then.
func (p *Preview) gatherSignals(i int, r *Run, buf []objective.Observation) []objective.Observation {
	a := p.a
	buf = a.signals.appendObserved(buf, p.upTo(a.signals.ofRun(i)), p.codes.signals)
	for _, cl := range r.Claims {
		if cl.Seq > p.seq {
			break // claims are in sequence order
		}
		buf = a.signals.appendObserved(buf, p.upTo(a.signals.ofObject(cl.Object)), p.codes.signals)
	}
	return buf
}

// upTo cuts a receipt-ordered index list to the signals recorded by the start.
func (p *Preview) upTo(idx []int32) []int32 {
	n, _ := slices.BinarySearchFunc(idx, p.seq, func(j int32, seq uint64) int {
		return cmp.Compare(p.a.signals.recs.At(int(j)).seq, seq+1)
	})
	return idx[:n]
}

// sameValue reports whether two rewards are equal but for floating-point
// rounding: re-weighting terms that sum to the same value can leave a run
// 2.2e-16 apart, which is no move.
func sameValue(a, b float64) bool {
	return math.Abs(a-b) <= 1e-12*max(1, math.Abs(a), math.Abs(b))
}

func (p *Preview) compare(cur, drf *objective.Reward) {
	same := cur.Status == drf.Status && (cur.Value == nil) == (drf.Value == nil) &&
		(cur.Value == nil || sameValue(*cur.Value, *drf.Value))
	if same {
		return
	}
	p.changed++
	if cur.Value == nil || drf.Value == nil {
		return
	}
	m := Moved{RunID: cur.RunID, Matured: cur.Matured, Current: *cur.Value, Draft: *drf.Value,
		CurrentStatus: cur.Status, DraftStatus: drf.Status}
	if sameValue(m.Current, m.Draft) {
		return
	}
	h := p.moved
	switch {
	case len(h) < p.limit:
		h = append(h, m)
		for i := len(h) - 1; i > 0; {
			up := (i - 1) / 2
			if !movedLess(&h[i], &h[up]) {
				break
			}
			h[i], h[up] = h[up], h[i]
			i = up
		}
	case movedLess(&h[0], &m):
		h[0] = m
		for i := 0; ; {
			small, l := i, 2*i+1
			if l < len(h) && movedLess(&h[l], &h[small]) {
				small = l
			}
			if l+1 < len(h) && movedLess(&h[l+1], &h[small]) {
				small = l + 1
			}
			if small == i {
				break
			}
			h[i], h[small] = h[small], h[i]
			i = small
		}
	}
	p.moved = h
}

// movedLess orders by how little a run moved: smaller |Δ| first, and among
// equal ones the larger run id, so the list keeps the smaller ids.
func movedLess(a, b *Moved) bool {
	da, db := math.Abs(a.Delta()), math.Abs(b.Delta())
	if da != db {
		return da < db
	}
	return a.RunID > b.RunID
}

// Result returns the preview's answer; call it once Step reports done.
func (p *Preview) Result() PreviewResult {
	moved := slices.Clone(p.moved)
	slices.SortFunc(moved, func(a, b Moved) int {
		return cmp.Or(cmp.Compare(math.Abs(b.Delta()), math.Abs(a.Delta())), cmp.Compare(a.RunID, b.RunID))
	})
	if moved == nil {
		moved = []Moved{}
	}
	return PreviewResult{Seq: p.seq, At: p.now, Draft: p.draftSum.Summary(), Current: p.curSum.Summary(),
		Changed: p.changed, Moved: moved}
}

// Close detaches the preview from the agent; apply stops keeping what
// writes overwrite for it. It is safe to call more than once.
func (p *Preview) Close() {
	if p.closed {
		return
	}
	p.closed = true
	a := p.a
	if i := slices.Index(a.previews, p); i >= 0 {
		a.previews = slices.Delete(a.previews, i, i+1)
	}
	p.finishedAfter = nil
}

// noteFinish is apply's note, for open previews, that run i finishes now.
// Only runs a preview has still to read, and that existed at its start,
// need it.
func (a *Agent) noteFinish(i int) {
	for _, p := range a.previews {
		if i >= p.next && i < p.runs {
			if p.finishedAfter == nil {
				p.finishedAfter = map[int]bool{}
			}
			p.finishedAfter[i] = true
		}
	}
}
