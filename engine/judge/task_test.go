package judge

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/plaudit/plaudit/engine/field"
)

// sampleTask is a task with every kind of check.
const sampleTask = `{
  "id": "aicme/example-001",
  "prompt": "What is 6 × 7? Answer in JSON.",
  "rubric": {"criteria": [
    {"id": "has-answer", "must": true, "weight": 2, "check": {"type": "contains", "value": "42"}},
    {"id": "no_apology", "check": {"type": "not_contains", "value": "sorry"}},
    {"id": "shape", "check": {"type": "regex", "value": "^\\{.*\\}$"}},
    {"id": "exact", "weight": 0.5, "check": {"type": "equals", "value": "{\"answer\": 42}"}},
    {"id": "json", "check": {"type": "json_valid"}},
    {"id": "short", "check": {"type": "max_chars", "value": 100}},
    {"id": "close", "check": {"type": "number_close", "value": 42, "tolerance": 0.5}},
    {"id": "tone.v2", "check": {"judge": "tone_judge-1"}}
  ]},
  "soft_cap_chars": 4000
}`

func mustParse(t *testing.T, body string) Task {
	t.Helper()
	task, err := Parse([]byte(body), "")
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return task
}

func TestParseSample(t *testing.T) {
	task := mustParse(t, sampleTask)
	if task.ID != "aicme/example-001" || task.Prompt != "What is 6 × 7? Answer in JSON." || task.SoftCapChars != 4000 {
		t.Fatalf("got %+v", task)
	}
	want := []struct {
		id     string
		must   bool
		weight float64
		check  Check
	}{
		{"has-answer", true, 2, Check{Type: Contains, Text: "42"}},
		{"no_apology", false, 1, Check{Type: NotContains, Text: "sorry"}},
		{"shape", false, 1, Check{Type: Regex, Text: `^\{.*\}$`}},
		{"exact", false, 0.5, Check{Type: Equals, Text: `{"answer": 42}`}},
		{"json", false, 1, Check{Type: JSONValid}},
		{"short", false, 1, Check{Type: MaxChars, MaxChars: 100}},
		{"close", false, 1, Check{Type: NumberClose, Value: 42, Tolerance: 0.5}},
		{"tone.v2", false, 1, Check{Judge: "tone_judge-1"}},
	}
	if len(task.Criteria) != len(want) {
		t.Fatalf("got %d criteria", len(task.Criteria))
	}
	for i, w := range want {
		c := task.Criteria[i]
		c.Check.re = nil
		if c.ID != w.id || c.Must != w.must || c.Weight != w.weight || c.Check != w.check {
			t.Errorf("criteria[%d] = %+v, want %+v", i, c, w)
		}
	}
	if task.Criteria[2].Check.re == nil {
		t.Error("the regex is not compiled")
	}
	if !task.Criteria[7].Check.IsJudge() || task.Criteria[0].Check.IsJudge() {
		t.Error("IsJudge")
	}
}

