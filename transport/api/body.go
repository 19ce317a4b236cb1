package api

import (
	"math"
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/internal/jsonw"
)

// body reads fields of a parsed JSON object, naming the path of the first
// field that is wrong. A JSON null counts as absent. The strings it returns
// are copies, safe to keep after the request.
type body struct {
	v    *fastjson.Value
	path string
	err  error // the first failure; nested bodies record it on their root
	root *body // nil on the body parseBody made
}

// top is the body that holds the first failure.
func (b *body) top() *body {
	if b.root != nil {
		return b.root
	}
	return b
}

// orEmptyObject is raw, or {} for an empty body: a body left out reads as
// one with no members, whose required members are then named as missing.
func orEmptyObject(raw []byte) []byte {
	if len(raw) == 0 {
		return []byte("{}")
	}
	return raw
}

// parseBody parses raw as a JSON object and calls fn with it. The JSON is
// held to RFC 8259 by field.ParseJSON: a malformed number anywhere in the
// body is a 400 naming its path, never a 0.
func parseBody(raw []byte, fn func(b *body) error) error {
	_, err := field.ParseJSON(orEmptyObject(raw), "", func(v *fastjson.Value) (struct{}, error) {
		if v.Type() != fastjson.TypeObject {
			return struct{}{}, field.Errorf("", "body must be a JSON object")
		}
		b := &body{v: v}
		if err := fn(b); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, b.err
	})
	return err
}

func (b *body) fail(key, format string, args ...any) {
	b.record(field.Errorf(field.Join(b.path, key), format, args...))
}

// failMember is fail of member of the object under key (a label, a
// detail's entry): its key joined as one, however it is spelled.
func (b *body) failMember(key, member, format string, args ...any) {
	b.record(field.Errorf(field.Join(field.Join(b.path, key), member), format, args...))
}

// record keeps err as the body's failure unless it has one already.
func (b *body) record(err error) {
	if t := b.top(); t.err == nil {
		t.err = err
	}
}

// failed reports whether any field of the whole body has failed.
func (b *body) failed() bool { return b.top().err != nil }

func (b *body) get(key string) *fastjson.Value {
	if b.failed() {
		return nil
	}
	v := b.v.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		return nil
	}
	return v
}

// has reports whether key is present and not null.
func (b *body) has(key string) bool { return b.get(key) != nil }

// json returns the value at key as JSON text fit to keep and echo (see
// jsonw.Value), or "" when absent.
func (b *body) json(key string) string {
	v := b.get(key)
	if v == nil {
		return ""
	}
	return string(jsonw.Value(nil, v))
}

// object returns a reader for the nested object at key, or nil when absent.
func (b *body) object(key string) *body {
	v := b.get(key)
	if v == nil {
		return nil
	}
	if v.Type() != fastjson.TypeObject {
		b.fail(key, "must be an object")
		return nil
	}
	return &body{v: v, path: field.Join(b.path, key), root: b.top()}
}

func (b *body) str(key string, required bool) string {
	v := b.get(key)
	if v == nil {
		if required {
			b.fail(key, "is required")
		}
		return ""
	}
	s, err := v.StringBytes()
	if err != nil {
		b.fail(key, "must be a string")
		return ""
	}
	return string(s)
}

// num returns the number at key and whether it was present.
func (b *body) num(key string, required bool) (float64, bool) {
	v := b.get(key)
	if v == nil {
		if required {
			b.fail(key, "is required")
		}
		return 0, false
	}
	if v.Type() != fastjson.TypeNumber {
		b.fail(key, "must be a number")
		return 0, false
	}
	f := v.GetFloat64()
	if math.IsInf(f, 0) || math.IsNaN(f) {
		b.fail(key, "must be a finite number")
		return 0, false
	}
	return f, true
}

func (b *body) boolean(key string, required bool) (bool, bool) {
	v := b.get(key)
	if v == nil {
		if required {
			b.fail(key, "is required")
		}
		return false, false
	}
	switch v.Type() {
	case fastjson.TypeTrue:
		return true, true
	case fastjson.TypeFalse:
		return false, true
	}
	b.fail(key, "must be a boolean")
	return false, false
}

// time reads an RFC 3339 timestamp within field.Time's range; absent is
// the zero time.
func (b *body) time(key string) time.Time {
	s := b.str(key, false)
	if s == "" || b.failed() {
		return time.Time{}
	}
	t, err := field.Time(field.Join(b.path, key), s)
	if err != nil {
		b.record(err)
	}
	return t
}

// labels reads an object of string values.
func (b *body) labels(key string) map[string]string {
	v := b.get(key)
	if v == nil {
		return nil
	}
	o, err := v.Object()
	if err != nil {
		b.fail(key, "must be an object of strings")
		return nil
	}
	m := make(map[string]string, o.Len())
	o.Visit(func(k []byte, lv *fastjson.Value) {
		s, err := lv.StringBytes()
		if err != nil {
			b.failMember(key, string(k), "must be a string")
			return
		}
		m[string(k)] = string(s)
	})
	return m
}

// strict fails on the first member of the object that is not in allowed:
// the seed-004 door rejects unknown fields.
func (b *body) strict(allowed ...string) {
	if b.failed() {
		return
	}
	o, _ := b.v.Object()
	o.Visit(func(k []byte, _ *fastjson.Value) {
		for _, a := range allowed {
			if string(k) == a {
				return
			}
		}
		b.fail(string(k), "unknown field")
	})
}
