// Package jsontest reads decoded JSON answers in tests: walk a value by
// keys and indexes, and compare fields. Every helper fails the test (via t)
// on a value of the wrong shape.
package jsontest

import (
	"encoding/json"
	"math"
	"testing"
	"time"
	"unicode/utf8"
)

// Valid reports whether an answer's body is JSON in UTF-8, as every answer
// of every door must be (encoding/json alone lets invalid UTF-8 through).
func Valid(body []byte) bool { return json.Valid(body) && utf8.Valid(body) }

// At walks a decoded JSON value by object keys (string) and array indexes (int).
func At(t *testing.T, v any, path ...any) any {
	t.Helper()
	cur := v
	for i, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %v is not an object", path[:i+1], cur)
			}
			if cur, ok = m[k]; !ok {
				t.Fatalf("at %v: no key %q in %v", path[:i+1], k, m)
			}
		case int:
			a, ok := cur.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at %v: %v is not an array with index %d", path[:i+1], cur, k)
			}
			cur = a[k]
		}
	}
	return cur
}

// Str is At for a string.
func Str(t *testing.T, v any, path ...any) string {
	t.Helper()
	s, ok := At(t, v, path...).(string)
	if !ok {
		t.Fatalf("at %v: %v is not a string", path, At(t, v, path...))
	}
	return s
}

// Num is At for a number.
func Num(t *testing.T, v any, path ...any) float64 {
	t.Helper()
	f, ok := At(t, v, path...).(float64)
	if !ok {
		t.Fatalf("at %v: %v is not a number", path, At(t, v, path...))
	}
	return f
}

// List is At for an array.
func List(t *testing.T, v any, path ...any) []any {
	t.Helper()
	a, ok := At(t, v, path...).([]any)
	if !ok {
		t.Fatalf("at %v: %v is not an array", path, At(t, v, path...))
	}
	return a
}

// Expect compares a field with a wanted value: float64 with a tolerance of
// 1e-12, nil for JSON null, anything else with ==.
func Expect(t *testing.T, v any, want any, path ...any) {
	t.Helper()
	got := At(t, v, path...)
	if wf, ok := want.(float64); ok {
		gf, ok := got.(float64)
		if !ok || math.Abs(gf-wf) > 1e-12 {
			t.Errorf("at %v: got %v, want %v", path, got, want)
		}
		return
	}
	if got != want {
		t.Errorf("at %v: got %#v, want %#v", path, got, want)
	}
}

// TS formats a time as the API renders it.
func TS(tm time.Time) string { return tm.UTC().Format(time.RFC3339Nano) }

// ExpectTime compares an RFC 3339 field with a time.
func ExpectTime(t *testing.T, v any, want time.Time, path ...any) {
	t.Helper()
	got, err := time.Parse(time.RFC3339Nano, Str(t, v, path...))
	if err != nil {
		t.Errorf("at %v: %v", path, err)
		return
	}
	if !got.Equal(want) {
		t.Errorf("at %v: got %s, want %s", path, TS(got), TS(want))
	}
}
