package objective

import (
	"math"
	"strings"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/valyala/fastjson"
)

// parsers are reused across calls; a fastjson.Parser is not safe for
// concurrent use, so each call takes its own from the pool.
var parsers fastjson.ParserPool

// Parse decodes and validates a JSON definition. path prefixes the field
// paths in errors (the HTTP door passes "definition"), and every error is a
// *field.Error; malformed JSON is one with an empty path. Unknown fields are
// ignored, a null member counts as absent, and of duplicate keys the first wins.
func Parse(data []byte, path string) (Definition, error) {
	p := parsers.Get()
	defer parsers.Put(p)
	// The parser runs first because it bounds nesting depth; the validator
	// then rejects what the lenient parser lets through (NaN, control
	// characters in strings, malformed numbers in ignored members).
	v, err := p.ParseBytes(data)
	if err == nil {
		err = fastjson.ValidateBytes(data)
	}
	if err != nil {
		return Definition{}, field.Errorf("", "malformed JSON: %v", err)
	}
	return ParseValue(v, path)
}

// ParseValue is Parse for a definition already parsed as part of a larger
// body, e.g. the "definition" member of a PUT. A nil v is "is required".
func ParseValue(v *fastjson.Value, path string) (Definition, error) {
	var dec decoder
	o := dec.object(v, path)
	d := Definition{HorizonS: defaultHorizonS, Bounds: [2]float64{0, 1}}
	if x := member(o, "horizon_s"); x != nil {
		p := field.Join(path, "horizon_s")
		if d.HorizonS = dec.number(x, p); d.HorizonS <= 0 {
			dec.fail(p, "must be positive")
		}
	}
	if x := member(o, "default"); x != nil {
		d.Default = dec.numberOr(x, field.Join(path, "default"), "exclude")
	}
	if x := member(o, "guards"); x != nil {
		p := field.Join(path, "guards")
		for i, g := range dec.array(x, p) {
			d.Guards = append(d.Guards, dec.guard(g, field.Index(p, i)))
		}
	}
	p := field.Join(path, "terms")
	terms := dec.array(member(o, "terms"), p)
	if len(terms) == 0 {
		dec.fail(p, "must not be empty")
	}
	for i, t := range terms {
		d.Terms = append(d.Terms, dec.term(t, field.Index(p, i)))
	}
	if x := member(o, "bounds"); x != nil {
		d.Bounds = dec.pair(x, field.Join(path, "bounds"))
	}
	if d.Default != nil && (*d.Default < d.Bounds[0] || *d.Default > d.Bounds[1]) {
		dec.fail(field.Join(path, "default"), "must be within bounds [%v, %v]", d.Bounds[0], d.Bounds[1])
	}
	if dec.err != nil {
		return Definition{}, dec.err
	}
	return d, nil
}

func (dec *decoder) guard(v *fastjson.Value, path string) Guard {
	o := dec.object(v, path)
	return Guard{
		Signal: dec.signal(member(o, "signal"), field.Join(path, "signal")),
		Op:     Op(dec.enum(member(o, "op"), field.Join(path, "op"), "lt", "le", "gt", "ge", "eq", "ne")),
		Value:  dec.number(member(o, "value"), field.Join(path, "value")),
	}
}

func (dec *decoder) term(v *fastjson.Value, path string) Term {
	o := dec.object(v, path)
	t := Term{
		Signal:   dec.signal(member(o, "signal"), field.Join(path, "signal")),
		Weight:   dec.number(member(o, "weight"), field.Join(path, "weight")),
		Agg:      AggLast,
		Evidence: true,
	}
	if x := member(o, "agg"); x != nil {
		t.Agg = Agg(dec.enum(x, field.Join(path, "agg"), "last", "first", "sum", "max", "min", "mean", "count"))
	}
	if x := member(o, "scale"); x != nil {
		s := dec.pair(x, field.Join(path, "scale"))
		t.Scale = &s
	}
	if x := member(o, "within_s"); x != nil {
		p := field.Join(path, "within_s")
		w := dec.number(x, p)
		if w < 0 {
			dec.fail(p, "must not be negative")
		}
		t.WithinS = &w
	}
	if x := member(o, "missing"); x != nil {
		t.Missing = dec.numberOr(x, field.Join(path, "missing"), "skip")
	}
	if x := member(o, "evidence"); x != nil {
		t.Evidence = dec.boolean(x, field.Join(path, "evidence"))
	}
	return t
}

