package console

import "testing"

// TestIndentJSONShowsHTMLCharacters: the API's \u003c, \u003e and \u0026
// escapes read as the characters they stand for; every other escape, an
// escaped backslash before "u003c" included, is kept.
func TestIndentJSONShowsHTMLCharacters(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"a":"Tom \u0026 Jerry \u003cb\u003e"}`, "{\n  \"a\": \"Tom & Jerry <b>\"\n}"},
		{`{"a":"\u003C"}`, "{\n  \"a\": \"<\"\n}"},
		{`{"a":"\\u003c"}`, "{\n  \"a\": \"\\\\u003c\"\n}"},
		{`{"a":"\"\u2028\n"}`, "{\n  \"a\": \"\\\"\\u2028\\n\"\n}"},
		{`[1.50,{"k\u003e":true}]`, "[\n  1.50,\n  {\n    \"k>\": true\n  }\n]"},
	} {
		got, err := indentJSON([]byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("indentJSON(%s) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := indentJSON([]byte(`{"a":`)); err == nil {
		t.Error("indentJSON of broken JSON: no error")
	}
}
