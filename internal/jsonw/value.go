package jsonw

import (
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// Value appends v as JSON that any strict parser accepts: strings through
// String (control characters escaped, invalid UTF-8 as U+FFFD), numbers as
// their text when it is an RFC 8259 number and null otherwise, members in
// document order. fastjson's own MarshalTo is not used because it writes
// Go escapes (\x00) and raw invalid UTF-8, and echoes a lenient parse's
// numbers ("+1", NaN) verbatim.
func Value(dst []byte, v *fastjson.Value) []byte {
	switch v.Type() {
	case fastjson.TypeObject:
		dst = append(dst, '{')
		v.GetObject().Visit(func(k []byte, m *fastjson.Value) {
			dst = Key(dst, string(k))
			dst = Value(dst, m)
		})
		return append(dst, '}')
	case fastjson.TypeArray:
		dst = append(dst, '[')
		for i, e := range v.GetArray() {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = Value(dst, e)
		}
		return append(dst, ']')
	case fastjson.TypeString:
		return String(dst, string(v.GetStringBytes()))
	case fastjson.TypeNumber:
		if n := v.MarshalTo(nil); ValidNumber(n) {
			return append(dst, n...)
		}
	case fastjson.TypeTrue:
		return append(dst, "true"...)
	case fastjson.TypeFalse:
		return append(dst, "false"...)
	}
	return append(dst, "null"...)
}

// Raw appends raw, JSON text kept from a request, as it is when it is valid
// JSON in valid UTF-8, and otherwise as Value renders its lenient parse
// (null if even that fails). Requests are validated before their JSON is
// kept, so the fallback is for records written before they were.
func Raw(dst []byte, raw string) []byte {
	if utf8.ValidString(raw) && fastjson.Validate(raw) == nil {
		return append(dst, raw...)
	}
	var p fastjson.Parser
	v, err := p.Parse(raw)
	if err != nil {
		return append(dst, "null"...)
	}
	return Value(dst, v)
}
