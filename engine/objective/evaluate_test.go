package objective

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // when the test runs finish

const day = 24 * time.Hour

func f(x float64) *float64 { return &x }

// sig is a signal of kind with value v that occurred at t0+occ and was
// received at t0+rcv.
func sig(kind string, v float64, occ, rcv time.Duration, seq uint64) Signal {
	return Signal{Kind: kind, Value: v, OccurredAt: t0.Add(occ), ReceivedAt: t0.Add(rcv), Seq: seq}
}

var finished = Run{ID: "run_1", Finished: true, FinishedAt: t0}
var unfinished = Run{ID: "run_1"}

// def is a one-day-horizon definition of terms, excluding runs without evidence.
func def(terms ...Term) Definition {
	return Definition{HorizonS: 86400, Terms: terms, Bounds: [2]float64{0, 1}}
}

func term(kind string, w float64) Term {
	return Term{Signal: kind, Weight: w, Agg: AggLast, Evidence: true}
}

// termWant is what a test checks of one TermResult; nil Raw means "no value".
type termWant struct {
	Count   int
	Raw     *float64
	Scaled  *float64
	Imputed bool
}

type want struct {
	Status Status
	Value  *float64
	Late   int
	Terms  []termWant // nil: not checked
}

func check(t *testing.T, got Reward, w want) {
	t.Helper()
	if got.Status != w.Status || !eqPtr(got.Value, w.Value) || got.LateSignals != w.Late {
		t.Fatalf("got status %s value %v late %d, want %s %v %d",
			got.Status, show(got.Value), got.LateSignals, w.Status, show(w.Value), w.Late)
	}
	if w.Terms == nil {
		return
	}
	for i, tw := range w.Terms {
		g := got.Terms[i]
		if g.Count != tw.Count || !eqPtr(g.Raw, tw.Raw) || !eqPtr(g.Scaled, tw.Scaled) || g.Imputed != tw.Imputed {
			t.Fatalf("term %d: got count %d raw %v scaled %v imputed %v, want %d %v %v %v", i,
				g.Count, show(g.Raw), show(g.Scaled), g.Imputed, tw.Count, show(tw.Raw), show(tw.Scaled), tw.Imputed)
		}
	}
}

