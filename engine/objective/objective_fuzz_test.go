package objective

import (
	"errors"
	"testing"

	"github.com/plaudit/plaudit/engine/field"
)

// FuzzParse checks that Parse never panics, fails only with field errors,
// and that whatever it accepts survives a trip through AppendJSON unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(seedBody))
	f.Add(Default().AppendJSON(nil))
	f.Add([]byte(`{"horizon_s": 1, "default": 0.5, "guards": [{"signal": "a", "op": "ne", "value": -0}],` +
		`"terms": [{"signal": "b", "weight": -1e308, "agg": "mean", "scale": [-1e308, 1e308], "within_s": 0, "missing": 1, "evidence": false}],` +
		`"bounds": [-1e-300, 1e-300]}`))
	f.Add([]byte(`{"terms": [{"signal": "a", "weight": 1, "scale": [1, 1]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data, "definition")
		if err != nil {
			var fe *field.Error
			if !errors.As(err, &fe) || !errors.Is(err, field.ErrInvalid) {
				t.Fatalf("%q: error %v is not a *field.Error", data, err)
			}
			return
		}
		text := d.AppendJSON(nil)
		again, err := Parse(text, "definition")
		if err != nil {
			t.Fatalf("%q: canonical form %s does not parse: %v", data, text, err)
		}
		if !equalDefinitions(again, d) {
			t.Fatalf("%q: canonical form %s parses to %+v, want %+v", data, text, again, d)
		}
	})
}
