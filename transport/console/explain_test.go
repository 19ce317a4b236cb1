package console

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestLineDiff(t *testing.T) {
	cases := []struct {
		name, a, b string
		want       string // ops and lines joined by "|"
	}{
		{"same", "x\ny", "x\ny", " x| y"},
		{"changed line", "a\nb\nc", "a\nB\nc", " a|-b|+B| c"},
		{"added at end", "a", "a\nb", " a|+b"},
		{"removed at start", "a\nb", "b", "-a| b"},
		{"all new", "", "x", "-|+x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, l := range lineDiff(c.a, c.b) {
				got = append(got, string(l.Op)+l.Text)
			}
			if g := strings.Join(got, "|"); g != c.want {
				t.Errorf("diff = %q, want %q", g, c.want)
			}
		})
	}
}

func TestExplainSignal(t *testing.T) {
	var def definitionJSON
	if err := json.Unmarshal([]byte(`{"horizon_s": 3600, "terms": [
		{"signal": "human.rating", "weight": 1, "agg": "last"},
		{"signal": "external.closed", "weight": 1, "agg": "last", "within_s": 600}],
		"guards": [{"signal": "run.succeeded", "op": "lt", "value": 1}], "bounds": [0, 1]}`), &def); err != nil {
		t.Fatal(err)
	}
	fin := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return fin.Add(d) }
	cases := []struct {
		name               string
		finished           *time.Time
		kind               string
		occurred, received time.Time
		verdict, why       string
	}{
		{"in time", &fin, "human.rating", at(time.Minute), at(time.Minute), verdictUsed, "term human.rating"},
		{"late", &fin, "human.rating", at(time.Minute), at(2 * time.Hour), verdictLate, "received 1h after the horizon closed"},
		{"late at the second", &fin, "human.rating", at(0), at(time.Hour + time.Second), verdictLate, "received 1s after"},
		{"on the deadline", &fin, "human.rating", at(0), at(time.Hour), verdictUsed, ""},
		{"outside window", &fin, "external.closed", at(20 * time.Minute), at(20 * time.Minute), verdictOutside, "occurred 10m after its term's window"},
		{"guard", &fin, "run.succeeded", at(0), at(0), verdictUsed, "guard run.succeeded lt 1"},
		{"unread kind", &fin, "other", at(0), at(0), verdictUnread, "reads kind other"},
		{"unfinished: no window", nil, "external.closed", at(20 * time.Minute), at(48 * time.Hour), verdictUsed, "unfinished"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := explain(def, c.finished, c.kind, c.occurred, c.received)
			if v.Verdict != c.verdict || !strings.Contains(v.Why, c.why) {
				t.Errorf("got %q (%s), want %q containing %q", v.Verdict, v.Why, c.verdict, c.why)
			}
		})
	}
}

func TestContribution(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	terms := []termJSON{{Weight: 0.5, Scaled: f(1)}, {Weight: 0.25, Scaled: f(0.4)}, {Weight: 1}, {Weight: -0.25, Scaled: f(1)}}
	cases := []struct {
		i    int
		want float64
		ok   bool
	}{{0, 2 * 0.5 / 0.75, true}, {1, 2 * 0.1 / 0.75, true}, {2, 0, false}, {3, 2 * -0.25 / 0.75, true}}
	for _, c := range cases {
		got, ok := contribution(terms, c.i, [2]float64{-1, 1})
		if ok != c.ok || ok && (got-c.want > 1e-12 || c.want-got > 1e-12) {
			t.Errorf("term %d: %v %v, want %v %v", c.i, got, ok, c.want, c.ok)
		}
	}
}
