package objective

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Signal is one observation attached to a run, as the evaluator sees it. The
// caller has already dropped dedup duplicates and resolved subjects (run id,
// session, claimed objects). Value is finite: the signal door rejects others.
type Signal struct {
	Kind       string
	Value      float64
	OccurredAt time.Time
	ReceivedAt time.Time
	Seq        uint64 // receipt order across the agent; breaks occurred_at ties
}

// An Observation is a Signal as the evaluator reads it: its kind numbered
// by a Kinds, its times as Instants. It holds no pointer, so a buffer of a
// run's observations costs the collector nothing to scan and its writes no
// barriers: a run of 1,000 signals gathered as Signals spent a tenth of a
// reward read in the collector's write barriers.
type Observation struct {
	Kind     int32 // the kind's number in the Kinds it was gathered for, or NoKind
	Value    float64
	Occurred Instant
	Received Instant
	Seq      uint64
}

// NoKind is the Kind of an observation whose kind no definition of its
// Kinds names: it counts as late or not, and matches nothing.
const NoKind int32 = -1

// An Instant is a time as the evaluator compares times: seconds and
// nanoseconds since the Unix epoch, which order every time.Time exactly as
// Time.Compare does, without the location a time.Time points to.
type Instant struct {
	Sec  int64
	Nsec int32
}

// InstantOf returns t as an Instant.
func InstantOf(t time.Time) Instant { return Instant{t.Unix(), int32(t.Nanosecond())} }

// UnixNano returns the Instant n nanoseconds after the Unix epoch.
func UnixNano(n int64) Instant {
	sec, nsec := n/1e9, n%1e9
	if nsec < 0 {
		sec, nsec = sec-1, nsec+1e9
	}
	return Instant{sec, int32(nsec)}
}

// Compare returns -1, 0 or +1 as i is before, at or after j.
func (i Instant) Compare(j Instant) int {
	switch {
	case i.Sec != j.Sec:
		return cmp.Compare(i.Sec, j.Sec)
	case i.Nsec != j.Nsec:
		return cmp.Compare(i.Nsec, j.Nsec)
	}
	return 0
}

// Time returns i as a time in UTC.
func (i Instant) Time() time.Time { return time.Unix(i.Sec, int64(i.Nsec)).UTC() }

// after reports whether i is after j: Compare(j) > 0, written out because
// it is in the evaluator's innermost loops, where going through Compare cost
// a tenth of a 1,000-signal reward (BenchmarkReward).
func (i Instant) after(j Instant) bool { return i.Sec > j.Sec || i.Sec == j.Sec && i.Nsec > j.Nsec }

// Kinds numbers the signal kinds that definitions name. Observations
// gathered for a Kinds can be evaluated under any definition added to it,
// as a preview evaluates a run under the current and the draft objective.
// The zero Kinds is empty and ready to use.
type Kinds struct{ names []string }

// Add numbers the kinds d's terms and guards name that k does not yet.
func (k *Kinds) Add(d Definition) {
	for _, g := range d.Guards {
		k.add(g.Signal)
	}
	for _, t := range d.Terms {
		k.add(t.Signal)
	}
}

func (k *Kinds) add(kind string) {
	if k.Of(kind) == NoKind {
		k.names = append(k.names, kind)
	}
}

// Reset empties k, keeping its storage.
func (k *Kinds) Reset() { k.names = k.names[:0] }

// Names lists the numbered kinds: kind i is Names()[i].
func (k *Kinds) Names() []string { return k.names }

// Of returns the number of kind, or NoKind.
func (k *Kinds) Of(kind string) int32 {
	for i, n := range k.names {
		if n == kind {
			return int32(i)
		}
	}
	return NoKind
}

// Observe returns s as an observation gathered for k.
func (k *Kinds) Observe(s Signal) Observation {
	return Observation{Kind: k.Of(s.Kind), Value: s.Value, Occurred: InstantOf(s.OccurredAt),
		Received: InstantOf(s.ReceivedAt), Seq: s.Seq}
}

// Run is what the evaluator needs of a run.
type Run struct {
	ID         string
	Finished   bool
	FinishedAt time.Time
}

