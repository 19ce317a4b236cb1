// Package objective turns a run's signals into a reward under an agent's
// objective (SPEC §5). It is pure: no I/O, no goroutines, and the current
// time is an argument, so a reward read twice at the same instant is the same.
//
// Nothing here is stored per run. A reward is recomputed on every read, which
// is why a new objective version applies to past runs as well as future ones.
package objective

// Op compares a signal's value with a guard's value: value op guard.value.
type Op string

// The guard comparisons.
const (
	OpLT Op = "lt"
	OpLE Op = "le"
	OpGT Op = "gt"
	OpGE Op = "ge"
	OpEQ Op = "eq"
	OpNE Op = "ne"
)

// holds reports whether x op y.
func (op Op) holds(x, y float64) bool {
	switch op {
	case OpLT:
		return x < y
	case OpLE:
		return x <= y
	case OpGT:
		return x > y
	case OpGE:
		return x >= y
	case OpEQ:
		return x == y
	case OpNE:
		return x != y
	}
	return false
}

// Agg collapses the signals of one kind into one raw value.
type Agg string

// The aggregations. The empty Agg means AggLast.
const (
	AggLast  Agg = "last"
	AggFirst Agg = "first"
	AggSum   Agg = "sum"
	AggMax   Agg = "max"
	AggMin   Agg = "min"
	AggMean  Agg = "mean"
	AggCount Agg = "count"
)

func (a Agg) orDefault() Agg {
	if a == "" {
		return AggLast
	}
	return a
}

// Guard is a hard constraint: one usable signal of kind Signal with
// value Op Value floors the run at the lower bound.
type Guard struct {
	Signal string
	Op     Op
	Value  float64
}

// Term is one weighted component of the reward.
type Term struct {
	Signal   string
	Weight   float64     // any finite number; negative = penalty
	Agg      Agg         // empty means AggLast
	Scale    *[2]float64 // nil = no scale (clamp raw to [0,1])
	WithinS  *float64    // nil = no window
	Missing  *float64    // nil = "skip"; else impute this raw value
	Evidence bool        // Parse defaults it to true
}

// Definition is one version of an agent's objective. Parse fills in every
// default; for a Definition built in Go, a zero HorizonS, zero Bounds and
// empty Agg also mean their defaults, in AppendJSON and Evaluate alike.
type Definition struct {
	HorizonS float64    // seconds, > 0 and ≤ MaxDurationS; default 604800
	Default  *float64   // nil = "exclude"; else the value a run without evidence scores
	Guards   []Guard    // Parse gives nil for none
	Terms    []Term     // at least one
	Bounds   [2]float64 // default [0,1]; lo < hi
}

const defaultHorizonS = 604800 // one week

// MaxDurationS bounds horizon_s and within_s: ten years of 365 days. A
// longer horizon would push matures_at past the years RFC 3339 can write
// (see field.MaxTime) and means nothing a reward could wait for.
const MaxDurationS = 10 * 365 * 24 * 3600

func (d Definition) horizon() float64 {
	if d.HorizonS == 0 {
		return defaultHorizonS
	}
	return d.HorizonS
}

func (d Definition) bounds() [2]float64 {
	if d.Bounds == [2]float64{} {
		return [2]float64{0, 1}
	}
	return d.Bounds
}

// Default returns version 0, the platform default: a failed run scores the
// lower bound, human ratings and approvals count, and a run with neither is
// excluded. Each call returns fresh pointers, so callers may modify the result.
func Default() Definition {
	return Definition{
		HorizonS: defaultHorizonS,
		Guards:   []Guard{{Signal: "run.succeeded", Op: OpLT, Value: 1}},
		Terms: []Term{
			{Signal: "human.rating", Weight: 1, Agg: AggLast, Scale: &[2]float64{0, 1}, Evidence: true},
			{Signal: "human.approval", Weight: 1, Agg: AggLast, Scale: &[2]float64{0, 1}, Evidence: true},
		},
		Bounds: [2]float64{0, 1},
	}
}