func eqPtr(a, b *float64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func show(p *float64) any {
	if p == nil {
		return "nil"
	}
	return *p
}

func TestEvaluate(t *testing.T) {
	rating := term("human.rating", 1)
	skipped := term("human.approval", 1)
	imputed := term("human.approval", 1)
	imputed.Missing = f(0.5)
	cost := term("cost.usd", -0.5)
	cost.Evidence = false
	windowed := term("ticket.closed", 1)
	windowed.Agg, windowed.WithinS = AggSum, f(3600)
	huge1, huge2 := term("a", math.MaxFloat64), term("b", math.MaxFloat64)
	withDefault := def(rating)
	withDefault.Default = f(0.25)
	wide := def(rating)
	wide.Bounds = [2]float64{10, 20}
	signed := def(rating)
	signed.Bounds = [2]float64{-1, 1}

	tests := []struct {
		name    string
		def     Definition
		run     Run
		signals []Signal
		want    want
	}{
		{"observed signal scores", def(rating), finished,
			[]Signal{sig("human.rating", 0.75, 0, 0, 1)},
			want{StatusScored, f(0.75), 0, []termWant{{1, f(0.75), f(0.75), false}}}},
		{"received after the horizon is late and unused", def(rating), finished,
			[]Signal{sig("human.rating", 0.75, 0, day+1, 1)},
			want{StatusExcluded, nil, 1, []termWant{{0, nil, nil, false}}}},
		{"received exactly at the horizon is usable", def(rating), finished,
			[]Signal{sig("human.rating", 0.75, 0, day, 1)},
			want{StatusScored, f(0.75), 0, nil}},
		{"late signals of any kind are counted", def(rating), finished,
			[]Signal{sig("human.rating", 0.5, 0, 0, 1), sig("other", 1, 0, 2*day, 2), sig("human.rating", 1, 0, 2*day, 3)},
			want{StatusScored, f(0.5), 2, nil}},
		{"an unfinished run has no late signals", def(rating), unfinished,
			[]Signal{sig("human.rating", 0.75, 0, 30*day, 1)},
			want{StatusScored, f(0.75), 0, nil}},
		{"no signal of the kind: skip drops the term", def(rating, skipped), finished,
			[]Signal{sig("human.rating", 0.75, 0, 0, 1)},
			want{StatusScored, f(0.75), 0, []termWant{{1, f(0.75), f(0.75), false}, {0, nil, nil, false}}}},
		// u = (1·0.75 + 1·0.5) / (1+1) = 0.625
		{"no signal of the kind: a number is imputed", def(rating, imputed), finished,
			[]Signal{sig("human.rating", 0.75, 0, 0, 1)},
			want{StatusScored, f(0.625), 0, []termWant{{1, f(0.75), f(0.75), false}, {0, f(0.5), f(0.5), true}}}},
		{"an imputed value is not evidence", def(rating, imputed), finished, nil,
			want{StatusExcluded, nil, 0, []termWant{{0, nil, nil, false}, {0, f(0.5), f(0.5), true}}}},
		{"an evidence:false term alone is not evidence", def(rating, cost), finished,
			[]Signal{sig("cost.usd", 1, 0, 0, 1)},
			want{StatusExcluded, nil, 0, []termWant{{0, nil, nil, false}, {1, f(1), f(1), false}}}},
		{"without evidence a numeric default scores", withDefault, finished, nil,
			want{StatusScored, f(0.25), 0, nil}},
		{"with evidence the numeric default is unused", withDefault, finished,
			[]Signal{sig("human.rating", 1, 0, 0, 1)},
			want{StatusScored, f(1), 0, nil}},
		// u = (1·1 − 0.5·1) / 1 = 0.5: negative weights are left out of the divisor.
		{"a negative weight is a penalty", def(rating, cost), finished,
			[]Signal{sig("human.rating", 1, 0, 0, 1), sig("cost.usd", 1, 0, 0, 2)},
			want{StatusScored, f(0.5), 0, nil}},
		// u = clamp((1·0.25 − 0.5·1) / 1) = clamp(−0.25) = 0
		{"a penalty cannot push u below 0", def(rating, cost), finished,
			[]Signal{sig("human.rating", 0.25, 0, 0, 1), sig("cost.usd", 1, 0, 0, 2)},
			want{StatusScored, f(0), 0, nil}},
		{"no positive weight contributes: u is 0", def(rating, term("cost.usd", -1)), finished,
			[]Signal{sig("cost.usd", 1, 0, 0, 1)},
			want{StatusScored, f(0), 0, nil}},
		{"all weights zero: u is 0", def(term("human.rating", 0)), finished,
			[]Signal{sig("human.rating", 1, 0, 0, 1)},
			want{StatusScored, f(0), 0, nil}},
		// Σw·x overflows float64; the ratio is still MaxFloat64·1 / (2·MaxFloat64) = 0.5.
		{"weights near MaxFloat64 do not overflow", def(huge1, huge2), finished,
			[]Signal{sig("a", 1, 0, 0, 1), sig("b", 0, 0, 0, 2)},
			want{StatusScored, f(0.5), 0, nil}},
		// value = 10 + (20 − 10)·0.75 = 17.5
		{"bounds map u", wide, finished,
			[]Signal{sig("human.rating", 0.75, 0, 0, 1)},
			want{StatusScored, f(17.5), 0, nil}},
		// value = −1 + (1 − (−1))·0.25 = −0.5
		{"bounds below zero map u", signed, finished,
			[]Signal{sig("human.rating", 0.25, 0, 0, 1)},
			want{StatusScored, f(-0.5), 0, nil}},
		// within_s 3600: occurred at −1000s and +3600s count, +3601s does not.
		{"within_s keeps what occurred by finished_at + within_s", def(windowed), finished,
			[]Signal{sig("ticket.closed", 0.25, -1000*time.Second, 0, 1), sig("ticket.closed", 0.25, time.Hour, time.Hour, 2),
				sig("ticket.closed", 0.25, time.Hour+time.Second, time.Hour+time.Second, 3)},
			want{StatusScored, f(0.5), 0, []termWant{{2, f(0.5), f(0.5), false}}}},
		{"within_s is not applied to an unfinished run", def(windowed), unfinished,
			[]Signal{sig("ticket.closed", 0.25, -1000*time.Second, 0, 1), sig("ticket.closed", 0.25, time.Hour, time.Hour, 2),
				sig("ticket.closed", 0.25, time.Hour+time.Second, time.Hour+time.Second, 3)},
			want{StatusScored, f(0.75), 0, []termWant{{3, f(0.75), f(0.75), false}}}},
		{"a zero Definition's bounds and horizon mean their defaults",
			Definition{Terms: []Term{{Signal: "human.rating", Weight: 1, Evidence: true}}}, finished,
			[]Signal{sig("human.rating", 0.5, 0, 6*day, 1)},
			want{StatusScored, f(0.5), 0, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, Evaluate(tt.def, 3, tt.run, tt.signals, t0), tt.want)
		})
	}
}