// TermResult is one term's part in a reward. Raw and Scaled are nil when
// the term had no signal and skips; Count is 0 when it had none.
type TermResult struct {
	Signal   string
	Weight   float64
	Agg      Agg
	Count    int
	Raw      *float64
	Scaled   *float64
	Imputed  bool
	Evidence bool
}

// GuardResult reports whether one guard matched.
type GuardResult struct {
	Signal  string
	Op      Op
	Value   float64
	Matched bool
}

// Status says how a reward's value came about.
type Status string

// The statuses.
const (
	StatusScored   Status = "scored"   // from the terms, or from a numeric default
	StatusGuarded  Status = "guarded"  // a guard matched; value is the lower bound
	StatusExcluded Status = "excluded" // no evidence and default "exclude"; no value
)

// Reward is the reward of one run under one objective version at one instant.
type Reward struct {
	RunID            string
	ObjectiveVersion int
	Status           Status
	Value            *float64  // nil when excluded
	Matured          bool      // finished and the horizon has passed
	MaturesAt        time.Time // zero when the run is unfinished
	Terms            []TermResult
	Guards           []GuardResult
	LateSignals      int
}

// Evaluate computes the reward of run under def (objective version version)
// at now, from the run's signals in any order; it does not modify signals.
//
//   - A signal received after finished_at + horizon_s is late: counted, never
//     used. An unfinished run has no late signals.
//   - A guard matches when any usable signal of its kind satisfies
//     value op guard.value; a matched guard makes the run "guarded" at the
//     lower bound, whatever the terms and evidence say. Terms are still reported.
//   - A term aggregates its kind's usable signals in (occurred_at, seq) order,
//     then scales the raw value to [0,1]. Without a signal it skips, or imputes
//     Missing as the raw value; an imputed value is never evidence.
//   - u = clamp(Σ wᵢ·xᵢ / Σ_{wᵢ>0} wᵢ, 0, 1) over the terms with a value
//     (u = 0 when no positive weight contributes); value = lo + (hi − lo)·u.
//   - Without an observed signal in an evidence term, Default decides:
//     nil excludes the run, a number scores it with that value.
func Evaluate(def Definition, version int, run Run, signals []Signal, now time.Time) Reward {
	var a Arena
	return a.Evaluate(def, version, run, signals, now)
}

// An Arena evaluates many rewards from a few allocations: their term and
// guard results and their values are cut from shared backing arrays, and
// the scratch of sorting terms is reused. A summary of 10,000 runs made
// three allocations a run without one. The rewards it returns stay valid
// after later evaluations; the zero Arena is ready to use.
type Arena struct {
	vals    []float64
	terms   []TermResult
	guards  []GuardResult
	scratch []int32
}

// arenaChunk is how many rewards' worth an Arena allocates at once.
const arenaChunk = 64

// cut returns n elements of *pool, refilling it with room for arenaChunk
// such cuts (one, for a lone evaluation) when it runs short.
func cut[T any](pool *[]T, n int, lone bool) []T {
	if n == 0 {
		return make([]T, 0) // non-nil, and allocates nothing
	}
	if len(*pool) < n {
		size := n
		if !lone {
			size *= arenaChunk
		}
		*pool = make([]T, size)
	}
	s := (*pool)[:n:n]
	*pool = (*pool)[n:]
	return s
}

// Evaluate is Evaluate with a's storage.
func (a *Arena) Evaluate(def Definition, version int, run Run, signals []Signal, now time.Time) Reward {
	var kinds Kinds
	kinds.Add(def)
	obs := make([]Observation, len(signals))
	for i, s := range signals {
		obs[i] = kinds.Observe(s)
	}
	return a.EvaluateObserved(def, version, run, &kinds, obs, now)
}

