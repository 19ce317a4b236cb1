package judge

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/plaudit/plaudit/internal/jsonw"
)

// AppendJSON appends the canonical JSON of t with every default filled in:
//
//	{"id", "prompt", "rubric": {"criteria": [{"id", "must", "weight", "check"}]}, "soft_cap_chars"}
//
// in that order, with no whitespace. prompt is "" when absent and
// soft_cap_chars null when there is no cap. A built-in check is {"type"}
// plus "value" (every type but json_valid) and "tolerance" (number_close
// only); a model judge is {"judge"}. Parse of the result gives back t.
//
// The form is frozen: the task version is its hash, so changing it would
// change the version of every task (a test pins one).
func (t Task) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = jsonw.Key(dst, "id")
	dst = jsonw.String(dst, t.ID)
	dst = jsonw.Key(dst, "prompt")
	dst = jsonw.String(dst, t.Prompt)
	dst = jsonw.Key(dst, "rubric")
	dst = append(dst, '{')
	dst = jsonw.Key(dst, "criteria")
	dst = append(dst, '[')
	for i, c := range t.Criteria {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = c.appendJSON(dst)
	}
	dst = append(dst, ']', '}')
	dst = jsonw.Key(dst, "soft_cap_chars")
	if t.SoftCapChars > 0 {
		dst = jsonw.Int(dst, int64(t.SoftCapChars))
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

// AppendJSON appends c's canonical JSON {"id", "must", "weight", "check"},
// as it appears in its task's (AppendJSON).
func (c Criterion) AppendJSON(dst []byte) []byte { return c.appendJSON(dst) }

func (c Criterion) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = jsonw.Key(dst, "id")
	dst = jsonw.String(dst, c.ID)
	dst = jsonw.Key(dst, "must")
	dst = jsonw.Bool(dst, c.Must)
	dst = jsonw.Key(dst, "weight")
	dst = jsonw.Float(dst, c.Weight)
	dst = jsonw.Key(dst, "check")
	dst = c.Check.appendJSON(dst)
	return append(dst, '}')
}

func (c Check) appendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	if c.IsJudge() {
		dst = jsonw.Key(dst, "judge")
		dst = jsonw.String(dst, c.Judge)
		return append(dst, '}')
	}
	dst = jsonw.Key(dst, "type")
	dst = jsonw.String(dst, string(c.Type))
	switch c.Type {
	case Contains, NotContains, Regex, Equals:
		dst = jsonw.Key(dst, "value")
		dst = jsonw.String(dst, c.Text)
	case MaxChars:
		dst = jsonw.Key(dst, "value")
		dst = jsonw.Int(dst, int64(c.MaxChars))
	case NumberClose:
		dst = jsonw.Key(dst, "value")
		dst = jsonw.Float(dst, c.Value)
		dst = jsonw.Key(dst, "tolerance")
		dst = jsonw.Float(dst, c.Tolerance)
	}
	return append(dst, '}')
}

// Version returns "tv_" and the first 16 hex digits of the SHA-256 of t's
// canonical JSON (AppendJSON). The same content gives the same version
// whatever the key order, whitespace, escapes or omitted defaults of the
// body it was parsed from; any change of content (id, prompt, a criterion,
// the order of criteria, the soft cap) gives another.
func (t Task) Version() string {
	sum := sha256.Sum256(t.AppendJSON(nil))
	return "tv_" + hex.EncodeToString(sum[:8])
}
