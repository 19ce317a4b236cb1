// Package jsonw appends JSON values to byte slices without reflection, for
// the response bodies and log records on Plaudit's hot paths.
package jsonw

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

const hex = "0123456789abcdef"

// plain holds the bytes String copies as they are: ASCII but for control
// characters, the quote, the backslash and HTML's <, > and &. (A table:
// one load a byte, where six comparisons were 2 % of a selection's CPU.)
var plain = plainBytes()

func plainBytes() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}

// String appends s as a JSON string. Invalid UTF-8 becomes U+FFFD.
func String(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Float appends f in the shortest form that round-trips. Non-finite values,
// which the API never accepts, are written as null rather than invalid JSON.
func Float(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	abs := math.Abs(f)
	if abs < 1e-6 || abs >= 1e21 {
		return strconv.AppendFloat(dst, f, 'e', -1, 64)
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// FloatPtr appends *f, or null when f is nil.
func FloatPtr(dst []byte, f *float64) []byte {
	if f == nil {
		return append(dst, "null"...)
	}
	return Float(dst, *f)
}

// Int appends i.
func Int(dst []byte, i int64) []byte { return strconv.AppendInt(dst, i, 10) }

// Bool appends b.
func Bool(dst []byte, b bool) []byte { return strconv.AppendBool(dst, b) }

// The years RFC 3339 can write.
var (
	minTime = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// Time appends t as an RFC 3339 string in UTC with nanoseconds trimmed. A
// time outside years 0000-9999, which the format cannot write (Go writes a
// fifth digit), is clamped into them: requests cannot name such times,
// but records kept before they were bounded can still add up to one.
func Time(dst []byte, t time.Time) []byte {
	t = t.UTC()
	if t.Before(minTime) {
		t = minTime
	} else if t.After(maxTime) {
		t = maxTime
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// TimeOrNull appends t, or null when t is the zero time.
func TimeOrNull(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, "null"...)
	}
	return Time(dst, t)
}

// StringOrNull appends s, or null when s is empty.
func StringOrNull(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return String(dst, s)
}

// Strings appends ss as an array of strings ([] when empty).
func Strings(dst []byte, ss []string) []byte {
	dst = append(dst, '[')
	for i, s := range ss {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = String(dst, s)
	}
	return append(dst, ']')
}

// Ints appends ns as an array of integers ([] when empty).
func Ints[T ~int | ~uint8](dst []byte, ns []T) []byte {
	dst = append(dst, '[')
	for i, n := range ns {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = Int(dst, int64(n))
	}
	return append(dst, ']')
}

// Key appends "k": after a comma when the object already has a member.
// It expects dst to end in '{' or a value.
func Key(dst []byte, k string) []byte {
	if n := len(dst); n > 0 && dst[n-1] != '{' && dst[n-1] != '[' {
		dst = append(dst, ',')
	}
	dst = String(dst, k)
	return append(dst, ':')
}

// StringMap appends m as an object with keys in sorted order.
func StringMap(dst []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	dst = append(dst, '{')
	for _, k := range keys {
		dst = Key(dst, k)
		dst = String(dst, m[k])
	}
	return append(dst, '}')
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
