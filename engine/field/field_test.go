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
		{`labels["cadenya.com/team"]`, `metadata.labels["cadenya.com/team"]`},
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

// TestJoinQuotesKeysThatAreNotNames: a key with a dot, a slash, a space or
// nothing at all would make a path read two ways; it is quoted instead.
func TestJoinQuotesKeysThatAreNotNames(t *testing.T) {
	for _, c := range []struct{ path, key, want string }{
		{"", "terms", "terms"},
		{"definition", "horizon_s", "definition.horizon_s"},
		{"metadata", "agentId", "metadata.agentId"},
		{"labels", "team-1", "labels.team-1"},
		{"labels", "a.b", `labels["a.b"]`},
		{"labels", "cadenya.com/team", `labels["cadenya.com/team"]`},
		{"labels", "", `labels[""]`},
		{"detail", `say "hi"`, `detail["say \"hi\""]`},
		{"", "a b", `["a b"]`},
	} {
		if got := Join(c.path, c.key); got != c.want {
			t.Errorf("Join(%q, %q) = %s, want %s", c.path, c.key, got, c.want)
		}
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
		{`{"a": {"b\u00e9": "\udc00"}}`, `p.a["bé"]`},
		{`{"a": {"\udbff": 1}}`, "p.a"},
		{`[{"a": 1}, {"b": [1, {"c": "\ud83d"}]}]`, "p[1].b[1].c"},
		// A key twice in one object: readers differ on which value counts.
		{`{"a": 1, "a": 2}`, "p.a"},
		{`{"a": 1, "a": 2, "b": 3}`, "p.a"},
		{`{"a": {"x": 1, "y": 2, "x": 3}}`, "p.a.x"},
		{`{"a": {"x": 1, "\u0078": 1}}`, "p.a.x"},
		{`{"a": [{}, {"k0":0,"k1":0,"k2":0,"k3":0,"k4":0,"k5":0,"k6":0,"k7":0,"k8":0,"k9":0,"k10":0,"k11":0,"k12":0,"k13":0,"k14":0,"k15":0,"k16":0,"k17":0,"k3":0,"k18":0}]}`, "p.a[1].k3"},
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
	// The same key in different objects is fine.
	if _, err := ParseJSON([]byte(`{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}`), "", func(*fastjson.Value) (int, error) { return 0, nil }); err != nil {
		t.Errorf("keys repeated across objects refused: %v", err)
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

// TestParseJSONOfAPlainBodyAllocatesNothing: the checks of the common case
// (keys once, numbers finite) take no allocation of their own.
func TestParseJSONOfAPlainBodyAllocatesNothing(t *testing.T) {
	body := []byte(`{"kind": "k", "value": 1.5, "run_id": "run_1", "labels": {"a": "1", "b": "2"}, "detail": [{"x": 1, "y": 2}]}`)
	decode := func(*fastjson.Value) (int, error) { return 0, nil }
	_, _ = ParseJSON(body, "", decode) // the pool's parser
	if n := testing.AllocsPerRun(200, func() { _, _ = ParseJSON(body, "", decode) }); n > 0 {
		t.Errorf("ParseJSON took %v allocations a body, want 0", n)
	}
}
