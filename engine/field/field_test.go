package field

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

func TestRename(t *testing.T) {
	names := map[string]string{"score": "data.score", "labels": "metadata.labels", "terms": "definition.terms"}
	cases := []struct{ path, want string }{
		{"score", "data.score"},
		{"labels.team", "metadata.labels.team"},
		{"terms[1].scale", "definition.terms[1].scale"},
		{"scorer", "scorer"}, // a prefix of the name, not of the path
		{"", ""},
	}
	for _, c := range cases {
		var fe *Error
		if err := Rename(Errorf(c.path, "bad"), names); !errors.As(err, &fe) || fe.Path != c.want || fe.Reason != "bad" {
			t.Errorf("Rename(%q) = %v, want path %q", c.path, err, c.want)
		}
	}
	other := errors.New("not a field error")
	if Rename(other, names) != other {
		t.Error("Rename changed an error that is not a field error")
	}
}

// TestParseJSONNamesBadValues: a value fastjson's parser takes and strict
// JSON does not is an error at its path (under the prefix), wherever it is.
func TestParseJSONNamesBadValues(t *testing.T) {
	cases := []struct{ json, path string }{
		{`{"a": +1}`, "p.a"},
		{`{"a": {"b": [0, 1e]}}`, "p.a.b[1]"},
		{`{"a": NaN}`, "p.a"},
		{`{"a": 1e400}`, "p.a"},
		{"{\"a\": \"x\xffy\"}", "p.a"},
		{`[-.5e]`, "p[0]"},
		{`{"a": "raw` + "\t" + `tab"}`, ""}, // the validator's: no field named
		{`{"a": 1} x`, ""},
		// Half a surrogate pair: kept as its escape, or eating the escape
		// after it, by fastjson.
		{`{"a": "sur\ud800x"}`, "p.a"},
		{`{"a": ["ok", "x\ud800\u0041y"]}`, "p.a[1]"},
		{`{"a": {"b\u00e9": "\udc00"}}`, "p.a.bé"},
		{`{"a": {"\udbff": 1}}`, "p.a"},
		{`[{"a": 1}, {"b": [1, {"c": "\ud83d"}]}]`, "p[1].b[1].c"},
	}
	for _, c := range cases {
		_, err := ParseJSON([]byte(c.json), "p", func(*fastjson.Value) (int, error) { return 0, nil })
		var fe *Error
		if !errors.As(err, &fe) || fe.Path != c.path {
			t.Errorf("ParseJSON(%q) = %v, want an error at %q", c.json, err, c.path)
		}
	}
	if _, err := ParseJSON([]byte(`{"a": [-0, 1.5e-3, "x\u0000y", "\ud83d\ude00", "\\ud800"], "\u00e9": "\\\ud83d\udE00"}`), "", func(*fastjson.Value) (int, error) { return 0, nil }); err != nil {
		t.Errorf("strict JSON refused: %v", err)
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", MaxEcho) // 2 bytes a rune: the cut falls inside one
	got := Clip(long, MaxEcho)
	if len(got) > MaxEcho+len("…") || !strings.HasSuffix(got, "…") || !utf8.ValidString(got) {
		t.Errorf("Clip = %q (%d bytes)", got, len(got))
	}
	if Clip("short", MaxEcho) != "short" {
		t.Error("Clip cut a short string")
	}
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},         // exactly n bytes: kept whole
		{"abcd", 3, "abc…"},       // one byte more: cut
		{"héllo", 2, "h…"},        // the cut falls inside é: back to its start
		{"héllo", 3, "hé…"},       // after é
		{"é", 1, "…"},             // nothing whole fits
		{"日本語", 5, "日…"},          // three-byte runes
		{"\x80\x80\x80x", 2, "…"}, // not UTF-8: the walk back stops at 0
	} {
		if got := Clip(tc.s, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}
