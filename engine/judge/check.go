package judge

import (
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/valyala/fastjson"
)

// CheckType names a built-in check.
type CheckType string

// The built-in checks.
const (
	Contains    CheckType = "contains"     // the answer contains Text (case-sensitive)
	NotContains CheckType = "not_contains" // the answer does not contain Text
	Regex       CheckType = "regex"        // Text (Go RE2) matches anywhere in the answer
	Equals      CheckType = "equals"       // answer and Text are equal once both are trimmed of surrounding whitespace
	JSONValid   CheckType = "json_valid"   // the trimmed answer is valid JSON
	MaxChars    CheckType = "max_chars"    // the answer has at most MaxChars characters (runes)
	NumberClose CheckType = "number_close" // the first number in the answer is within Tolerance of Value
)

var checkTypes = []string{
	string(Contains), string(NotContains), string(Regex), string(Equals),
	string(JSONValid), string(MaxChars), string(NumberClose),
}

// Check decides whether an answer meets a criterion: a built-in check
// (Type set) or a model judge (Judge set, Type empty).
type Check struct {
	Type      CheckType
	Judge     string  // model judge name, ^[a-zA-Z0-9_-]{1,64}$ (a NATS subject token)
	Text      string  // contains, not_contains, regex, equals
	MaxChars  int     // max_chars
	Value     float64 // number_close
	Tolerance float64 // number_close; ≥ 0
	re        *regexp.Regexp
}

// IsJudge reports whether c is a model judge, which Eval does not evaluate.
func (c Check) IsJudge() bool { return c.Type == "" }

// Eval reports whether answer meets the built-in check c. It reports false
// for a model judge, which is asked by the caller, not evaluated here.
func (c Check) Eval(answer string) bool {
	switch c.Type {
	case Contains:
		return strings.Contains(answer, c.Text)
	case NotContains:
		return !strings.Contains(answer, c.Text)
	case Regex:
		re := c.re
		if re == nil { // a Check built by hand rather than parsed
			var err error
			if re, err = regexp.Compile(c.Text); err != nil {
				return false
			}
		}
		return re.MatchString(answer)
	case Equals:
		return strings.TrimSpace(answer) == strings.TrimSpace(c.Text)
	case JSONValid:
		// encoding/json rather than fastjson: its scanner is not recursive
		// and caps nesting at 10000, so a deep answer cannot blow the stack.
		return json.Valid([]byte(strings.TrimSpace(answer)))
	case MaxChars:
		return utf8.RuneCountInString(answer) <= c.MaxChars
	case NumberClose:
		x, ok := FirstNumber(answer)
		return ok && math.Abs(x-c.Value) <= c.Tolerance
	}
	return false
}

// numberRE is the digits of a number as number_close reads it: digits with
// an optional decimal part, or a decimal part alone (".5"), and an optional
// exponent; ASCII digits only. Its sign is read apart (see FirstNumber).
var numberRE = regexp.MustCompile(`(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?`)

// FirstNumber returns the first number in s: the leftmost run of digits,
// with its decimal part and exponent ("x=42." reads 42, "-3.5e2" -350,
// ".5" 0.5, "1,000" 1), negative after a '-' or a '−' (U+2212) that does
// not follow a letter or a digit: "pre-2020" reads 2020, "GPT-4" 4,
// "x = -3" -3. A number too large for a float64 reads as ±Inf. ok is false
// when s has no digit.
func FirstNumber(s string) (x float64, ok bool) {
	loc := numberRE.FindStringIndex(s)
	if loc == nil {
		return 0, false
	}
	m := s[loc[0]:loc[1]]
	if m[0] == '.' {
		m = "0" + m
	}
	x, _ = strconv.ParseFloat(m, 64) // the match always parses; out of range gives ±Inf or ±0
	before := s[:loc[0]]
	sign, size := utf8.DecodeLastRuneInString(before)
	if sign != '-' && sign != '−' {
		return x, true
	}
	// A hyphen inside a word joins it to the number; it is no sign.
	if prev, _ := utf8.DecodeLastRuneInString(before[:len(before)-size]); !unicode.IsLetter(prev) && !unicode.IsDigit(prev) {
		x = -x
	}
	return x, true
}

// check decodes a built-in check or a model judge. A member that does not
// apply to the check's type (value on json_valid, tolerance on anything but
// number_close, either on a judge) is rejected rather than ignored: it is
// almost surely a mistake in the rubric.
func (dec *decoder) check(v *fastjson.Value, path string) Check {
	o := dec.Object(v, path)
	if o == nil {
		return Check{}
	}
	typ, judge := field.Member(o, "type"), field.Member(o, "judge")
	value, tol := field.Member(o, "value"), field.Member(o, "tolerance")
	vp, tp := field.Join(path, "value"), field.Join(path, "tolerance")
	var c Check
	switch {
	case typ != nil && judge != nil:
		dec.Fail(field.Join(path, "judge"), "must not be given with type")
		return c
	case judge != nil:
		p := field.Join(path, "judge")
		if c.Judge = dec.str(judge, p); dec.Err == nil && !validName(c.Judge, 64, false) {
			dec.Fail(p, "must be 1 to 64 of a-z A-Z 0-9 _ -")
		}
		if value != nil {
			dec.Fail(vp, "does not apply to a model judge")
		}
		if tol != nil {
			dec.Fail(tp, "does not apply to a model judge")
		}
		return c
	case typ == nil:
		dec.Fail(field.Join(path, "type"), "is required unless judge is given")
		return c
	}
	c.Type = CheckType(dec.Enum(typ, field.Join(path, "type"), checkTypes...))
	if tol != nil && c.Type != NumberClose && dec.Err == nil {
		dec.Fail(tp, "applies only to number_close")
	}
	switch c.Type {
	case Contains, NotContains, Equals:
		c.Text = dec.str(value, vp)
	case Regex:
		c.Text = dec.str(value, vp)
		if dec.Err == nil {
			re, err := regexp.Compile(c.Text)
			if err != nil {
				dec.Fail(vp, "must be a valid regular expression: %v", err)
			}
			c.re = re
		}
	case JSONValid:
		if value != nil {
			dec.Fail(vp, "does not apply to json_valid")
		}
	case MaxChars:
		c.MaxChars = dec.integer(value, vp, 0)
	case NumberClose:
		c.Value = dec.number(value, vp)
		if tol != nil {
			if c.Tolerance = dec.number(tol, tp); c.Tolerance < 0 {
				dec.Fail(tp, "must not be negative")
			}
		}
	}
	return c
}