func TestParseAccepts(t *testing.T) {
	const c = `{"id": "c", "check": {"type": "json_valid"}}`
	tests := []struct {
		name, json string
		check      func(Task) bool
	}{
		{"defaults", `{"id": "t", "rubric": {"criteria": [` + c + `]}}`,
			func(t Task) bool {
				c := t.Criteria[0]
				return t.Prompt == "" && t.SoftCapChars == 0 && !c.Must && c.Weight == 1
			}},
		{"nulls are absent", `{"id": "t", "prompt": null, "soft_cap_chars": null, "rubric": {"criteria": [` +
			`{"id": "c", "must": null, "weight": null, "check": {"type": "number_close", "value": 1, "tolerance": null, "judge": null}}]}}`,
			func(t Task) bool {
				c := t.Criteria[0]
				return t.Prompt == "" && t.SoftCapChars == 0 && c.Weight == 1 && c.Check.Tolerance == 0 && c.Check.Type == NumberClose
			}},
		{"unknown fields ignored", `{"id": "t", "extra": [1, {"x": null}], "rubric": {"criteria": [` +
			`{"id": "c", "note": "hi", "check": {"type": "json_valid", "comment": 1}}], "title": "r"}}`,
			func(t Task) bool { return len(t.Criteria) == 1 }},
		{"integers written as floats", `{"id": "t", "soft_cap_chars": 1e3, "rubric": {"criteria": [` +
			`{"id": "c", "check": {"type": "max_chars", "value": 20.0}}]}}`,
			func(t Task) bool { return t.SoftCapChars == 1000 && t.Criteria[0].Check.MaxChars == 20 }},
		{"integers up to 2^53", `{"id": "t", "soft_cap_chars": 9007199254740992, "rubric": {"criteria": [` +
			`{"id": "c", "check": {"type": "max_chars", "value": 9.007199254740992e15}}]}}`,
			func(t Task) bool { return t.SoftCapChars == 1<<53 && t.Criteria[0].Check.MaxChars == 1<<53 }},
		{"max_chars 0, tiny weight, negative value", `{"id": "t", "rubric": {"criteria": [` +
			`{"id": "a", "weight": 1e-300, "check": {"type": "max_chars", "value": 0}},` +
			`{"id": "b", "check": {"type": "number_close", "value": -2.5e3, "tolerance": 0}}]}}`,
			func(t Task) bool {
				return t.Criteria[0].Weight == 1e-300 && t.Criteria[0].Check.MaxChars == 0 && t.Criteria[1].Check.Value == -2500
			}},
		{"-0 is 0", `{"id": "t", "rubric": {"criteria": [{"id": "a", "check": {"type": "number_close", "value": -0, "tolerance": -0.0}}]}}`,
			func(t Task) bool {
				c := t.Criteria[0].Check
				return c.Value == 0 && !math.Signbit(c.Value) && !math.Signbit(c.Tolerance)
			}},
		{"200-character id of multibyte runes", `{"id": "` + strings.Repeat("é", 200) + `", "rubric": {"criteria": [` + c + `]}}`,
			func(t Task) bool { return len(t.ID) == 400 }},
		{"100 criteria, longest names", `{"id": "t", "rubric": {"criteria": [` + criteria(100, func(i int) string {
			return `{"id": "` + strings.Repeat("a", 97) + pad3(i) + `", "check": {"judge": "` + strings.Repeat("J", 64) + `"}}`
		}) + `]}}`,
			func(t Task) bool { return len(t.Criteria) == 100 && len(t.Criteria[99].Check.Judge) == 64 }},
		{"escaped strings", `{"id": "t\u002f1", "rubric": {"criteria": [{"id": "c", "check": {"type": "equals", "value": "a\nb\u00e9"}}]}}`,
			func(t Task) bool { return t.ID == "t/1" && t.Criteria[0].Check.Text == "a\nbé" }},
		{"empty strings to match", `{"id": "t", "prompt": "", "rubric": {"criteria": [{"id": "c", "check": {"type": "regex", "value": ""}}]}}`,
			func(t Task) bool { return t.Criteria[0].Check.Eval("anything") }},
	}
	for _, tt := range tests {
		task, err := Parse([]byte(tt.json), "task")
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
		} else if !tt.check(task) {
			t.Errorf("%s: got %+v", tt.name, task)
		}
	}
}

func pad3(i int) string { return fmt.Sprintf("%03d", i) }

func criteria(n int, one func(int) string) string {
	s := make([]string, n)
	for i := range s {
		s[i] = one(i)
	}
	return strings.Join(s, ", ")
}