func TestGuards(t *testing.T) {
	rating := term("human.rating", 1)
	tests := []struct {
		op      Op
		value   float64 // the signal's; the guard's is 1
		matched bool
	}{
		{OpLT, 0, true}, {OpLT, 1, false},
		{OpLE, 1, true}, {OpLE, 2, false},
		{OpGT, 2, true}, {OpGT, 1, false},
		{OpGE, 1, true}, {OpGE, 0, false},
		{OpEQ, 1, true}, {OpEQ, 0, false},
		{OpNE, 0, true}, {OpNE, 1, false},
	}
	for _, tt := range tests {
		d := def(rating)
		d.Bounds = [2]float64{-1, 1}
		d.Guards = []Guard{{Signal: "run.succeeded", Op: tt.op, Value: 1}}
		signals := []Signal{sig("run.succeeded", tt.value, 0, 0, 1), sig("human.rating", 1, 0, 0, 2)}
		r := Evaluate(d, 1, finished, signals, t0)
		if r.Guards[0] != (GuardResult{Signal: "run.succeeded", Op: tt.op, Value: 1, Matched: tt.matched}) {
			t.Errorf("%v %s 1: got %+v", tt.value, tt.op, r.Guards[0])
		}
		// A guard floors the run at the lower bound; otherwise u = 1 gives the upper.
		w := want{StatusScored, f(1), 0, []termWant{{1, f(1), f(1), false}}}
		if tt.matched {
			w = want{StatusGuarded, f(-1), 0, []termWant{{1, f(1), f(1), false}}}
		}
		check(t, r, w)
	}
}

func TestGuardUsesOnlyUsableSignalsOfItsKind(t *testing.T) {
	d := Default()
	tests := []struct {
		name    string
		signals []Signal
		want    want
	}{
		{"guard beats missing evidence", []Signal{sig("run.succeeded", 0, 0, 0, 1)},
			want{StatusGuarded, f(0), 0, nil}},
		{"one matching signal among others is enough",
			[]Signal{sig("run.succeeded", 1, 0, 0, 1), sig("run.succeeded", 0, 0, 0, 2), sig("human.rating", 1, 0, 0, 3)},
			want{StatusGuarded, f(0), 0, nil}},
		{"a late guard signal is not used",
			[]Signal{sig("run.succeeded", 0, 0, 8*day, 1), sig("human.rating", 1, 0, 0, 2)},
			want{StatusScored, f(1), 1, nil}},
		{"another kind with a matching value does not guard",
			[]Signal{sig("run.failed", 0, 0, 0, 1), sig("human.rating", 1, 0, 0, 2)},
			want{StatusScored, f(1), 0, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, Evaluate(d, 0, finished, tt.signals, t0), tt.want) })
	}
}

func TestAggregations(t *testing.T) {
	// Given out of order; by occurred_at the values are 0.75, 0.5, 0.25.
	signals := []Signal{
		sig("x", 0.25, 3*time.Minute, 0, 3),
		sig("x", 0.75, 1*time.Minute, 0, 1),
		sig("other", 0.9, 0, 0, 4),
		sig("x", 0.5, 2*time.Minute, 0, 2),
	}
	tests := []struct {
		agg         Agg
		raw, scaled float64
	}{
		{AggLast, 0.25, 0.25},
		{"", 0.25, 0.25}, // empty means last
		{AggFirst, 0.75, 0.75},
		{AggSum, 1.5, 1}, // 0.75+0.5+0.25, clamped without a scale
		{AggMax, 0.75, 0.75},
		{AggMin, 0.25, 0.25},
		{AggMean, 0.5, 0.5},
		{AggCount, 3, 1},
	}
	for _, tt := range tests {
		x := term("x", 1)
		x.Agg = tt.agg
		r := Evaluate(def(x), 1, finished, signals, t0)
		check(t, r, want{StatusScored, f(tt.scaled), 0, []termWant{{3, f(tt.raw), f(tt.scaled), false}}})
		if r.Terms[0].Agg != tt.agg.orDefault() {
			t.Errorf("agg %q reported as %q", tt.agg, r.Terms[0].Agg)
		}
	}
}

