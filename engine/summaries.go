package engine

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// summaryCacheSize is how many version summaries an agent keeps between
// events: a page showing a few versions side by side reads each of them.
const summaryCacheSize = 4

type summaryKey struct {
	version   string
	objective int // the objective version, resolved
	limit     int
}

// A VersionSummary is the summary of one agent version's runs, taken as a
// view of the agent inside its actor and computed outside it, on the
// reader's goroutine: the view holds what the computation reads (each
// run's signal indexes, capped, and copies of its reports), so gathering
// it costs the agent a pass over its runs, not an evaluation of each.
//
// It is safe for concurrent use. The agent keeps it until its next event
// (see summaryCache), so readers of the same summary meanwhile share one
// computation: the first to ask computes it, the others wait for it.
type VersionSummary struct {
	key     summaryKey
	def     objective.Definition
	kinds   objective.Kinds // def's
	codes   kindCodes       // of signals' kinds, as kinds numbers them
	from    time.Time       // the read that took the view
	signals SignalLog       // a view
	table   runTable        // a view
	runs    []summaryRun

	// first is held by the reader computing the summary the first time,
	// so that the others wait for it; mu guards what it computed and is
	// never held during a computation: the agent's actor takes it too.
	first    sync.Mutex
	mu       sync.Mutex
	computed bool
	until    time.Time // the first moment a counted run matures; zero: none will
	sum      objective.Summary
}

// summaryRun is what a run's reward is computed from, as rewardIn gathers
// it: the signals sent to it, then those of the objects it claimed, then
// its reports.
type summaryRun struct {
	run     int32   // in table
	signals []int32 // capped
	extra   *summaryExtra
}

// summaryExtra is what few runs have: claims and reports.
type summaryExtra struct {
	claimed [][]int32 // per claim, capped
	reports []objective.Observation
}

// At returns the summary as a read at now computes it. A read at the
// moment the view was taken, or later but before any run it counts
// matures, gets the one computation; any other read computes its own.
func (s *VersionSummary) At(now time.Time) objective.Summary {
	s.first.Lock()
	s.mu.Lock()
	computed := s.computed
	s.mu.Unlock()
	if !computed {
		sum, until := s.compute(s.from)
		s.mu.Lock()
		s.sum, s.until, s.computed = sum, until, true
		s.mu.Unlock()
	}
	s.first.Unlock()
	s.mu.Lock()
	sum, ok := s.sum, s.holdsAt(now)
	s.mu.Unlock()
	if ok {
		return sum
	}
	sum, _ = s.compute(now)
	return sum
}

// holdsAt reports whether the computed summary is the one a computation at
// now would give. It is called with s.mu held.
func (s *VersionSummary) holdsAt(now time.Time) bool {
	return !now.Before(s.from) && (s.until.IsZero() || now.Before(s.until))
}

func (s *VersionSummary) compute(now time.Time) (sum objective.Summary, until time.Time) {
	z := objective.NewSummarizer(s.key.version, s.key.objective, s.def.Bounds, s.key.limit)
	var (
		arena objective.Arena
		buf   []objective.Observation
	)
	for i := range s.runs {
		sr := &s.runs[i]
		buf = s.signals.appendObserved(buf[:0], sr.signals, s.codes)
		if sr.extra != nil {
			for _, idx := range sr.extra.claimed {
				buf = s.signals.appendObserved(buf, idx, s.codes)
			}
			buf = append(buf, sr.extra.reports...)
		}
		rw := arena.EvaluateObserved(s.def, s.key.objective, s.table.objectiveRun(int(sr.run)), &s.kinds, buf, now)
		if !rw.Matured && !rw.MaturesAt.IsZero() && (until.IsZero() || rw.MaturesAt.Before(until)) {
			until = rw.MaturesAt
		}
		z.Add(&rw)
	}
	return z.Summary(), until
}

// versionSummary takes the view of version's runs under ov, read at now.
func (a *Agent) versionSummary(key summaryKey, ov ObjectiveVersion, now time.Time) *VersionSummary {
	var version uint32
	ok := false
	if a.runs != nil {
		version, ok = a.runs.names.find(key.version)
	}
	n := 0
	for i := range a.runs.len() {
		if ok && a.runs.recs.At(i).version == version {
			n++
		}
	}
	s := &VersionSummary{key: key, def: ov.Definition, from: now, signals: a.signals.view(), table: a.runs.view(),
		runs: make([]summaryRun, 0, n)}
	s.kinds.Add(ov.Definition)
	var codes evalCodes
	a.codesFor(&codes, &s.kinds)
	s.codes = codes.signals
	for i := range a.runs.len() {
		if !ok || a.runs.recs.At(i).version != version {
			continue
		}
		sr := summaryRun{run: int32(i), signals: capped(a.signals.ofRun(i))}
		claims, reports := a.runs.claims(i), a.reports.ofRun(i)
		if len(claims) > 0 || len(reports) > 0 {
			x := &summaryExtra{reports: a.reportObservations(i, a.runs.objectiveRun(i), ov.Definition, nil, codes.reports, math.MaxUint64)}
			for _, cl := range claims {
				x.claimed = append(x.claimed, capped(a.signals.ofObject(cl.Object)))
			}
			sr.extra = x
		}
		s.runs = append(s.runs, sr)
	}
	return s
}

// summaryCache holds the summaries taken since event seq. It is not state:
// a snapshot and a replay leave it empty, and it is never persisted.
type summaryCache struct {
	seq     uint64
	entries []*VersionSummary // oldest first
}

// get returns the summary for key taken since event seq, if it is (or, not
// computed yet, may be) the one a computation at now would give.
func (c *summaryCache) get(seq uint64, key summaryKey, now time.Time) (*VersionSummary, bool) {
	if c.seq != seq {
		return nil, false
	}
	for _, s := range c.entries {
		if s.key != key {
			continue
		}
		s.mu.Lock()
		ok := s.holdsAt(now) || !s.computed && !now.Before(s.from)
		s.mu.Unlock()
		if ok {
			return s, true
		}
	}
	return nil, false
}

// put keeps s, taken after event seq, in place of any entry of its key,
// dropping the oldest when full and every entry from before seq.
func (c *summaryCache) put(seq uint64, s *VersionSummary) {
	if c.seq != seq {
		clear(c.entries) // what they hold is garbage now
		c.seq, c.entries = seq, c.entries[:0]
	}
	if i := slices.IndexFunc(c.entries, func(e *VersionSummary) bool { return e.key == s.key }); i >= 0 {
		c.entries = slices.Delete(c.entries, i, i+1)
	}
	if len(c.entries) == summaryCacheSize {
		c.entries = slices.Delete(c.entries, 0, 1)
	}
	c.entries = append(c.entries, s)
}