func TestParseErrors(t *testing.T) {
	const ok = `{"id": "a", "check": {"type": "json_valid"}}`
	// third puts a criterion after two valid ones, so its errors are at criteria[2].
	third := func(c string) string {
		return `{"id": "t", "rubric": {"criteria": [` + ok + `, {"id": "b", "check": {"judge": "j"}}, ` + c + `]}}`
	}
	check := func(ch string) string { return third(`{"id": "c", "check": ` + ch + `}`) }
	top := func(fields string) string {
		return `{"id": "t", "rubric": {"criteria": [` + ok + `]}, ` + fields + `}`
	}
	tests := []struct{ json, path string }{
		// Malformed bodies.
		{``, ""},
		{`not json`, ""},
		{top(`"x": 1`) + ` trailing`, ""},
		{top(`"x": NaN`), "x"}, // named, even where nothing reads it
		{top("\"x\": \"raw\ttab\""), ""},
		// A key twice: readers differ on which one counts.
		{`{"id": "a", "id": "b", "rubric": {"criteria": [` + ok + `]}}`, "id"},
		{third(`{"id": "c", "weight": 3, "weight": -1, "check": {"type": "json_valid"}}`), "rubric.criteria[2].weight"},
		{strings.Repeat("[", 1000) + strings.Repeat("]", 1000), ""},
		{`[]`, ""},
		{`"task"`, ""},
		// The task.
		{`{"rubric": {"criteria": [` + ok + `]}}`, "id"},
		{`{"id": 5, "rubric": {"criteria": [` + ok + `]}}`, "id"},
		{`{"id": "", "rubric": {"criteria": [` + ok + `]}}`, "id"},
		{`{"id": "` + strings.Repeat("x", 201) + `", "rubric": {"criteria": [` + ok + `]}}`, "id"},
		{`{"id": "a\u0007b", "rubric": {"criteria": [` + ok + `]}}`, "id"},
		{"{\"id\": \"a\xffb\", \"rubric\": {\"criteria\": [" + ok + "]}}", "id"},
		{top(`"prompt": 5`), "prompt"},
		{top("\"prompt\": \"\xfe\""), "prompt"},
		{top(`"soft_cap_chars": 0`), "soft_cap_chars"},
		{top(`"soft_cap_chars": -5`), "soft_cap_chars"},
		{top(`"soft_cap_chars": 1.5`), "soft_cap_chars"},
		{top(`"soft_cap_chars": "100"`), "soft_cap_chars"},
		{top(`"soft_cap_chars": 1e20`), "soft_cap_chars"},
		{top(`"soft_cap_chars": 1e999`), "soft_cap_chars"},
		// The rubric.
		{`{"id": "t"}`, "rubric"},
		{`{"id": "t", "rubric": []}`, "rubric"},
		{`{"id": "t", "rubric": {}}`, "rubric.criteria"},
		{`{"id": "t", "rubric": {"criteria": {}}}`, "rubric.criteria"},
		{`{"id": "t", "rubric": {"criteria": []}}`, "rubric.criteria"},
		{`{"id": "t", "rubric": {"criteria": [` + criteria(101, func(i int) string {
			return `{"id": "c` + pad3(i) + `", "check": {"type": "json_valid"}}`
		}) + `]}}`, "rubric.criteria"},
		// A criterion.
		{third(`"c"`), "rubric.criteria[2]"},
		{third(`{"check": {"type": "json_valid"}}`), "rubric.criteria[2].id"},
		{third(`{"id": 3, "check": {"type": "json_valid"}}`), "rubric.criteria[2].id"},
		{third(`{"id": "", "check": {"type": "json_valid"}}`), "rubric.criteria[2].id"},
		{third(`{"id": "a b", "check": {"type": "json_valid"}}`), "rubric.criteria[2].id"},
		{third(`{"id": "a/b", "check": {"type": "json_valid"}}`), "rubric.criteria[2].id"},
		{third(`{"id": "` + strings.Repeat("a", 101) + `", "check": {"type": "json_valid"}}`), "rubric.criteria[2].id"},
		{third(`{"id": "a", "check": {"type": "json_valid"}}`), "rubric.criteria[2].id"}, // duplicate
		{third(`{"id": "c", "must": "yes", "check": {"type": "json_valid"}}`), "rubric.criteria[2].must"},
		{third(`{"id": "c", "must": 1, "check": {"type": "json_valid"}}`), "rubric.criteria[2].must"},
		{third(`{"id": "c", "weight": 0, "check": {"type": "json_valid"}}`), "rubric.criteria[2].weight"},
		{third(`{"id": "c", "weight": -1, "check": {"type": "json_valid"}}`), "rubric.criteria[2].weight"},
		{third(`{"id": "c", "weight": -0, "check": {"type": "json_valid"}}`), "rubric.criteria[2].weight"},
		{third(`{"id": "c", "weight": "1", "check": {"type": "json_valid"}}`), "rubric.criteria[2].weight"},
		{third(`{"id": "c", "weight": 1e999, "check": {"type": "json_valid"}}`), "rubric.criteria[2].weight"},
		{third(`{"id": "c"}`), "rubric.criteria[2].check"},
		// A check.
		{check(`"contains"`), "rubric.criteria[2].check"},
		{check(`{}`), "rubric.criteria[2].check.type"},
		{check(`{"value": "x"}`), "rubric.criteria[2].check.type"},
		{check(`{"type": "contains", "value": "x", "judge": "j"}`), "rubric.criteria[2].check.judge"},
		{check(`{"type": "startswith", "value": "x"}`), "rubric.criteria[2].check.type"},
		{check(`{"type": "CONTAINS", "value": "x"}`), "rubric.criteria[2].check.type"},
		{check(`{"type": 5}`), "rubric.criteria[2].check.type"},
		{check(`{"judge": ""}`), "rubric.criteria[2].check.judge"},
		{check(`{"judge": "tone.v2"}`), "rubric.criteria[2].check.judge"},
		{check(`{"judge": "a>b"}`), "rubric.criteria[2].check.judge"},
		{check(`{"judge": "` + strings.Repeat("j", 65) + `"}`), "rubric.criteria[2].check.judge"},
		{check(`{"judge": 5}`), "rubric.criteria[2].check.judge"},
		{check(`{"judge": "j", "value": "x"}`), "rubric.criteria[2].check.value"},
		{check(`{"judge": "j", "tolerance": 1}`), "rubric.criteria[2].check.tolerance"},
		{check(`{"type": "contains"}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "contains", "value": 5}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "not_contains", "value": ["x"]}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "equals", "value": null}`), "rubric.criteria[2].check.value"},
		{check("{\"type\": \"equals\", \"value\": \"\xc3\"}"), "rubric.criteria[2].check.value"},
		{check(`{"type": "contains", "value": "x", "tolerance": 1}`), "rubric.criteria[2].check.tolerance"},
		{check(`{"type": "regex"}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "regex", "value": "("}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "regex", "value": "a(?=b)"}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "regex", "value": "x{1001}"}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "regex", "value": 1}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "json_valid", "value": true}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "max_chars"}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "max_chars", "value": -1}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "max_chars", "value": 2.5}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "max_chars", "value": "10"}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "max_chars", "value": 1e300}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "number_close"}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "number_close", "value": "42"}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "number_close", "value": 1e999}`), "rubric.criteria[2].check.value"},
		{check(`{"type": "number_close", "value": 1, "tolerance": -0.1}`), "rubric.criteria[2].check.tolerance"},
		{check(`{"type": "number_close", "value": 1, "tolerance": "0"}`), "rubric.criteria[2].check.tolerance"},
		{check(`{"type": "number_close", "value": 1, "tolerance": -1e999}`), "rubric.criteria[2].check.tolerance"},
		// The first error wins.
		{`{"id": "", "rubric": {"criteria": []}}`, "id"},
		{third(`{"id": "a", "weight": 0}`), "rubric.criteria[2].id"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.json), "")
		var fe *field.Error
		if !errors.As(err, &fe) || !errors.Is(err, field.ErrInvalid) {
			t.Errorf("%s: got %v, want a *field.Error at %q", tt.json, err, tt.path)
			continue
		}
		if fe.Path != tt.path {
			t.Errorf("%.200s: got %q, want path %q", tt.json, err, tt.path)
		}
		if fe.Reason == "" {
			t.Errorf("%s: empty reason", tt.json)
		}
	}
}