func TestOccurredAtTiesBreakBySeq(t *testing.T) {
	// Same occurred_at; seq 7 was received after seq 3, whatever the slice order.
	signals := []Signal{sig("x", 0.9, 0, 0, 7), sig("x", 0.1, 0, 0, 3)}
	for _, tt := range []struct {
		agg  Agg
		want float64
	}{{AggLast, 0.9}, {AggFirst, 0.1}} {
		x := term("x", 1)
		x.Agg = tt.agg
		check(t, Evaluate(def(x), 1, finished, signals, t0), want{StatusScored, f(tt.want), 0, nil})
	}
}

func TestScale(t *testing.T) {
	tests := []struct {
		x     float64
		scale *[2]float64
		want  float64
	}{
		{-0.5, nil, 0},
		{0.3, nil, 0.3},
		{2, nil, 1},
		{4, &[2]float64{1, 5}, 0.75},
		{0, &[2]float64{1, 5}, 0},
		{9, &[2]float64{1, 5}, 1},
		{0, &[2]float64{-10, 10}, 0.5},
		{0, &[2]float64{-math.MaxFloat64, math.MaxFloat64}, 0.5}, // hi−lo overflows
		{math.MaxFloat64 / 2, &[2]float64{-math.MaxFloat64, math.MaxFloat64}, 0.75},
		{math.Inf(1), &[2]float64{0, 1}, 1}, // an overflowed sum
	}
	for _, tt := range tests {
		if got := scale(tt.x, tt.scale); got != tt.want {
			t.Errorf("scale(%v, %v) = %v, want %v", tt.x, tt.scale, got, tt.want)
		}
	}
}

func TestMaturity(t *testing.T) {
	d := def(term("human.rating", 1)) // horizon one day
	tests := []struct {
		name      string
		run       Run
		now       time.Time
		matured   bool
		maturesAt time.Time
	}{
		{"before the horizon", finished, t0.Add(day - time.Nanosecond), false, t0.Add(day)},
		{"exactly at the horizon", finished, t0.Add(day), true, t0.Add(day)},
		{"after the horizon", finished, t0.Add(2 * day), true, t0.Add(day)},
		{"unfinished never matures", unfinished, t0.Add(100 * day), false, time.Time{}},
	}
	for _, tt := range tests {
		r := Evaluate(d, 1, tt.run, nil, tt.now)
		if r.Matured != tt.matured || !r.MaturesAt.Equal(tt.maturesAt) {
			t.Errorf("%s: matured %v at %v, want %v at %v", tt.name, r.Matured, r.MaturesAt, tt.matured, tt.maturesAt)
		}
	}
}

func TestHugeHorizonNeverCloses(t *testing.T) {
	d := def(term("human.rating", 1))
	d.HorizonS = math.MaxFloat64
	r := Evaluate(d, 1, finished, []Signal{sig("human.rating", 1, 0, 100*365*day, 1)}, t0.Add(100*365*day))
	if r.LateSignals != 0 || r.Matured || !r.MaturesAt.After(t0.Add(290*365*day)) {
		t.Fatalf("late %d matured %v at %v", r.LateSignals, r.Matured, r.MaturesAt)
	}
}

func TestEvaluateIgnoresSignalOrderAndLeavesSignalsAlone(t *testing.T) {
	d := seedDefinition(t)
	rnd := rand.New(rand.NewPCG(1, 2))
	signals := benchSignals(rnd, 200)
	before := slices.Clone(signals)
	want := Evaluate(d, 1, finished, signals, t0)
	if !slices.Equal(signals, before) {
		t.Fatal("Evaluate reordered its input")
	}
	for range 5 {
		rnd.Shuffle(len(signals), func(i, j int) { signals[i], signals[j] = signals[j], signals[i] })
		if got := Evaluate(d, 1, finished, signals, t0); !reflect.DeepEqual(got, want) {
			t.Fatalf("shuffled input changed the reward:\n%+v\n%+v", got, want)
		}
	}
}

