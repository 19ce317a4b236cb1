package field

import (
	"math"
	"strings"

	"github.com/valyala/fastjson"
)

// Decoder reads a parsed JSON body field by field and keeps the first
// validation error, like bufio.Scanner, so that a parser reads as a list
// of fields rather than a ladder of checks. Decoding goes on after a
// failure, but only the first error is kept; a parser returns Err and
// discards what it decoded. Parsers embed it and add their own fields.
type Decoder struct{ Err error }

// Fail records an *Error at path unless one is recorded already.
func (d *Decoder) Fail(path, format string, args ...any) {
	if d.Err == nil {
		d.Err = Errorf(path, format, args...)
	}
}

// Member returns o's key, or nil when o is nil or the member is absent or
// null: a null member counts as absent. Of duplicate keys the first wins.
func Member(o *fastjson.Object, key string) *fastjson.Value {
	if o == nil {
		return nil
	}
	v := o.Get(key)
	if v != nil && v.Type() == fastjson.TypeNull {
		return nil
	}
	return v
}

// Object decodes a required object.
func (d *Decoder) Object(v *fastjson.Value, path string) *fastjson.Object {
	if v == nil {
		d.Fail(path, "is required")
		return nil
	}
	o, err := v.Object()
	if err != nil {
		d.Fail(path, "must be an object")
	}
	return o
}

// Array decodes a required array; nil once any field has failed.
func (d *Decoder) Array(v *fastjson.Value, path string) []*fastjson.Value {
	if v == nil {
		d.Fail(path, "is required")
		return nil
	}
	a, err := v.Array()
	if err != nil {
		d.Fail(path, "must be an array")
	}
	if d.Err != nil {
		return nil
	}
	return a
}

// Number decodes a required finite number.
func (d *Decoder) Number(v *fastjson.Value, path string) float64 {
	if v == nil {
		d.Fail(path, "is required")
		return 0
	}
	if v.Type() != fastjson.TypeNumber {
		d.Fail(path, "must be a number")
		return 0
	}
	f, err := v.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		d.Fail(path, "must be a finite number")
		return 0
	}
	return f
}

// Boolean decodes a boolean.
func (d *Decoder) Boolean(v *fastjson.Value, path string) bool {
	b, err := v.Bool()
	if err != nil {
		d.Fail(path, "must be a boolean")
	}
	return b
}

// Enum decodes a required string that must be one of words.
func (d *Decoder) Enum(v *fastjson.Value, path string, words ...string) string {
	if v == nil {
		d.Fail(path, "is required")
		return ""
	}
	s := v.GetStringBytes() // nil unless v is a string
	for _, w := range words {
		if string(s) == w {
			return w
		}
	}
	d.Fail(path, "must be one of %s", strings.Join(words, ", "))
	return ""
}

// parsers are reused across calls; a fastjson.Parser is not safe for
// concurrent use, so each call takes its own from the pool.
var parsers fastjson.ParserPool

// ParseJSON parses data and decodes it with decode. Malformed JSON is an
// *Error with an empty path. The parser runs first because it bounds
// nesting depth; the validator then rejects what the lenient parser lets
// through (NaN, control characters in strings, malformed numbers in
// ignored members).
func ParseJSON[T any](data []byte, decode func(v *fastjson.Value) (T, error)) (T, error) {
	p := parsers.Get()
	defer parsers.Put(p)
	v, err := p.ParseBytes(data)
	if err == nil {
		err = fastjson.ValidateBytes(data)
	}
	if err != nil {
		var zero T
		return zero, Errorf("", "malformed JSON: %v", err)
	}
	return decode(v)
}
