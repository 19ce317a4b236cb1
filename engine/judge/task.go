// Package judge holds the parts of judged answers (SPEC §8, seed 003) that
// need no storage and no network: a task and its rubric parsed from JSON,
// the task's content version, the built-in checks, the scores and flags of
// an answer, and the instructs_judge detector. It is pure: no I/O, no
// goroutines, no clock. Asking a model judge is the caller's business; this
// package says which criteria need one and folds the judges' outcomes in.
package judge

import (
	"math"
	"unicode"
	"unicode/utf8"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/valyala/fastjson"
)

// Limits of a task.
const (
	MaxTaskIDChars = 200 // characters (runes) of a task id
	MaxCriteria    = 100 // criteria in a rubric
	maxInt         = 1 << 53
)

// Task is a prompt and the rubric its answers are scored by.
type Task struct {
	ID           string
	Prompt       string // "" when absent
	Criteria     []Criterion
	SoftCapChars int // 0 = no cap; else answers longer than this many characters are flagged over_length
}

// Criterion is one item of a rubric.
type Criterion struct {
	ID     string // 1 to 100 of [a-zA-Z0-9_.-], unique in the rubric
	Must   bool   // the answer must meet it for must_pass (and so reward) to be 1
	Weight float64
	Check  Check
}

// Parse decodes and validates a task body
//
//	{id, prompt?, rubric: {criteria: [{id, must?, weight?, check}]}, soft_cap_chars?}
//
// path prefixes the field paths in errors, and every error is a
// *field.Error; malformed JSON is one with an empty path. Unknown fields are
// ignored, a null member counts as absent, and of duplicate keys the first
// wins. Strings must be valid UTF-8. Defaults: must false, weight 1,
// tolerance 0, no prompt, no soft cap.
func Parse(body []byte, path string) (Task, error) {
	return field.ParseJSON(body, path, func(v *fastjson.Value) (Task, error) { return ParseValue(v, path) })
}

// ParseValue is Parse for a task already parsed as part of a larger body.
// A nil v is "is required".
func ParseValue(v *fastjson.Value, path string) (Task, error) {
	var dec decoder
	o := dec.Object(v, path)
	t := Task{ID: dec.taskID(field.Member(o, "id"), field.Join(path, "id"))}
	if x := field.Member(o, "prompt"); x != nil {
		t.Prompt = dec.str(x, field.Join(path, "prompt"))
	}
	rp := field.Join(path, "rubric")
	ro := dec.Object(field.Member(o, "rubric"), rp)
	cp := field.Join(rp, "criteria")
	criteria := dec.Array(field.Member(ro, "criteria"), cp)
	switch {
	case dec.Err == nil && len(criteria) == 0:
		dec.Fail(cp, "must not be empty")
	case len(criteria) > MaxCriteria:
		dec.Fail(cp, "must have at most %d criteria", MaxCriteria)
		criteria = nil
	}
	seen := make(map[string]int, len(criteria)) // criterion id → index
	for i, c := range criteria {
		t.Criteria = append(t.Criteria, dec.criterion(c, cp, i, seen))
	}
	if x := field.Member(o, "soft_cap_chars"); x != nil {
		t.SoftCapChars = dec.integer(x, field.Join(path, "soft_cap_chars"), 1)
	}
	if dec.Err != nil {
		return Task{}, dec.Err
	}
	return t, nil
}

// criterion decodes criteria[i]; seen maps the ids before it to their index.
func (dec *decoder) criterion(v *fastjson.Value, criteria string, i int, seen map[string]int) Criterion {
	path := field.Index(criteria, i)
	o := dec.Object(v, path)
	c := Criterion{ID: dec.criterionID(field.Member(o, "id"), field.Join(path, "id")), Weight: 1}
	if j, dup := seen[c.ID]; dup && c.ID != "" {
		dec.Fail(field.Join(path, "id"), "duplicates %s.id", field.Index(criteria, j))
	} else {
		seen[c.ID] = i
	}
	if x := field.Member(o, "must"); x != nil {
		c.Must = dec.Boolean(x, field.Join(path, "must"))
	}
	if x := field.Member(o, "weight"); x != nil {
		p := field.Join(path, "weight")
		if c.Weight = dec.number(x, p); c.Weight <= 0 {
			dec.Fail(p, "must be positive")
		}
	}
	c.Check = dec.check(field.Member(o, "check"), field.Join(path, "check"))
	return c
}

// decoder is field.Decoder with the fields of a task.
type decoder struct{ field.Decoder }

// number decodes a required finite number; -0 becomes 0, so that the
// canonical form (and the version) does not tell them apart.
func (dec *decoder) number(v *fastjson.Value, path string) float64 {
	return dec.Number(v, path) + 0 // -0 + 0 = +0
}

// integer decodes a required number with an integral value from min to
// 2^53; 1e3 and 1000.0 are 1000.
func (dec *decoder) integer(v *fastjson.Value, path string, min int) int {
	f := dec.number(v, path)
	if dec.Err != nil {
		return 0
	}
	if f != math.Trunc(f) || f < float64(min) || f > maxInt {
		if min == 0 {
			dec.Fail(path, "must be a non-negative integer (at most 2^53)")
		} else {
			dec.Fail(path, "must be a positive integer (at most 2^53)")
		}
		return 0
	}
	return int(f)
}

// str decodes a required string of valid UTF-8.
func (dec *decoder) str(v *fastjson.Value, path string) string {
	if v == nil {
		dec.Fail(path, "is required")
		return ""
	}
	s, err := v.StringBytes()
	if err != nil {
		dec.Fail(path, "must be a string")
		return ""
	}
	if !utf8.Valid(s) {
		dec.Fail(path, "must be valid UTF-8")
		return ""
	}
	return string(s)
}

// taskID decodes 1 to 200 characters with no control characters.
func (dec *decoder) taskID(v *fastjson.Value, path string) string {
	s := dec.str(v, path)
	if dec.Err != nil {
		return ""
	}
	if n := utf8.RuneCountInString(s); n == 0 || n > MaxTaskIDChars {
		dec.Fail(path, "must be 1 to %d characters", MaxTaskIDChars)
		return ""
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			dec.Fail(path, "must not contain control characters")
			return ""
		}
	}
	return s
}

// criterionID decodes 1 to 100 of [a-zA-Z0-9_.-].
func (dec *decoder) criterionID(v *fastjson.Value, path string) string {
	s := dec.str(v, path)
	if dec.Err != nil {
		return ""
	}
	if !validName(s, 100, true) {
		dec.Fail(path, "must be 1 to 100 of a-z A-Z 0-9 _ . -")
		return ""
	}
	return s
}

// validName reports whether s is 1 to max of [a-zA-Z0-9_-], and '.' when dot.
func validName(s string, max int, dot bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		case c == '.' && dot:
		default:
			return false
		}
	}
	return true
}
