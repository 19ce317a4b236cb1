package objective

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/plaudit/plaudit/engine/field"
)

func equalDefinitions(a, b Definition) bool { return reflect.DeepEqual(a, b) }

func TestParseFillsDefaults(t *testing.T) {
	got, err := Parse([]byte(`{"terms": [{"signal": "human.rating", "weight": 1}], "extra": {"ignored": [1]}}`), "definition")
	if err != nil {
		t.Fatal(err)
	}
	want := Definition{
		HorizonS: 604800,
		Terms:    []Term{{Signal: "human.rating", Weight: 1, Agg: AggLast, Evidence: true}},
		Bounds:   [2]float64{0, 1},
	}
	if !equalDefinitions(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name, json string
		check      func(Definition) bool
	}{
		{"null members are absent", `{"default": null, "guards": null, "terms": [{"signal": "a", "weight": 1, "scale": null, "within_s": null, "missing": null}]}`,
			func(d Definition) bool {
				return d.Default == nil && d.Guards == nil && d.Terms[0].Scale == nil && d.Terms[0].Missing == nil
			}},
		{"numeric default within bounds", `{"default": -1, "bounds": [-1, 1], "terms": [{"signal": "a", "weight": 1}]}`,
			func(d Definition) bool { return *d.Default == -1 && d.Bounds == [2]float64{-1, 1} }},
		{"horizon_s of exactly 10 years", `{"horizon_s": 315360000, "terms": [{"signal": "a", "weight": 1, "within_s": 315360000}]}`,
			func(d Definition) bool { return d.HorizonS == MaxDurationS && *d.Terms[0].WithinS == MaxDurationS }},
		{"numeric default equal to the upper bound", `{"default": 10, "bounds": [0, 10], "terms": [{"signal": "a", "weight": 1}]}`,
			func(d Definition) bool { return *d.Default == 10 }},
		{"numeric default 1 under the default bounds", `{"default": 1, "terms": [{"signal": "a", "weight": 1}]}`,
			func(d Definition) bool { return *d.Default == 1 && d.Bounds == [2]float64{0, 1} }},
		{"within_s 0 and missing as a number", `{"terms": [{"signal": "a", "weight": 1, "within_s": 0, "missing": 0.5}]}`,
			func(d Definition) bool { return *d.Terms[0].WithinS == 0 && *d.Terms[0].Missing == 0.5 }},
		{"evidence false, negative weight, agg count", `{"terms": [{"signal": "a", "weight": -2.5, "agg": "count", "evidence": false}]}`,
			func(d Definition) bool {
				return !d.Terms[0].Evidence && d.Terms[0].Weight == -2.5 && d.Terms[0].Agg == AggCount
			}},
		{"signal of 100 allowed characters", `{"terms": [{"signal": "` + strings.Repeat("aZ0_.-", 16) + "aZ0_" + `", "weight": 1}]}`,
			func(d Definition) bool { return len(d.Terms[0].Signal) == 100 }},
		{"escaped keys and strings", `{"terms": [{"sig\u006eal": "a\u002eb", "weight": 1, "agg": "m\u0065an", "missing": "sk\u0069p"}]}`,
			func(d Definition) bool {
				return d.Terms[0].Signal == "a.b" && d.Terms[0].Agg == AggMean && d.Terms[0].Missing == nil
			}},
		{"empty guards", `{"guards": [], "terms": [{"signal": "a", "weight": 1}]}`,
			func(d Definition) bool { return d.Guards == nil }},
	}
	for _, tt := range tests {
		d, err := Parse([]byte(tt.json), "definition")
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
		} else if !tt.check(d) {
			t.Errorf("%s: got %+v", tt.name, d)
		}
	}
}