// EvaluateObserved is Evaluate of observations gathered for kinds, to
// which def was added.
func (a *Arena) EvaluateObserved(def Definition, version int, run Run, kinds *Kinds, signals []Observation, now time.Time) Reward {
	lone := a.vals == nil && a.terms == nil // the first use: perhaps the only one
	r := Reward{RunID: run.ID, ObjectiveVersion: version}
	var deadline Instant
	if run.Finished {
		at := def.closes(run)
		deadline = InstantOf(at)
		r.MaturesAt = at
		r.Matured = !now.Before(at)
	}

	for i := range signals {
		if !usable(&signals[i], run, deadline) {
			r.LateSignals++
		}
	}

	guarded := false
	r.Guards = cut(&a.guards, len(def.Guards), lone)
	for i, g := range def.Guards {
		matched := guardMatched(g, kinds.Of(g.Signal), signals, run, deadline)
		r.Guards[i] = GuardResult{Signal: g.Signal, Op: g.Op, Value: g.Value, Matched: matched}
		guarded = guarded || matched
	}

	// One backing array holds every Raw, Scaled and the Value, so a reward
	// costs a fixed number of allocations however many terms it has.
	vals := cut(&a.vals, 2*len(def.Terms)+1, lone)
	evidence := false
	r.Terms = cut(&a.terms, len(def.Terms), lone)
	for i, t := range def.Terms {
		tr := TermResult{Signal: t.Signal, Weight: t.Weight, Agg: t.Agg.orDefault(), Evidence: t.Evidence}
		x, n := aggregate(t, kinds.Of(t.Signal), signals, run, deadline, &a.scratch)
		tr.Count = n
		if n == 0 && t.Missing != nil {
			x, tr.Imputed = *t.Missing, true
		}
		if n > 0 || tr.Imputed {
			raw, scaled := &vals[2*i], &vals[2*i+1]
			*raw, *scaled = x, scale(x, t.Scale)
			tr.Raw, tr.Scaled = raw, scaled
		}
		evidence = evidence || t.Evidence && n > 0
		r.Terms[i] = tr
	}

	b := def.bounds()
	value := &vals[len(vals)-1]
	switch {
	case guarded:
		r.Status, *value = StatusGuarded, b[0]
	case !evidence && def.Default == nil:
		r.Status, value = StatusExcluded, nil
	case !evidence:
		r.Status, *value = StatusScored, *def.Default
	default:
		r.Status, *value = StatusScored, lerp(b, combine(r.Terms))
	}
	r.Value = value
	return r
}

// aggregate collapses t's usable signals in (occurred_at, seq) order. With
// WithinS, a finished run counts only signals that occurred by finished_at +
// within_s. An unfinished run has no end to measure from, so the window is
// not applied until it finishes; its reward reads like any other, unmatured.
//
// Only sum and mean depend on the whole order (float addition is not
// associative), so only they sort, and only their own signals, in scratch;
// first and last keep the extreme signal in one pass. Sorting every usable
// signal up front cost ten times as much at 1000 signals.
func aggregate(t Term, kind int32, signals []Observation, run Run, deadline Instant, scratch *[]int32) (x float64, n int) {
	if kind == NoKind {
		return 0, 0
	}
	windowed := t.WithinS != nil && run.Finished
	var cutoff Instant
	if windowed {
		cutoff = InstantOf(run.FinishedAt.Add(duration(*t.WithinS)))
	}
	agg := t.Agg.orDefault()
	matched, best := (*scratch)[:0], 0
	for i := range signals {
		s := &signals[i]
		if s.Kind != kind || !usable(s, run, deadline) || windowed && s.Occurred.after(cutoff) {
			continue
		}
		n++
		switch agg {
		case AggFirst:
			if n == 1 || occursBefore(signals, i, best) {
				best = i
			}
		case AggLast:
			if n == 1 || occursBefore(signals, best, i) {
				best = i
			}
		case AggMax:
			if n == 1 {
				x = s.Value
			} else {
				x = max(x, s.Value)
			}
		case AggMin:
			if n == 1 {
				x = s.Value
			} else {
				x = min(x, s.Value)
			}
		case AggSum, AggMean:
			matched = append(matched, int32(i))
		}
	}
	*scratch = matched
	if n == 0 {
		return 0, 0
	}
	switch agg {
	case AggFirst, AggLast:
		x = signals[best].Value
	case AggCount:
		x = float64(n)
	case AggSum, AggMean:
		slices.SortFunc(matched, func(a, b int32) int {
			if occursBefore(signals, int(a), int(b)) {
				return -1
			}
			return 1 // indexes are distinct, so never equal
		})
		for _, j := range matched {
			x += signals[j].Value
		}
		if agg == AggMean {
			x /= float64(n)
		}
	}
	return x, n
}

