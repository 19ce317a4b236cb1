package judge

import (
	"regexp"
	"testing"
)

func TestAppendJSON(t *testing.T) {
	task := mustParse(t, `{"soft_cap_chars": 10, "rubric": {"criteria": [
		{"check": {"type": "number_close", "value": 42}, "id": "n"},
		{"id": "j", "must": true, "weight": 2.5, "check": {"judge": "tone"}},
		{"id": "m", "check": {"type": "max_chars", "value": 1e2}},
		{"id": "e", "check": {"type": "equals", "value": "<a & \"b\">"}},
		{"id": "v", "check": {"type": "json_valid"}}]}, "id": "t1"}`)
	want := `{"id":"t1","prompt":"","rubric":{"criteria":[` +
		`{"id":"n","must":false,"weight":1,"check":{"type":"number_close","value":42,"tolerance":0}},` +
		`{"id":"j","must":true,"weight":2.5,"check":{"judge":"tone"}},` +
		`{"id":"m","must":false,"weight":1,"check":{"type":"max_chars","value":100}},` +
		`{"id":"e","must":false,"weight":1,"check":{"type":"equals","value":"\u003ca \u0026 \"b\"\u003e"}},` +
		`{"id":"v","must":false,"weight":1,"check":{"type":"json_valid"}}]},"soft_cap_chars":10}`
	if got := string(task.AppendJSON(nil)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	noCap := mustParse(t, `{"id": "t", "prompt": "p", "rubric": {"criteria": [{"id": "c", "check": {"type": "contains", "value": "x"}}]}}`)
	if got, want := string(noCap.AppendJSON([]byte("x"))), `x{"id":"t","prompt":"p","rubric":{"criteria":[`+
		`{"id":"c","must":false,"weight":1,"check":{"type":"contains","value":"x"}}]},"soft_cap_chars":null}`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestAppendJSONRoundTrip: Parse of the canonical form gives the same task.
func TestAppendJSONRoundTrip(t *testing.T) {
	task := mustParse(t, sampleTask)
	text := task.AppendJSON(nil)
	again := mustParse(t, string(text))
	if string(again.AppendJSON(nil)) != string(text) || again.Version() != task.Version() {
		t.Fatalf("%s parses to %s", text, again.AppendJSON(nil))
	}
}

// TestVersionPinned pins the canonical form: changing it changes the
// version of every stored task.
func TestVersionPinned(t *testing.T) {
	task := mustParse(t, sampleTask)
	const want = "tv_14890e95fde6b5df"
	if got := task.Version(); got != want {
		t.Fatalf("Version() = %s, want %s", got, want)
	}
}

func TestVersionSameContent(t *testing.T) {
	base := `{"id": "t", "prompt": "Say hi", "rubric": {"criteria": [` +
		`{"id": "a", "check": {"type": "contains", "value": "hi"}},` +
		`{"id": "b", "must": true, "weight": 2, "check": {"type": "number_close", "value": 3}}]}}`
	same := []string{
		// Key order and whitespace.
		`{"rubric":{"criteria":[{"check":{"value":"hi","type":"contains"},"id":"a"},{"weight":2,"check":{"value":3,"type":"number_close"},"must":true,"id":"b"}]},"prompt":"Say hi","id":"t"}`,
		"{\n\t\"id\" : \"t\" ,\r\n \"prompt\":\"Say hi\",\"rubric\":{\"criteria\":[{\"id\":\"a\",\"check\":{\"type\":\"contains\",\"value\":\"hi\"}},\n{\"id\":\"b\",\"must\":true,\"weight\":2,\"check\":{\"type\":\"number_close\",\"value\":3}}]}}\n",
		// Explicit defaults, nulls, other spellings of the same numbers and strings.
		`{"id": "t", "prompt": "Say hi", "soft_cap_chars": null, "rubric": {"criteria": [` +
			`{"id": "a", "must": false, "weight": 1, "check": {"type": "contains", "value": "hi", "judge": null}},` +
			`{"id": "b", "must": true, "weight": 2.0, "check": {"type": "number_close", "value": 3e0, "tolerance": 0}}]}}`,
		`{"id": "\u0074", "prompt": "Say h\u0069", "rubric": {"criteria": [` +
			`{"id": "a", "weight": 1.0e0, "check": {"type": "contains", "value": "hi"}},` +
			`{"id": "b", "must": true, "weight": 20e-1, "check": {"type": "number_close", "value": 3, "tolerance": -0}}]}, "unknown": 1}`,
	}
	want := mustParse(t, base).Version()
	if !regexp.MustCompile(`^tv_[0-9a-f]{16}$`).MatchString(want) {
		t.Fatalf("version %q", want)
	}
	for _, s := range same {
		if got := mustParse(t, s).Version(); got != want {
			t.Errorf("%s: version %s, want %s", s, got, want)
		}
	}
	// An absent prompt is the empty prompt.
	if mustParse(t, `{"id": "t", "rubric": {"criteria": [{"id": "a", "check": {"type": "json_valid"}}]}}`).Version() !=
		mustParse(t, `{"id": "t", "prompt": "", "rubric": {"criteria": [{"id": "a", "check": {"type": "json_valid"}}]}}`).Version() {
		t.Error("absent and empty prompt differ")
	}
}

func TestVersionChangedContent(t *testing.T) {
	base := `{"id": "t", "prompt": "Say hi", "rubric": {"criteria": [` +
		`{"id": "a", "check": {"type": "contains", "value": "hi"}},` +
		`{"id": "b", "must": true, "weight": 2, "check": {"type": "number_close", "value": 3}}]}}`
	a := `{"id": "a", "check": {"type": "contains", "value": "hi"}}`
	b := `{"id": "b", "must": true, "weight": 2, "check": {"type": "number_close", "value": 3}}`
	task := func(top, criteria string) string {
		return `{"id": "t", ` + top + `"rubric": {"criteria": [` + criteria + `]}}`
	}
	changed := map[string]string{
		"id":                 `{"id": "t2", "prompt": "Say hi", "rubric": {"criteria": [` + a + `, ` + b + `]}}`,
		"prompt":             task(`"prompt": "Say hi!", `, a+", "+b),
		"no prompt":          task(``, a+", "+b),
		"criterion order":    task(`"prompt": "Say hi", `, b+", "+a),
		"weight":             task(`"prompt": "Say hi", `, a+`, {"id": "b", "must": true, "weight": 2.5, "check": {"type": "number_close", "value": 3}}`),
		"must":               task(`"prompt": "Say hi", `, a+`, {"id": "b", "weight": 2, "check": {"type": "number_close", "value": 3}}`),
		"criterion id":       task(`"prompt": "Say hi", `, a+`, {"id": "c", "must": true, "weight": 2, "check": {"type": "number_close", "value": 3}}`),
		"check value":        task(`"prompt": "Say hi", `, `{"id": "a", "check": {"type": "contains", "value": "hi "}}, `+b),
		"check type":         task(`"prompt": "Say hi", `, `{"id": "a", "check": {"type": "equals", "value": "hi"}}, `+b),
		"judge":              task(`"prompt": "Say hi", `, `{"id": "a", "check": {"judge": "hi"}}, `+b),
		"tolerance":          task(`"prompt": "Say hi", `, a+`, {"id": "b", "must": true, "weight": 2, "check": {"type": "number_close", "value": 3, "tolerance": 1e-9}}`),
		"soft cap":           task(`"prompt": "Say hi", "soft_cap_chars": 100, `, a+", "+b),
		"one criterion less": task(`"prompt": "Say hi", `, a),
	}
	want := mustParse(t, base).Version()
	seen := map[string]string{want: "base"}
	for name, s := range changed {
		v := mustParse(t, s).Version()
		if other, dup := seen[v]; dup {
			t.Errorf("%s: same version %s as %s", name, v, other)
		}
		seen[v] = name
	}
	c1 := mustParse(t, task(`"soft_cap_chars": 100, `, a)).Version()
	c2 := mustParse(t, task(`"soft_cap_chars": 101, `, a)).Version()
	if c1 == c2 {
		t.Error("soft caps 100 and 101 give the same version")
	}
}