func TestParseErrors(t *testing.T) {
	const term = `{"signal": "a", "weight": 1}`
	// withTerm puts a second term after a valid first one, so its errors are at terms[1].
	withTerm := func(fields string) string {
		return `{"terms": [` + term + `, {"signal": "b", "weight": 1, ` + fields + `}]}`
	}
	withGuard := func(g string) string { return `{"guards": [` + g + `], "terms": [` + term + `]}` }
	withTop := func(fields string) string { return `{"terms": [` + term + `], ` + fields + `}` }
	tests := []struct{ json, path string }{
		{``, ""},
		{`not json`, ""},
		{`{"terms": [` + term + `]} trailing`, ""},
		{withTop(`"x": NaN`), "definition.x"}, // named, even where nothing reads it
		{withTop("\"x\": \"raw\ttab\""), ""},  // control characters must be escaped
		{strings.Repeat("[", 1000) + strings.Repeat("]", 1000), ""},
		{`[]`, "definition"},
		{`"definition"`, "definition"},
		{`{}`, "definition.terms"},
		{`{"terms": []}`, "definition.terms"},
		{`{"terms": {}}`, "definition.terms"},
		{withTop(`"horizon_s": "1"`), "definition.horizon_s"},
		{withTop(`"horizon_s": 0`), "definition.horizon_s"},
		{withTop(`"horizon_s": -5`), "definition.horizon_s"},
		{withTop(`"horizon_s": 1e999`), "definition.horizon_s"},
		{withTop(`"default": "include"`), "definition.default"},
		{withTop(`"default": true`), "definition.default"},
		{withTop(`"default": 2`), "definition.default"},
		{withTop(`"default": -0.5, "bounds": [0, 10]`), "definition.default"},
		{withTop(`"default": 1e999`), "definition.default"},
		{withTop(`"guards": {}`), "definition.guards"},
		{withGuard(`1`), "definition.guards[0]"},
		{withGuard(`{"op": "lt", "value": 1}`), "definition.guards[0].signal"},
		{withGuard(`{"signal": 5, "op": "lt", "value": 1}`), "definition.guards[0].signal"},
		{withGuard(`{"signal": "", "op": "lt", "value": 1}`), "definition.guards[0].signal"},
		{withGuard(`{"signal": "run succeeded", "op": "lt", "value": 1}`), "definition.guards[0].signal"},
		{withGuard(`{"signal": "` + strings.Repeat("a", 101) + `", "op": "lt", "value": 1}`), "definition.guards[0].signal"},
		{withGuard(`{"signal": "run/succeeded", "op": "lt", "value": 1}`), "definition.guards[0].signal"},
		{withGuard(`{"signal": "a", "op": "lte", "value": 1}`), "definition.guards[0].op"},
		{withGuard(`{"signal": "a", "value": 1}`), "definition.guards[0].op"},
		{withGuard(`{"signal": "a", "op": 1, "value": 1}`), "definition.guards[0].op"},
		{withGuard(`{"signal": "a", "op": "lt"}`), "definition.guards[0].value"},
		{withGuard(`{"signal": "a", "op": "lt", "value": "1"}`), "definition.guards[0].value"},
		{withGuard(`{"signal": "a", "op": "lt", "value": 1e999}`), "definition.guards[0].value"},
		{withGuard(`{"signal": "a", "op": "lt", "value": 1}, {"signal": "a", "op": "ge", "value": -1e400}`), "definition.guards[1].value"},
		{`{"terms": ["a"]}`, "definition.terms[0]"},
		{`{"terms": [{"weight": 1}]}`, "definition.terms[0].signal"},
		{`{"terms": [{"signal": "a"}]}`, "definition.terms[0].weight"},
		{`{"terms": [{"signal": "a", "weight": "1"}]}`, "definition.terms[0].weight"},
		{`{"terms": [{"signal": "a", "weight": 1e999}]}`, "definition.terms[0].weight"},
		{`{"terms": [{"signal": "a", "weight": 1, "agg": "median"}]}`, "definition.terms[0].agg"},
		{`{"terms": [{"signal": "a", "weight": 1, "agg": "LAST"}]}`, "definition.terms[0].agg"},
		{withTerm(`"agg": 1`), "definition.terms[1].agg"},
		{withTerm(`"scale": [5, 1]`), "definition.terms[1].scale"},
		{withTerm(`"scale": [1, 1]`), "definition.terms[1].scale"},
		{withTerm(`"scale": [1]`), "definition.terms[1].scale"},
		{withTerm(`"scale": [1, 2, 3]`), "definition.terms[1].scale"},
		{withTerm(`"scale": "1-5"`), "definition.terms[1].scale"},
		{withTerm(`"scale": [1, "5"]`), "definition.terms[1].scale[1]"},
		{withTerm(`"scale": [-1e999, 5]`), "definition.terms[1].scale[0]"},
		{withTerm(`"within_s": -1`), "definition.terms[1].within_s"},
		{withTerm(`"within_s": "1"`), "definition.terms[1].within_s"},
		{withTerm(`"missing": "zero"`), "definition.terms[1].missing"},
		{withTerm(`"missing": false`), "definition.terms[1].missing"},
		{withTerm(`"missing": 1e999`), "definition.terms[1].missing"},
		{withTerm(`"evidence": "yes"`), "definition.terms[1].evidence"},
		{withTerm(`"evidence": 1`), "definition.terms[1].evidence"},
		{withTop(`"bounds": [1, 0]`), "definition.bounds"},
		{withTop(`"bounds": [0, 0]`), "definition.bounds"},
		{withTop(`"bounds": [0]`), "definition.bounds"},
		{withTop(`"bounds": {"lo": 0, "hi": 1}`), "definition.bounds"},
		{withTop(`"bounds": [0, 1e999]`), "definition.bounds[1]"},
		// The first error wins.
		{`{"horizon_s": 0, "terms": []}`, "definition.horizon_s"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.json), "definition")
		var fe *field.Error
		if !errors.As(err, &fe) || !errors.Is(err, field.ErrInvalid) {
			t.Errorf("%s: got %v, want a *field.Error at %q", tt.json, err, tt.path)
			continue
		}
		if fe.Path != tt.path {
			t.Errorf("%s: got %q, want path %q", tt.json, err, tt.path)
		}
		if fe.Reason == "" {
			t.Errorf("%s: empty reason", tt.json)
		}
	}
}

func TestParseErrorMessages(t *testing.T) {
	tests := []struct{ json, path, want string }{
		{`{"terms": [{"signal": "a", "weight": 1}, {"signal": "b", "weight": 1, "scale": [5, 1]}]}`, "definition",
			"definition.terms[1].scale: lo must be below hi"},
		{`{"terms": [{"signal": "a", "weight": 1, "agg": "median"}]}`, "definition",
			"definition.terms[0].agg: must be one of last, first, sum, max, min, mean, count"},
		{`{"terms": []}`, "", "terms: must not be empty"},
		{`{"default": 2, "terms": [{"signal": "a", "weight": 1}]}`, "definition",
			"definition.default: must be within bounds [0, 1]"},
	}
	for _, tt := range tests {
		if _, err := Parse([]byte(tt.json), tt.path); err == nil || err.Error() != tt.want {
			t.Errorf("%s: got %v, want %q", tt.json, err, tt.want)
		}
	}
}

func TestParseValueRequiresAValue(t *testing.T) {
	_, err := ParseValue(nil, "definition")
	var fe *field.Error
	if !errors.As(err, &fe) || fe.Path != "definition" {
		t.Fatalf("got %v", err)
	}
}
