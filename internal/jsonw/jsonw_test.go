package jsonw

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

func TestStringRoundTrips(t *testing.T) {
	for _, s := range []string{"", "plain", `quo"te`, `back\slash`, "nl\n\ttab", "\x00\x1f", "<&>", "é ☃ 😀", "\u2028\u2029", "bad\xffutf8"} {
		out := String(nil, s)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("String(%q) = %s: not JSON: %v", s, out, err)
		}
		want := s
		if s == "bad\xffutf8" {
			want = "bad\ufffdutf8"
		}
		if got != want {
			t.Errorf("String(%q) decoded to %q", s, got)
		}
	}
}

// TestStringEscapesAsEncodingJSON: every byte alone, and inside text, is
// written as encoding/json writes it (HTML-safe, invalid UTF-8 as U+FFFD),
// but for backspace and form feed, written \u0008 and \u000c here.
func TestStringEscapesAsEncodingJSON(t *testing.T) {
	for c := range 256 {
		for _, s := range []string{string([]byte{byte(c)}), "id_" + string([]byte{byte(c)}) + "x"} {
			want, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			want = bytes.ReplaceAll(bytes.ReplaceAll(want, []byte(`\b`), []byte(`\u0008`)), []byte(`\f`), []byte(`\u000c`))
			if got := String(nil, s); string(got) != string(want) {
				t.Errorf("String(%q) = %s, encoding/json %s", s, got, want)
			}
		}
	}
}

func BenchmarkString(b *testing.B) {
	dst := make([]byte, 0, 64)
	for b.Loop() {
		dst = String(dst[:0], "run_01JEXAMPLE7Q8R9S0T1V2W3X4Y")
	}
}

func TestFloat(t *testing.T) {
	cases := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {1, "1"}, {-2, "-2"}, {0.5, "0.5"}, {0.1, "0.1"}, {1e-7, "1e-07"},
		{1e21, "1e+21"}, {math.NaN(), "null"}, {math.Inf(1), "null"}, {0.5555555555555556, "0.5555555555555556"},
	}
	for _, c := range cases {
		if got := string(Float(nil, c.in)); got != c.want {
			t.Errorf("Float(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestObjectHelpers(t *testing.T) {
	b := []byte{'{'}
	b = Key(b, "a")
	b = Int(b, 1)
	b = Key(b, "m")
	b = StringMap(b, map[string]string{"z": "1", "a": "2"})
	b = Key(b, "t")
	b = Time(b, time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600)))
	b = Key(b, "n")
	b = TimeOrNull(b, time.Time{})
	b = append(b, '}')
	want := `{"a":1,"m":{"a":"2","z":"1"},"t":"2026-01-02T02:04:05.0000006Z","n":null}`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}

func TestStrings(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{{nil, `[]`}, {[]string{"a"}, `["a"]`}, {[]string{"a", `"b"`}, `["a","\"b\""]`}} {
		if got := string(Strings(nil, c.in)); got != c.want {
			t.Errorf("Strings(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestInts(t *testing.T) {
	for _, c := range []struct {
		in   []int
		want string
	}{{nil, `[]`}, {[]int{0}, `[0]`}, {[]int{3, -1, 20}, `[3,-1,20]`}} {
		if got := string(Ints(nil, c.in)); got != c.want {
			t.Errorf("Ints(%v) = %s, want %s", c.in, got, c.want)
		}
	}
	if got := string(Ints(nil, []uint8{255, 1})); got != `[255,1]` {
		t.Errorf("Ints of bytes = %s", got)
	}
}

func TestValidNumber(t *testing.T) {
	valid := []string{"0", "-0", "1", "-1", "10", "0.5", "-0.5", "1e5", "1E5", "1e+5", "1e-5", "1.25e10", "123456789012345678901234567890"}
	invalid := []string{"", "-", "+1", "01", "-01", "1.", ".5", "-.5", "1e", "1e+", "-.5e", "NaN", "inf", "-inf", "Infinity", "0x10", "1_000", "1 ", "1.2.3", "1e5e5"}
	for _, s := range valid {
		if !ValidNumber([]byte(s)) {
			t.Errorf("ValidNumber(%q) = false", s)
		}
		if !json.Valid([]byte(s)) {
			t.Errorf("the test is wrong: encoding/json rejects %q", s)
		}
	}
	for _, s := range invalid {
		if ValidNumber([]byte(s)) {
			t.Errorf("ValidNumber(%q) = true", s)
		}
	}
}

// TestValueAndRawAreJSON: what fastjson's lenient parser took (numbers
// outside the grammar, NUL and invalid UTF-8 in strings) renders as valid
// JSON; valid JSON kept from a request renders unchanged.
func TestValueAndRawAreJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":NaN,"b":+1,"c":-inf,"d":"x\u0000y","e":1.50,"f":[1,-.5e,"\ud83d\ude00"]}`,
			`{"a":null,"b":null,"c":null,"d":"x\u0000y","e":1.50,"f":[1,null,"😀"]}`},
		{"{\"k\xff\":\"v\xff\"}", `{"k\ufffd":"v\ufffd"}`},
		{`"x\x00y"`, `"x\\x00y"`}, // fastjson's MarshalTo wrote Go escapes: kept as text
	} {
		var p fastjson.Parser
		v, err := p.Parse(c.in)
		if err != nil {
			t.Fatalf("parse %q: %v", c.in, err)
		}
		if got := string(Value(nil, v)); got != c.want {
			t.Errorf("Value(%q) = %s, want %s", c.in, got, c.want)
		}
		if got := Raw(nil, c.in); !json.Valid(got) || !utf8.Valid(got) {
			t.Errorf("Raw(%q) = %s: not JSON", c.in, got)
		}
	}
	for _, ok := range []string{`{"a":1.50,"b":"<x>","c":[true,null]}`, `[]`, `"s"`} {
		if got := string(Raw(nil, ok)); got != ok {
			t.Errorf("Raw(%s) = %s, want it unchanged", ok, got)
		}
	}
	if got := string(Raw(nil, `{"a":`)); got != "null" {
		t.Errorf("Raw of a truncated record = %s, want null", got)
	}
}

func TestTimeIsRFC3339(t *testing.T) {
	for _, c := range []struct {
		in   time.Time
		want string
	}{
		{time.Date(10292, 3, 1, 0, 0, 0, 5, time.UTC), `"9999-12-31T23:59:59.999999999Z"`},
		{time.Date(-1, 3, 1, 0, 0, 0, 0, time.UTC), `"0000-01-01T00:00:00Z"`},
		{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), `"9999-12-31T23:59:59Z"`},
	} {
		if got := string(Time(nil, c.in)); got != c.want {
			t.Errorf("Time(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}
