package field

import (
	"fmt"
	"unicode/utf8"
)

// syntaxError scans data as RFC 8259 JSON in UTF-8 and describes the first
// byte that breaks it: "at byte 17: expected ',' or '}' after an object
// member, found 'x'". It returns "" for a well-formed text. It runs only
// after a parser has refused a body, so it favours a precise message over
// speed.
func syntaxError(data []byte) string {
	s := scanner{data: data}
	s.space()
	if !s.value() {
		return s.msg
	}
	s.space()
	if s.i < len(s.data) {
		s.fail("expected the end of the document after the top-level value")
		return s.msg
	}
	return ""
}

// maxDepth is how deep the scanner follows nesting (fastjson stops at 300).
const maxDepth = 300

type scanner struct {
	data  []byte
	i     int
	depth int
	msg   string
}

// fail records the first error at the current offset, naming what is
// there instead.
func (s *scanner) fail(expected string) {
	if s.msg != "" {
		return
	}
	s.msg = fmt.Sprintf("at byte %d: %s, found %s", s.i, expected, s.found())
}

func (s *scanner) found() string {
	if s.i >= len(s.data) {
		return "the end of the input"
	}
	r, size := utf8.DecodeRune(s.data[s.i:])
	switch {
	case r == utf8.RuneError && size <= 1:
		return fmt.Sprintf("byte 0x%02x (not UTF-8)", s.data[s.i])
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf("control character %U", r)
	}
	return fmt.Sprintf("%q", r)
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

func (s *scanner) value() bool {
	switch c := s.peek(); {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		return s.string("a string")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	s.fail("expected a JSON value (object, array, string, number, true, false or null)")
	return false
}

func (s *scanner) nest() bool {
	s.depth++
	if s.depth > maxDepth {
		s.fail(fmt.Sprintf("expected nesting at most %d deep", maxDepth))
		return false
	}
	return true
}

func (s *scanner) object() bool {
	if !s.nest() {
		return false
	}
	s.i++ // '{'
	s.space()
	if s.peek() == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		if s.peek() != '"' {
			s.fail("expected '\"' to begin an object key")
			return false
		}
		if !s.string("an object key") {
			return false
		}
		s.space()
		if s.peek() != ':' {
			s.fail("expected ':' after an object key")
			return false
		}
		s.i++
		s.space()
		if !s.value() {
			return false
		}
		s.space()
		switch s.peek() {
		case ',':
			s.i++
			s.space()
		case '}':
			s.i++
			s.depth--
			return true
		default:
			s.fail("expected ',' or '}' after an object member")
			return false
		}
	}
}

func (s *scanner) array() bool {
	if !s.nest() {
		return false
	}
	s.i++ // '['
	s.space()
	if s.peek() == ']' {
		s.i++
		s.depth--
		return true
	}
	for {
		if !s.value() {
			return false
		}
		s.space()
		switch s.peek() {
		case ',':
			s.i++
			s.space()
		case ']':
			s.i++
			s.depth--
			return true
		default:
			s.fail("expected ',' or ']' after an array element")
			return false
		}
	}
}

// string scans a string; what names it in the messages ("an object key").
func (s *scanner) string(what string) bool {
	s.i++ // '"'
	for {
		if s.i >= len(s.data) {
			s.fail(fmt.Sprintf("expected '\"' to end %s", what))
			return false
		}
		c := s.data[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			s.i++
			if !s.escape() {
				return false
			}
		case c < 0x20:
			s.fail(fmt.Sprintf("expected a character of %s (control characters must be escaped)", what))
			return false
		case c < utf8.RuneSelf:
			s.i++
		default:
			r, size := utf8.DecodeRune(s.data[s.i:])
			if r == utf8.RuneError && size <= 1 {
				s.fail(fmt.Sprintf("expected a UTF-8 character in %s", what))
				return false
			}
			s.i += size
		}
	}
}

func (s *scanner) escape() bool {
	switch s.peek() {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i++
		return true
	case 'u':
		s.i++
		for range 4 {
			if !isHex(s.peek()) {
				s.fail("expected 4 hexadecimal digits after \\u")
				return false
			}
			s.i++
		}
		return true
	}
	s.fail(`expected an escape: \" \\ \/ \b \f \n \r \t or \uXXXX`)
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *scanner) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
		if isDigit(s.peek()) {
			s.fail("expected '.', 'e' or the end of the number after a leading 0")
			return false
		}
	case isDigit(c):
		for isDigit(s.peek()) {
			s.i++
		}
	default:
		s.fail("expected a digit in the number")
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !isDigit(s.peek()) {
			s.fail("expected a digit after the decimal point")
			return false
		}
		for isDigit(s.peek()) {
			s.i++
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !isDigit(s.peek()) {
			s.fail("expected a digit in the exponent")
			return false
		}
		for isDigit(s.peek()) {
			s.i++
		}
	}
	return true
}

func (s *scanner) literal(word string) bool {
	for k := 0; k < len(word); k++ {
		if s.peek() != word[k] {
			s.fail(fmt.Sprintf("expected %q", word))
			return false
		}
		s.i++
	}
	return true
}