func TestSumAddsInOccurrenceOrder(t *testing.T) {
	// Float addition is not associative: in occurrence order
	// (1e16 + 1) − 1e16 = 0, because 1e16 + 1 rounds to 1e16, whereas the
	// slice order (−1e16 + 1e16) + 1 would give 1.
	signals := []Signal{sig("x", -1e16, 3*time.Minute, 0, 3), sig("x", 1e16, time.Minute, 0, 1), sig("x", 1, 2*time.Minute, 0, 2)}
	for _, agg := range []Agg{AggSum, AggMean} {
		x := term("x", 1)
		x.Agg = agg
		x.Scale = &[2]float64{-1, 1}
		check(t, Evaluate(def(x), 1, finished, signals, t0), want{StatusScored, f(0.5), 0, []termWant{{3, f(0), f(0.5), false}}})
	}
}

// TestArenaEvaluatesAsEvaluate: rewards evaluated one after another in one
// Arena equal lone evaluations, and none is changed by the ones after it.
func TestArenaEvaluatesAsEvaluate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	sum, mean := term("b", 2), term("c", -1)
	sum.Agg, mean.Agg = AggSum, AggMean
	d := def(term("a", 1), sum, mean)
	d.Guards = []Guard{{Signal: "g", Op: OpGT, Value: 0.9}}
	var arena Arena
	var got, want []Reward
	for i := range 500 {
		var signals []Signal
		for j := range rng.IntN(12) {
			kind := []string{"a", "b", "c", "g", "z"}[rng.IntN(5)]
			signals = append(signals, sig(kind, rng.Float64(), time.Duration(rng.IntN(100))*time.Hour, time.Duration(j)*time.Minute, uint64(j)))
		}
		run := Run{ID: fmt.Sprint("run_", i), Finished: rng.IntN(2) == 0, FinishedAt: t0}
		got = append(got, arena.Evaluate(d, 1, run, signals, t0.Add(48*time.Hour)))
		want = append(want, Evaluate(d, 1, run, signals, t0.Add(48*time.Hour)))
	}
	if !reflect.DeepEqual(got, want) {
		for i := range got {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("reward %d from the arena = %+v, want %+v", i, got[i], want[i])
			}
		}
	}
}

// TestTermWithoutAValueLeavesTheOthersCounted: a term with no signal and no
// imputed value drops out of the combination; the terms after it still count.
func TestTermWithoutAValueLeavesTheOthersCounted(t *testing.T) {
	d := def(term("human.approval", 1), term("human.rating", 1), term("ci", 1))
	signals := []Signal{sig("human.rating", 0.2, 0, 0, 1), sig("ci", 0.6, 0, 0, 2)}
	r := Evaluate(d, 1, finished, signals, t0.Add(2*day))
	if r.Value == nil {
		t.Fatalf("no value, want the mean of the rating and ci terms, 0.4 (terms %+v)", r.Terms)
	}
	if math.Abs(*r.Value-0.4) > 1e-15 {
		t.Fatalf("value = %v, want the mean of the rating and ci terms, 0.4 (terms %+v)", *r.Value, r.Terms)
	}
}

// TestInstantsOrderAsTimes: Instants compare as the times they stand for,
// far ones and ones before 1970 included, and UnixNano agrees with InstantOf.
func TestInstantsOrderAsTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	times := []time.Time{{}, t0, t0.Add(1), t0.Add(-1), time.Unix(0, 0), time.Unix(-1, 999_999_999), time.Unix(-1, 0),
		time.Unix(0, math.MinInt64).UTC(), time.Unix(0, math.MaxInt64).UTC(), time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2300, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC)}
	for range 200 {
		times = append(times, time.Unix(0, rng.Int64()-rng.Int64()).UTC(), time.Unix(rng.Int64N(1<<40)-1<<39, rng.Int64N(1e9)).UTC())
	}
	for _, a := range times {
		for _, b := range times {
			if got, want := InstantOf(a).Compare(InstantOf(b)), a.Compare(b); got != want {
				t.Fatalf("%v against %v: Instants compare %d, times %d", a, b, got, want)
			}
		}
		if n := a.UnixNano(); time.Unix(0, n).Equal(a) && UnixNano(n) != InstantOf(a) {
			t.Fatalf("UnixNano(%d) = %v, InstantOf = %v", n, UnixNano(n), InstantOf(a))
		}
	}
}
