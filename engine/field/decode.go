package field

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/internal/jsonw"
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
	switch {
	case err == nil:
	case path == "":
		d.Fail(path, "body must be a JSON object")
	default:
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

// ParseJSON parses data as RFC 8259 JSON in UTF-8 and decodes it with
// decode. A malformed or non-finite number, a string that is not UTF-8 or
// a key given twice in one object, anywhere in the document, even in a
// member no decoder reads, is an *Error at its path (path prefixes it, as
// decode's own paths); any other malformed JSON is one with an empty path.
// So every number a decoder sees is finite and was written as JSON writes
// numbers.
//
// fastjson's parser alone is too lenient (it reads "+1", "1e" and "-.5e"
// as 0, and takes NaN and Inf), and its validator names no field and
// accepts invalid UTF-8. The parser runs first because it bounds nesting
// depth; the walk over its tree names a bad value; the validator then
// catches what the tree no longer shows (control characters and bad
// escapes in strings).
func ParseJSON[T any](data []byte, path string, decode func(v *fastjson.Value) (T, error)) (T, error) {
	var zero T
	p := parsers.Get()
	defer parsers.Put(p)
	v, err := p.ParseBytes(data)
	if err != nil {
		return zero, malformed(data, err)
	}
	// The common case, checked without building a path per member: the
	// text is strict JSON in UTF-8, every number finite, every key once in
	// its object. A \u escape may decode to what UTF-8 forbids (a lone
	// surrogate), so a body with one takes the walk below.
	if utf8.Valid(data) && !bytes.Contains(data, []byte(`\u`)) && fastjson.ValidateBytes(data) == nil && plain(v) {
		return decode(v)
	}
	if err := strict(v, path); err != nil {
		return zero, err
	}
	if !utf8.Valid(data) {
		return zero, malformed(data, errors.New("not valid UTF-8"))
	}
	if err := fastjson.ValidateBytes(data); err != nil {
		return zero, malformed(data, err)
	}
	if err := loneSurrogate(data, path); err != nil {
		return zero, err
	}
	return decode(v)
}

// malformed is the error of a body a parser refused: the byte offset and
// what was expected there, or the parser's own words (err) when the scan
// finds nothing wrong.
func malformed(data []byte, err error) error {
	if msg := syntaxError(data); msg != "" {
		return Errorf("", "malformed JSON %s", msg)
	}
	return Errorf("", "malformed JSON: %v", err)
}

// plain reports whether every number under v is finite and no object
// under it has a key twice.
func plain(v *fastjson.Value) bool {
	switch v.Type() {
	case fastjson.TypeNumber:
		f, err := v.Float64()
		return err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	case fastjson.TypeObject:
		o := v.GetObject()
		if _, twice := repeatedKey(o); twice {
			return false
		}
		ok := true
		o.Visit(func(_ []byte, m *fastjson.Value) { ok = ok && plain(m) })
		return ok
	case fastjson.TypeArray:
		for _, e := range v.GetArray() {
			if !plain(e) {
				return false
			}
		}
	}
	return true
}

// repeatedKey returns the first key of o that an earlier member has too.
// JSON leaves what such an object means to the reader (fastjson's Get
// takes the first, encoding/json and most others the last), so a body
// holding one is refused rather than read differently from a proxy.
func repeatedKey(o *fastjson.Object) (key string, twice bool) {
	if o.Len() < 2 {
		return "", false
	}
	var (
		small [16][]byte
		keys  = small[:0]
		seen  map[string]bool // once keys is full
	)
	o.Visit(func(k []byte, _ *fastjson.Value) {
		switch {
		case twice:
			return
		case seen != nil:
			twice = seen[string(k)]
			seen[string(k)] = true
		case slices.ContainsFunc(keys, func(p []byte) bool { return bytes.Equal(p, k) }):
			twice = true
		case len(keys) < cap(keys):
			keys = append(keys, k)
		default:
			seen = make(map[string]bool, o.Len())
			for _, p := range keys {
				seen[string(p)] = true
			}
			seen[string(k)] = true
		}
		if twice {
			key = string(k)
		}
	})
	return key, twice
}

// strict returns an *Error at the path of the first value under v that
// strict JSON rejects and fastjson's parser took: a number that is not an
// RFC 8259 number or not finite (1e400), a string or key not in UTF-8, a
// key given twice in one object.
func strict(v *fastjson.Value, path string) error {
	switch v.Type() {
	case fastjson.TypeNumber:
		raw := v.MarshalTo(nil) // a number's text as the parser found it
		if !jsonw.ValidNumber(raw) {
			return Errorf(path, "must be a JSON number, not %s", Quote(string(raw)))
		}
		if f, err := v.Float64(); err != nil || math.IsInf(f, 0) {
			return Errorf(path, "must be a finite number")
		}
	case fastjson.TypeString:
		if !utf8.Valid(v.GetStringBytes()) {
			return Errorf(path, "must be valid UTF-8")
		}
	case fastjson.TypeObject:
		o := v.GetObject()
		if k, twice := repeatedKey(o); twice && utf8.ValidString(k) {
			return Errorf(Join(path, k), "is given more than once")
		}
		var err error
		o.Visit(func(k []byte, m *fastjson.Value) {
			switch {
			case err != nil:
			case !utf8.Valid(k):
				err = Errorf(path, "has a key that is not valid UTF-8")
			default:
				err = strict(m, Join(path, string(k)))
			}
		})
		return err
	case fastjson.TypeArray:
		for i, e := range v.GetArray() {
			if err := strict(e, Index(path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// loneSurrogate returns an *Error at the path (under root) of the first
// string or key of data, a valid JSON text, holding a \u escape of half a
// surrogate pair, which no UTF-8 text can hold; nil when there is none.
// fastjson keeps such an escape as its six characters, or, followed by
// another escape, decodes the two as U+FFFD, losing the second: a value
// stored so would not be the one sent.
func loneSurrogate(data []byte, root string) error {
	type level struct {
		path  string // the container's
		array bool
		index int    // an array's element being read
		key   string // an object's member being read
		inKey bool   // an object's next string is a key
	}
	var stack []level
	at := func() string { // the path of the value being read
		if len(stack) == 0 {
			return root
		}
		l := &stack[len(stack)-1]
		if l.array {
			return Index(l.path, l.index)
		}
		return Join(l.path, l.key)
	}
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{':
			stack = append(stack, level{path: at(), inKey: true})
		case '[':
			stack = append(stack, level{path: at(), array: true})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if l := &stack[len(stack)-1]; l.array {
				l.index++
			} else {
				l.inKey = true
			}
		case '"':
			end, half := scanEscapes(data, i+1)
			if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].inKey {
				l := &stack[n-1]
				if half != "" {
					return Errorf(l.path, "has a key that is not valid UTF-8 (\\u%s is half a surrogate pair)", half)
				}
				l.key, l.inKey = unescape(data[i:end+1]), false
			} else if half != "" {
				return Errorf(at(), "must be valid UTF-8 (\\u%s is half a surrogate pair)", half)
			}
			i = end
		}
	}
	return nil
}

// scanEscapes scans the string whose text begins at data[start] up to its
// closing quote, returning where that is and the first lone surrogate's
// four hex digits ("" for none).
func scanEscapes(data []byte, start int) (end int, half string) {
	for i := start; i < len(data); i++ {
		switch data[i] {
		case '"':
			return i, half
		case '\\':
			i++
			if data[i] != 'u' || i+4 >= len(data) {
				continue
			}
			hex := data[i+1 : i+5]
			i += 4
			r, _ := strconv.ParseUint(string(hex), 16, 32)
			switch {
			case half != "" || r < 0xd800 || r > 0xdfff:
			case r <= 0xdbff && i+6 < len(data) && data[i+1] == '\\' && data[i+2] == 'u' && isLowSurrogate(data[i+3:i+7]):
				i += 6 // a pair
			default:
				half = string(hex)
			}
		}
	}
	return len(data), half
}

func isLowSurrogate(hex []byte) bool {
	r, err := strconv.ParseUint(string(hex), 16, 32)
	return err == nil && r >= 0xdc00 && r <= 0xdfff
}

// unescape is the value of a JSON string literal (quotes included).
func unescape(lit []byte) string {
	if !bytes.ContainsRune(lit, '\\') {
		return string(lit[1 : len(lit)-1])
	}
	var p fastjson.Parser
	v, err := p.ParseBytes(lit)
	if err != nil {
		return string(lit[1 : len(lit)-1])
	}
	return string(v.GetStringBytes())
}
