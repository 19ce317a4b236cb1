package objective

import (
	"testing"
	"time"

	"github.com/valyala/fastjson"
)

// seedBody is the PUT body of seed 000 ("Rewards"), verbatim.
const seedBody = `{
  "definition": {
    "horizon_s": 172800,
    "default": "exclude",
    "guards": [{"signal": "run.succeeded", "op": "lt", "value": 1}],
    "terms": [
      {"signal": "human.rating", "weight": 0.5, "scale": [1, 5]},
      {"signal": "external.ticket_closed", "weight": 0.5, "within_s": 86400, "missing": 0}
    ],
    "bounds": [0, 1]
  },
  "note": "Ratings come from the 1-5 widget; a ticket counts if closed within a day."
}`

func seedDefinition(t testing.TB) Definition {
	t.Helper()
	body, err := fastjson.Parse(seedBody)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseValue(body.Get("definition"), "definition")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSeedDefinitionParses(t *testing.T) {
	got := seedDefinition(t)
	want := Definition{
		HorizonS: 172800,
		Guards:   []Guard{{Signal: "run.succeeded", Op: OpLT, Value: 1}},
		Terms: []Term{
			{Signal: "human.rating", Weight: 0.5, Agg: AggLast, Scale: &[2]float64{1, 5}, Evidence: true},
			{Signal: "external.ticket_closed", Weight: 0.5, Agg: AggLast, WithinS: f(86400), Missing: f(0), Evidence: true},
		},
		Bounds: [2]float64{0, 1},
	}
	if !equalDefinitions(got, want) {
		t.Fatalf("got %s\nwant %s", got.AppendJSON(nil), want.AppendJSON(nil))
	}
}

// The seed objective worked by hand. The run finished at t0; the horizon is
// two days; rating scales [1,5] → [0,1]; a ticket counts if it closed within
// a day of t0 and is imputed 0 otherwise. Both weights are 0.5, so the
// divisor Σ_{w>0} w is 1 whenever both terms have a value.
func TestSeedRewards(t *testing.T) {
	d := seedDefinition(t)
	succeeded := sig("run.succeeded", 1, 0, 0, 1)
	rating4 := sig("human.rating", 4, time.Hour, time.Hour, 2)
	ticket := sig("external.ticket_closed", 1, 3*time.Hour, 3*time.Hour, 3)
	tests := []struct {
		name    string
		run     Run
		signals []Signal
		want    want
	}{
		// rating (4−1)/(5−1) = 0.75; ticket 1 → 1; u = 0.5·0.75 + 0.5·1 = 0.875.
		{"rated 4, ticket closed within the day", finished, []Signal{succeeded, rating4, ticket},
			want{StatusScored, f(0.875), 0, []termWant{{1, f(4), f(0.75), false}, {1, f(1), f(1), false}}}},
		// ticket imputed 0 → 0; u = 0.5·0.75 + 0.5·0 = 0.375.
		{"rated 4, no ticket", finished, []Signal{succeeded, rating4},
			want{StatusScored, f(0.375), 0, []termWant{{1, f(4), f(0.75), false}, {0, f(0), f(0), true}}}},
		// The ticket closed 25h after the run: outside within_s, so imputed 0 as above.
		{"rated 4, ticket closed after a day", finished,
			[]Signal{succeeded, rating4, sig("external.ticket_closed", 1, 25*time.Hour, 25*time.Hour, 3)},
			want{StatusScored, f(0.375), 0, []termWant{{1, f(4), f(0.75), false}, {0, f(0), f(0), true}}}},
		// run.succeeded 0 < 1 matches the guard: value = bounds[0] = 0; terms still reported.
		{"failed run", finished, []Signal{sig("run.succeeded", 0, 0, 0, 1), rating4, ticket},
			want{StatusGuarded, f(0), 0, []termWant{{1, f(4), f(0.75), false}, {1, f(1), f(1), false}}}},
		// The rating arrives 2d+1s after the run: late. Rating has no usable
		// signal and skips; the ticket is imputed, which is not evidence, so
		// default "exclude" applies.
		{"rating arrives after the horizon", finished,
			[]Signal{succeeded, sig("human.rating", 4, time.Hour, 2*day+time.Second, 2)},
			want{StatusExcluded, nil, 1, []termWant{{0, nil, nil, false}, {0, f(0), f(0), true}}}},
		// Rated 5, then 2 later: last wins, (2−1)/4 = 0.25; u = 0.5·0.25 + 0.5·1 = 0.625.
		{"a later rating replaces an earlier one", finished,
			[]Signal{succeeded, sig("human.rating", 2, 2*time.Hour, 2*time.Hour, 3),
				sig("human.rating", 5, time.Hour, time.Hour, 2), ticket},
			want{StatusScored, f(0.625), 0, []termWant{{2, f(2), f(0.25), false}, {1, f(1), f(1), false}}}},
		// A rating of 0 is below the scale: clamp((0−1)/4) = 0; u = 0 + 0.5·1 = 0.5.
		{"rating below the scale clamps", finished, []Signal{succeeded, sig("human.rating", 0, 0, 0, 2), ticket},
			want{StatusScored, f(0.5), 0, nil}},
		// Unfinished: nothing is late and within_s has no end to count from, so
		// the ticket counts: 0.875 as in the first case.
		{"unfinished run", unfinished,
			[]Signal{rating4, sig("external.ticket_closed", 1, 25*time.Hour, 30*day, 3)},
			want{StatusScored, f(0.875), 0, []termWant{{1, f(4), f(0.75), false}, {1, f(1), f(1), false}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Evaluate(d, 1, tt.run, tt.signals, t0.Add(3*day))
			check(t, r, tt.want)
			if tt.run.Finished && (!r.Matured || !r.MaturesAt.Equal(t0.Add(2*day))) {
				t.Fatalf("matured %v at %v, want true at t0+2d", r.Matured, r.MaturesAt)
			}
			if !tt.run.Finished && (r.Matured || !r.MaturesAt.IsZero()) {
				t.Fatalf("unfinished run matured %v at %v", r.Matured, r.MaturesAt)
			}
		})
	}
}
