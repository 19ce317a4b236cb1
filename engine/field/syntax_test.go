package field

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// TestMalformedJSONNamesOffsetAndExpectation: a body no parser takes is
// refused with the byte where it breaks and what JSON wanted there.
func TestMalformedJSONNamesOffsetAndExpectation(t *testing.T) {
	cases := []struct {
		body, want string
	}{
		{``, "malformed JSON at byte 0: expected a JSON value (object, array, string, number, true, false or null), found the end of the input"},
		{`{"a": 1 "b": 2}`, `malformed JSON at byte 8: expected ',' or '}' after an object member, found '"'`},
		{`{"a" 1}`, `malformed JSON at byte 5: expected ':' after an object key, found '1'`},
		{`{a: 1}`, `malformed JSON at byte 1: expected '"' to begin an object key, found 'a'`},
		{`{"a": [1, 2}`, `malformed JSON at byte 11: expected ',' or ']' after an array element, found '}'`},
		{`{"a": tru}`, `malformed JSON at byte 9: expected "true", found '}'`},
		{`{"a": "x`, `malformed JSON at byte 8: expected '"' to end a string, found the end of the input`},
		{"{\"a\": \"x\ny\"}", `malformed JSON at byte 8: expected a character of a string (control characters must be escaped), found control character U+000A`},
		{`{"a": "\q"}`, `malformed JSON at byte 8: expected an escape: \" \\ \/ \b \f \n \r \t or \uXXXX, found 'q'`},
		{`{"a": "\u12g4"}`, `malformed JSON at byte 11: expected 4 hexadecimal digits after \u, found 'g'`},
		{`{"a": 1} x`, `malformed JSON at byte 9: expected the end of the document after the top-level value, found 'x'`},
		{"{\"a\": 1}\xff", `malformed JSON at byte 8: expected the end of the document after the top-level value, found byte 0xff (not UTF-8)`},
		{`{"a": 1,}`, `malformed JSON at byte 8: expected '"' to begin an object key, found '}'`},
		{`[` + strings.Repeat(`[`, 400), `malformed JSON at byte 300: expected nesting at most 300 deep, found '['`},
	}
	for _, c := range cases {
		_, err := ParseJSON([]byte(c.body), "", func(*fastjson.Value) (int, error) { return 0, nil })
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseJSON(%q)\n got %v\nwant %s", c.body, err, c.want)
		}
	}
}

// TestSyntaxErrorAgreesWithEncodingJSON: the scanner accepts exactly what
// the standard library's validator accepts in UTF-8 (which it does not
// insist on), on texts near the edges of the
// grammar (the depth limit aside).
func TestSyntaxErrorAgreesWithEncodingJSON(t *testing.T) {
	texts := []string{
		`0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e`, `1e+`, `1E-2`, `+1`, `-01`, `1.5e3x`,
		`""`, `"\u00e9"`, `"\ud800"`, `"a\/b"`, "\"\x7f\"", "\"\xc3\xa9\"", "\"\xc3\"", "\"\xed\xa0\x80\"",
		`[]`, `[ ]`, `[1,]`, `[,1]`, `{}`, `{ }`, `{"a":1}`, `{"a":1,"b":[true,false,null]}`, `{"a"}`,
		`nul`, `nulll`, `true false`, " \t\r\n1 \n", "\x00", `{"a":{"b":{"c":[{}]}}}`, `[1 2]`, `"abc`,
		// Digits and hex digits at and past their bounds, exponents with and
		// without a sign, and U+FFFD written out (not an invalid byte).
		`10`, `19`, `[0,9]`, `1e5`, `1e+5`, `1e-5`, `1ex`,
		`"\u0000"`, `"\u0999"`, `"\uaaaa"`, `"\uffff"`, `"\uAAAA"`, `"\uFFFF"`,
		`"\u00/0"`, `"\u00:0"`, "\"\\u00`0\"", `"\u00g0"`, `"\u00@0"`, `"\u00G0"`,
		"\"\xef\xbf\xbd\"",
		// Siblings close their nesting: more of them than maxDepth is fine.
		"[" + strings.Repeat(`{},`, 2*maxDepth) + "{}]",
		"[" + strings.Repeat(`{"a":1},`, 2*maxDepth) + "{}]",
		"[" + strings.Repeat(`[],`, 2*maxDepth) + "[]]",
		"[" + strings.Repeat(`[1],`, 2*maxDepth) + "[1]]",
	}
	for _, text := range texts {
		got := syntaxError([]byte(text)) == ""
		if want := json.Valid([]byte(text)) && utf8.Valid([]byte(text)); got != want {
			t.Errorf("%q: scanner says valid=%v (%s), encoding/json says %v", text, got, syntaxError([]byte(text)), want)
		}
	}
}

// FuzzSyntaxError: the scanner agrees with encoding/json on any input and
// never reads past the end.
func FuzzSyntaxError(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5e-3, "x\u00e9"], "b": {"c": null}}`, `[1,]`, "\"\xff\"", `{"a" 1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if strings.Count(string(data), "[")+strings.Count(string(data), "{") > maxDepth {
			return
		}
		if got, want := syntaxError(data) == "", json.Valid(data) && utf8.Valid(data); got != want {
			t.Errorf("%q: scanner valid=%v (%s), encoding/json %v", data, got, syntaxError(data), want)
		}
	})
}