// decoder keeps the first validation error, like bufio.Scanner, so that
// ParseValue reads as a list of fields rather than a ladder of checks.
// Decoding goes on after a failure, but only the first error is kept and
// ParseValue discards the partial Definition.
type decoder struct{ err error }

func (dec *decoder) fail(path, format string, args ...any) {
	if dec.err == nil {
		dec.err = field.Errorf(path, format, args...)
	}
}

// member returns o's key, or nil when o is nil or the member is absent or null.
func member(o *fastjson.Object, key string) *fastjson.Value {
	if o == nil {
		return nil
	}
	v := o.Get(key)
	if v != nil && v.Type() == fastjson.TypeNull {
		return nil
	}
	return v
}

func (dec *decoder) object(v *fastjson.Value, path string) *fastjson.Object {
	if v == nil {
		dec.fail(path, "is required")
		return nil
	}
	o, err := v.Object()
	if err != nil {
		dec.fail(path, "must be an object")
	}
	return o
}

func (dec *decoder) array(v *fastjson.Value, path string) []*fastjson.Value {
	if v == nil {
		dec.fail(path, "is required")
		return nil
	}
	a, err := v.Array()
	if err != nil {
		dec.fail(path, "must be an array")
	}
	if dec.err != nil {
		return nil
	}
	return a
}

func (dec *decoder) number(v *fastjson.Value, path string) float64 {
	if v == nil {
		dec.fail(path, "is required")
		return 0
	}
	if v.Type() != fastjson.TypeNumber {
		dec.fail(path, "must be a number")
		return 0
	}
	f, err := v.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		dec.fail(path, "must be a finite number")
		return 0
	}
	return f
}

// numberOr decodes a member that is either the string word or a number;
// word gives nil.
func (dec *decoder) numberOr(v *fastjson.Value, path, word string) *float64 {
	if v.Type() == fastjson.TypeString && string(v.GetStringBytes()) == word {
		return nil
	}
	if v.Type() != fastjson.TypeNumber {
		dec.fail(path, "must be %q or a number", word)
		return nil
	}
	f := dec.number(v, path)
	return &f
}

// pair decodes [lo, hi] with lo < hi.
func (dec *decoder) pair(v *fastjson.Value, path string) [2]float64 {
	a, err := v.Array()
	if err != nil || len(a) != 2 {
		dec.fail(path, "must be an array of two numbers")
		return [2]float64{}
	}
	p := [2]float64{dec.number(a[0], field.Index(path, 0)), dec.number(a[1], field.Index(path, 1))}
	if !(p[0] < p[1]) {
		dec.fail(path, "lo must be below hi")
	}
	return p
}

func (dec *decoder) boolean(v *fastjson.Value, path string) bool {
	b, err := v.Bool()
	if err != nil {
		dec.fail(path, "must be a boolean")
	}
	return b
}

// enum decodes a string that must be one of words.
func (dec *decoder) enum(v *fastjson.Value, path string, words ...string) string {
	if v == nil {
		dec.fail(path, "is required")
		return ""
	}
	s := v.GetStringBytes() // nil unless v is a string
	for _, w := range words {
		if string(s) == w {
			return w
		}
	}
	dec.fail(path, "must be one of %s", strings.Join(words, ", "))
	return ""
}

// signal decodes a signal kind: 1 to 100 of [a-zA-Z0-9_.-].
func (dec *decoder) signal(v *fastjson.Value, path string) string {
	if v == nil {
		dec.fail(path, "is required")
		return ""
	}
	s, err := v.StringBytes()
	if err != nil {
		dec.fail(path, "must be a string")
		return ""
	}
	if !validKind(s) {
		dec.fail(path, "must be 1 to 100 of a-z A-Z 0-9 _ . -")
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