func TestParseErrorMessages(t *testing.T) {
	const ok = `{"id": "a", "check": {"type": "json_valid"}}`
	tests := []struct{ json, path, want string }{
		{`{"id": "t", "rubric": {"criteria": [` + ok + `, {"id": "b", "check": {"type": "contains"}}, {"id": "c", "check": {"type": "regex", "value": "("}}]}}`,
			"task", "task.rubric.criteria[1].check.value: is required"},
		{`{"id": "t", "rubric": {"criteria": [` + ok + `, {"id": "b", "check": {"judge": "j"}}, {"id": "c", "check": {"type": "regex", "value": "("}}]}}`,
			"task", "task.rubric.criteria[2].check.value: must be a valid regular expression: error parsing regexp: missing closing ): `(`"},
		{`{"id": "t", "rubric": {"criteria": [` + ok + `, ` + ok + `]}}`, "",
			"rubric.criteria[1].id: duplicates rubric.criteria[0].id"},
		{`{"id": "t", "rubric": {"criteria": [{"id": "a", "check": {"type": "equal"}}]}}`, "",
			"rubric.criteria[0].check.type: must be one of contains, not_contains, regex, equals, json_valid, max_chars, number_close"},
		{`{"id": "t", "rubric": {"criteria": []}}`, "definition", "definition.rubric.criteria: must not be empty"},
		{`{"id": "t", "soft_cap_chars": 0, "rubric": {"criteria": [` + ok + `]}}`, "",
			"soft_cap_chars: must be a positive integer (at most 2^53)"},
		{`{"id": "t", "rubric": {"criteria": [{"id": "a", "check": {"type": "max_chars", "value": -1}}]}}`, "",
			"rubric.criteria[0].check.value: must be a non-negative integer (at most 2^53)"},
	}
	for _, tt := range tests {
		if _, err := Parse([]byte(tt.json), tt.path); err == nil || err.Error() != tt.want {
			t.Errorf("%s: got %v, want %q", tt.json, err, tt.want)
		}
	}
}

func TestParseValueRequiresAValue(t *testing.T) {
	_, err := ParseValue(nil, "task")
	var fe *field.Error
	if !errors.As(err, &fe) || fe.Path != "task" {
		t.Fatalf("got %v", err)
	}
}
