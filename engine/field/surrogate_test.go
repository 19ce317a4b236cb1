package field

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// FuzzLoneSurrogate: on any JSON text in UTF-8, loneSurrogate finds half a surrogate
// pair exactly when fastjson's strings (values and keys) differ from
// encoding/json's, which reads each half as U+FFFD; and it never panics.
func FuzzLoneSurrogate(f *testing.F) {
	for _, s := range []string{`{"a": ["\ud83d\ude00", "\ud800"]}`, `"x\ud800\u0041y"`, `{"\udc00": 1}`,
		`["\\ud800", "\u00e9\ud800\ud800"]`, `{"a": {"b": [1, "\udbff\udfff"]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) || fastjson.ValidateBytes(data) != nil {
			return // ParseJSON refuses it before looking for surrogates
		}
		var p fastjson.Parser
		v, err := p.ParseBytes(data)
		if err != nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var want any
		if dec.Decode(&want) != nil {
			return
		}
		differ := !reflect.DeepEqual(tree(v), want)
		if found := loneSurrogate(data, "") != nil; found != differ {
			t.Errorf("%q: loneSurrogate found one: %v; fastjson and encoding/json differ: %v", data, found, differ)
		}
	})
}

// tree is v as encoding/json with UseNumber decodes it (a repeated key's
// last value wins).
func tree(v *fastjson.Value) any {
	switch v.Type() {
	case fastjson.TypeObject:
		m := map[string]any{}
		v.GetObject().Visit(func(k []byte, e *fastjson.Value) { m[string(k)] = tree(e) })
		return m
	case fastjson.TypeArray:
		a := []any{}
		for _, e := range v.GetArray() {
			a = append(a, tree(e))
		}
		return a
	case fastjson.TypeString:
		return string(v.GetStringBytes())
	case fastjson.TypeNumber:
		return json.Number(v.MarshalTo(nil))
	case fastjson.TypeTrue:
		return true
	case fastjson.TypeFalse:
		return false
	}
	return nil
}