// usable reports whether s arrived by the deadline; an unfinished run has none.
func usable(s *Observation, run Run, deadline Instant) bool {
	return !run.Finished || !Late(s.Received, deadline)
}

// closes is when a finished run's reward closes under d: finished_at +
// horizon_s.
func (d Definition) closes(run Run) time.Time { return run.FinishedAt.Add(duration(d.horizon())) }

// Deadline is when run's reward closes under d, as the evaluator reads
// it: a signal received after it is late. An unfinished run has none
// (false).
func (d Definition) Deadline(run Run) (Instant, bool) {
	if !run.Finished {
		return Instant{}, false
	}
	return InstantOf(d.closes(run)), true
}

// Late reports whether a signal received at received is late against
// deadline (see Deadline).
func Late(received, deadline Instant) bool { return received.after(deadline) }

// guardMatched reports whether a usable signal of the run, of kind number
// kind, holds guard g.
func guardMatched(g Guard, kind int32, signals []Observation, run Run, deadline Instant) bool {
	if kind == NoKind {
		return false
	}
	for i := range signals {
		if s := &signals[i]; s.Kind == kind && g.Op.holds(s.Value, g.Value) && usable(s, run, deadline) {
			return true
		}
	}
	return false
}

// occursBefore orders signals by occurred_at, then seq, then index: equal
// seqs only come from bad input, and the index keeps even that deterministic.
func occursBefore(signals []Observation, i, j int) bool {
	a, b := &signals[i], &signals[j]
	if c := a.Occurred.Compare(b.Occurred); c != 0 {
		return c < 0
	}
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	return i < j
}

// scale maps x onto [0,1]: by [lo,hi] when s is set, else by clamping.
func scale(x float64, s *[2]float64) float64 {
	if s == nil {
		return clamp01(x)
	}
	lo, hi := s[0], s[1]
	num, den := x-lo, hi-lo
	if math.IsInf(den, 0) { // a range wider than MaxFloat64; halves cannot overflow
		num, den = x/2-lo/2, hi/2-lo/2
	}
	return clamp01(num / den)
}

// combine returns u = clamp(Σ wᵢ·xᵢ / Σ_{wᵢ>0} wᵢ, 0, 1) over the terms
// with a value, and 0 when no positive weight contributes.
func combine(terms []TermResult) float64 {
	num, den := weighted(terms, 1)
	if math.IsInf(num, 0) || math.IsNaN(num) || math.IsInf(den, 0) {
		// Weights near MaxFloat64 overflow the sums. Dividing every weight by
		// the largest keeps each sum within the number of terms and leaves
		// the ratio unchanged; it is not the default because the extra
		// division would change the last bit of ordinary results.
		m := 0.0
		for _, t := range terms {
			if t.Scaled != nil {
				m = math.Max(m, math.Abs(t.Weight))
			}
		}
		num, den = weighted(terms, m)
	}
	if den <= 0 {
		return 0
	}
	return clamp01(num / den)
}

func weighted(terms []TermResult, div float64) (num, den float64) {
	for _, t := range terms {
		if t.Scaled == nil {
			continue
		}
		w := t.Weight / div
		num += w * *t.Scaled
		den += max(w, 0) // only positive weights count in the denominator
	}
	return num, den
}

// lerp maps u in [0,1] onto the bounds b.
func lerp(b [2]float64, u float64) float64 {
	if d := b[1] - b[0]; !math.IsInf(d, 0) {
		return b[0] + d*u
	}
	return b[0]*(1-u) + b[1]*u
}

func clamp01(x float64) float64 {
	return math.Min(math.Max(x, 0), 1)
}

// duration converts seconds to a Duration, saturating at about 292 years:
// a horizon that long never closes, which is what such a definition means.
func duration(s float64) time.Duration {
	ns := s * float64(time.Second)
	if ns >= 1<<63 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
