package judge

import (
	"math"
	"strings"
	"testing"
)

// parseCheck parses one check through a whole task, as the doors do.
func parseCheck(t *testing.T, check string) Check {
	t.Helper()
	return mustParse(t, `{"id": "t", "rubric": {"criteria": [{"id": "c", "check": `+check+`}]}}`).Criteria[0].Check
}

func TestEval(t *testing.T) {
	tests := []struct {
		check, answer string
		want          bool
	}{
		{`{"type": "contains", "value": "42"}`, "the answer is 42.", true},
		{`{"type": "contains", "value": "42"}`, "the answer is 4 2", false},
		{`{"type": "contains", "value": "Paris"}`, "paris", false}, // case-sensitive
		{`{"type": "contains", "value": "é"}`, "café", true},
		{`{"type": "contains", "value": ""}`, "", true},
		{`{"type": "not_contains", "value": "sorry"}`, "Sorry, no.", true},
		{`{"type": "not_contains", "value": "sorry"}`, "so sorry", false},
		{`{"type": "not_contains", "value": ""}`, "x", false},
		{`{"type": "regex", "value": "\\d{3}"}`, "call 555-1234", true}, // anywhere
		{`{"type": "regex", "value": "^\\d{3}$"}`, "call 555", false},
		{`{"type": "regex", "value": "(?i)^yes\\b"}`, "YES, indeed", true},
		{`{"type": "regex", "value": "^a.c$"}`, "a\nc", false},
		{`{"type": "regex", "value": "^a.c$"}`, "aéc", true},
		{`{"type": "equals", "value": "Paris"}`, "  Paris\n", true},
		{`{"type": "equals", "value": " Paris\t"}`, "Paris", true},
		{`{"type": "equals", "value": "Paris"}`, "\u00a0Paris\u2003", true}, // Unicode spaces are trimmed too
		{`{"type": "equals", "value": "Paris"}`, "paris", false},
		{`{"type": "equals", "value": "New York"}`, "New  York", false}, // inner whitespace counts
		{`{"type": "equals", "value": ""}`, " \n ", true},
		{`{"type": "json_valid"}`, `{"a": [1, 2.5e3, null, "x"]}`, true},
		{`{"type": "json_valid"}`, "\n  [1, 2]  \n", true},
		{`{"type": "json_valid"}`, `42`, true},
		{`{"type": "json_valid"}`, `"s"`, true},
		{`{"type": "json_valid"}`, `{"a": 1,}`, false},
		{`{"type": "json_valid"}`, `{'a': 1}`, false},
		{`{"type": "json_valid"}`, `NaN`, false},
		{`{"type": "json_valid"}`, `{"a": 1} {"b": 2}`, false},
		{`{"type": "json_valid"}`, "```json\n{}\n```", false},
		{`{"type": "json_valid"}`, "", false},
		{`{"type": "json_valid"}`, strings.Repeat("[", 100000) + strings.Repeat("]", 100000), false}, // deeper than encoding/json allows
		{`{"type": "max_chars", "value": 5}`, "héllo", true},                                         // 5 runes, 6 bytes
		{`{"type": "max_chars", "value": 5}`, "héllo!", false},
		{`{"type": "max_chars", "value": 2}`, "日本", true},
		{`{"type": "max_chars", "value": 1}`, "👍", true},
		{`{"type": "max_chars", "value": 0}`, "", true},
		{`{"type": "max_chars", "value": 0}`, " ", false},
		{`{"type": "number_close", "value": -350}`, "x = -3.5e2 m", true},
		{`{"type": "number_close", "value": 42}`, "x=42.", true},
		{`{"type": "number_close", "value": 42}`, "The answer is 42.0", true},
		{`{"type": "number_close", "value": 3.14, "tolerance": 0.01}`, "π ≈ 3.1416", true},
		{`{"type": "number_close", "value": 3.14, "tolerance": 0.001}`, "π ≈ 3.1416", false},
		{`{"type": "number_close", "value": 7}`, "+7 apples", true},
		{`{"type": "number_close", "value": 1}`, "1,000", true},      // the first number stops at the comma
		{`{"type": "number_close", "value": 2}`, "Step 1: 2", false}, // the first number is 1
		{`{"type": "number_close", "value": 0.5}`, ".5", true},
		{`{"type": "number_close", "value": -0.5}`, "x=-.5", true},
		{`{"type": "number_close", "value": 2020}`, "pre-2020", true}, // a hyphen in a word is no sign
		{`{"type": "number_close", "value": 19}`, "COVID-19 in 2019", true},
		{`{"type": "number_close", "value": 4}`, "GPT-4 scored 86", true}, // still the first number
		{`{"type": "number_close", "value": -5}`, "it is −5 °C", true},    // U+2212 MINUS SIGN
		{`{"type": "number_close", "value": -5}`, "(-5)", true},
		{`{"type": "number_close", "value": 1.5}`, "1..5", false}, // 1, then .5
		{`{"type": "number_close", "value": 5}`, "1e", false},
		{`{"type": "number_close", "value": 3}`, "3e+", true},
		{`{"type": "number_close", "value": 300}`, "3E+2", true},
		{`{"type": "number_close", "value": 0}`, "no number here", false},
		{`{"type": "number_close", "value": 0, "tolerance": 1e308}`, "", false},
		{`{"type": "number_close", "value": 0, "tolerance": 1e308}`, "1e400", false}, // +Inf
		{`{"type": "number_close", "value": 0}`, "-0", true},
		{`{"type": "number_close", "value": 4}`, "٤", false}, // ASCII digits only
		{`{"judge": "tone"}`, "anything", false},
	}
	for _, tt := range tests {
		if got := parseCheck(t, tt.check).Eval(tt.answer); got != tt.want {
			t.Errorf("%s on %.40q: got %v, want %v", tt.check, tt.answer, got, tt.want)
		}
	}
}

func TestEvalRegexBuiltByHand(t *testing.T) {
	if !(Check{Type: Regex, Text: "b+"}).Eval("abbc") {
		t.Error("a hand-built regex check does not compile its pattern")
	}
	if (Check{Type: Regex, Text: "("}).Eval("(") {
		t.Error("a bad hand-built regex is met")
	}
}

func TestFirstNumber(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"-3.5e2", -350, true},
		{"x=42.", 42, true},
		{"v2.0.1", 2.0, true},
		{"a-3", 3, true}, // a hyphen after a letter joins a word: no sign
		{"a -3", -3, true},
		{"=−3", -3, true},
		{"5-3", 5, true},
		{"--7", -7, true},
		{"1e999", math.Inf(1), true},
		{"-1e999", math.Inf(-1), true},
		{"0.000", 0, true},
		{"", 0, false},
		{"-.", 0, false},
	}
	for _, tt := range tests {
		if got, ok := FirstNumber(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("FirstNumber(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}
