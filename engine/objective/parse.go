package objective

import (
	"github.com/plaudit/plaudit/engine/field"
	"github.com/valyala/fastjson"
)

// Parse decodes and validates a JSON definition. path prefixes the field
// paths in errors (the HTTP door passes "definition"), and every error is a
// *field.Error; malformed JSON is one with an empty path. Unknown fields are
// ignored, a null member counts as absent, and of duplicate keys the first wins.
func Parse(data []byte, path string) (Definition, error) {
	return field.ParseJSON(data, path, func(v *fastjson.Value) (Definition, error) { return ParseValue(v, path) })
}

// ParseValue is Parse for a definition already parsed as part of a larger
// body, e.g. the "definition" member of a PUT. A nil v is "is required".
func ParseValue(v *fastjson.Value, path string) (Definition, error) {
	var dec decoder
	o := dec.Object(v, path)
	d := Definition{HorizonS: defaultHorizonS, Bounds: [2]float64{0, 1}}
	if x := field.Member(o, "horizon_s"); x != nil {
		p := field.Join(path, "horizon_s")
		if d.HorizonS = dec.Number(x, p); d.HorizonS <= 0 {
			dec.Fail(p, "must be positive")
		}
		dec.duration(d.HorizonS, p)
	}
	if x := field.Member(o, "default"); x != nil {
		d.Default = dec.numberOr(x, field.Join(path, "default"), "exclude")
	}
	if x := field.Member(o, "guards"); x != nil {
		p := field.Join(path, "guards")
		for i, g := range dec.Array(x, p) {
			d.Guards = append(d.Guards, dec.guard(g, field.Index(p, i)))
		}
	}
	p := field.Join(path, "terms")
	terms := dec.Array(field.Member(o, "terms"), p)
	if len(terms) == 0 {
		dec.Fail(p, "must not be empty")
	}
	for i, t := range terms {
		d.Terms = append(d.Terms, dec.term(t, field.Index(p, i)))
	}
	if x := field.Member(o, "bounds"); x != nil {
		d.Bounds = dec.pair(x, field.Join(path, "bounds"))
	}
	if d.Default != nil && (*d.Default < d.Bounds[0] || *d.Default > d.Bounds[1]) {
		dec.Fail(field.Join(path, "default"), "must be within bounds [%v, %v]", d.Bounds[0], d.Bounds[1])
	}
	if dec.Err != nil {
		return Definition{}, dec.Err
	}
	return d, nil
}

func (dec *decoder) guard(v *fastjson.Value, path string) Guard {
	o := dec.Object(v, path)
	return Guard{
		Signal: dec.signal(field.Member(o, "signal"), field.Join(path, "signal")),
		Op:     Op(dec.Enum(field.Member(o, "op"), field.Join(path, "op"), "lt", "le", "gt", "ge", "eq", "ne")),
		Value:  dec.Number(field.Member(o, "value"), field.Join(path, "value")),
	}
}

func (dec *decoder) term(v *fastjson.Value, path string) Term {
	o := dec.Object(v, path)
	t := Term{
		Signal:   dec.signal(field.Member(o, "signal"), field.Join(path, "signal")),
		Weight:   dec.Number(field.Member(o, "weight"), field.Join(path, "weight")),
		Agg:      AggLast,
		Evidence: true,
	}
	if x := field.Member(o, "agg"); x != nil {
		t.Agg = Agg(dec.Enum(x, field.Join(path, "agg"), "last", "first", "sum", "max", "min", "mean", "count"))
	}
	if x := field.Member(o, "scale"); x != nil {
		s := dec.pair(x, field.Join(path, "scale"))
		t.Scale = &s
	}
	if x := field.Member(o, "within_s"); x != nil {
		p := field.Join(path, "within_s")
		w := dec.Number(x, p)
		if w < 0 {
			dec.Fail(p, "must not be negative")
		}
		dec.duration(w, p)
		t.WithinS = &w
	}
	if x := field.Member(o, "missing"); x != nil {
		t.Missing = dec.numberOr(x, field.Join(path, "missing"), "skip")
	}
	if x := field.Member(o, "evidence"); x != nil {
		t.Evidence = dec.Boolean(x, field.Join(path, "evidence"))
	}
	return t
}

// decoder is field.Decoder with the fields of a definition.
type decoder struct{ field.Decoder }

// duration fails a number of seconds over MaxDurationS.
func (dec *decoder) duration(s float64, path string) {
	if s > MaxDurationS {
		dec.Fail(path, "must be at most %d seconds (10 years)", MaxDurationS)
	}
}

// numberOr decodes a member that is either the string word or a number;
// word gives nil.
func (dec *decoder) numberOr(v *fastjson.Value, path, word string) *float64 {
	if v.Type() == fastjson.TypeString && string(v.GetStringBytes()) == word {
		return nil
	}
	if v.Type() != fastjson.TypeNumber {
		dec.Fail(path, "must be %q or a number", word)
		return nil
	}
	f := dec.Number(v, path)
	return &f
}

// pair decodes [lo, hi] with lo < hi.
func (dec *decoder) pair(v *fastjson.Value, path string) [2]float64 {
	a, err := v.Array()
	if err != nil || len(a) != 2 {
		dec.Fail(path, "must be an array of two numbers")
		return [2]float64{}
	}
	p := [2]float64{dec.Number(a[0], field.Index(path, 0)), dec.Number(a[1], field.Index(path, 1))}
	if !(p[0] < p[1]) {
		dec.Fail(path, "lo must be below hi")
	}
	return p
}

// signal decodes a signal kind: 1 to 100 of [a-zA-Z0-9_.-].
func (dec *decoder) signal(v *fastjson.Value, path string) string {
	if v == nil {
		dec.Fail(path, "is required")
		return ""
	}
	s, err := v.StringBytes()
	if err != nil {
		dec.Fail(path, "must be a string")
		return ""
	}
	if !validKind(s) {
		dec.Fail(path, "must be 1 to 100 of a-z A-Z 0-9 _ . -")
		return ""
	}
	return string(s)
}

func validKind(s []byte) bool {
	if len(s) == 0 || len(s) > 100 {
		return false
	}
	for _, c := range s {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}
