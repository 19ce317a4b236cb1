package api

import (
	"errors"
	"testing"
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/engine/field"
)

func TestDecodeSignal(t *testing.T) {
	cases := []struct {
		name, body string
		path       string // "" with ok=false means a whole-body error
		ok         bool
	}{
		{"seed example", `{"kind": "human.rating", "value": 0.8, "run_id": "run_1", "dedup_key": "msg-19"}`, "", true},
		{"unknown fields ignored", `{"kind":"k","value":1,"object":"o/1","extra":{"x":[1]}}`, "", true},
		{"null is absent", `{"kind":"k","value":1,"object":"o/1","dedup_key":null}`, "", true},
		{"not JSON", `{"kind":`, "", false},
		{"not an object", `[1,2]`, "", false},
		{"missing kind", `{"value":1,"run_id":"r"}`, "kind", false},
		{"kind not a string", `{"kind":7,"value":1,"run_id":"r"}`, "kind", false},
		{"missing value", `{"kind":"k","run_id":"r"}`, "value", false},
		{"value a string", `{"kind":"k","value":"1","run_id":"r"}`, "value", false},
		{"value overflows", `{"kind":"k","value":1e999,"run_id":"r"}`, "value", false},
		{"run_id a number", `{"kind":"k","value":1,"run_id":5}`, "run_id", false},
		{"bad occurred_at", `{"kind":"k","value":1,"run_id":"r","occurred_at":"yesterday"}`, "occurred_at", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeSignal([]byte(c.body))
			if c.ok {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			var fe *field.Error
			if !errors.As(err, &fe) || fe.Path != c.path {
				t.Fatalf("err = %v, want a field error at %q", err, c.path)
			}
		})
	}
	cmd, err := decodeSignal([]byte(`{"kind":"k","value":-2.5,"session_id":"s","occurred_at":"2026-11-30T10:00:00+02:00"}`))
	if err != nil || cmd.Value != -2.5 || cmd.SessionID != "s" || !cmd.OccurredAt.Equal(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)) {
		t.Fatalf("decoded %+v, %v", cmd, err)
	}
}

// FuzzSignalBody: any body decodes or fails with a field error (a 400);
// nothing panics.
func FuzzSignalBody(f *testing.F) {
	f.Add([]byte(`{"kind": "human.rating", "value": 0.8, "run_id": "run_1", "dedup_key": "msg-19"}`))
	f.Add([]byte(`{"kind":"k","value":1,"object":"zendesk.ticket/42","occurred_at":"2026-11-30T10:00:00Z"}`))
	f.Add([]byte(`{"kind":"k","value":1e999,"session_id":"s"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := decodeSignal(b)
		if err != nil && !errors.Is(err, field.ErrInvalid) {
			t.Fatalf("error %v is not a 400", err)
		}
	})
}

// FuzzReportBody: any body decodes or fails with a field error (a 400).
func FuzzReportBody(f *testing.F) {
	f.Add([]byte(`{"kind":"external","scorer":"ci.tests","value":0.5,"detail":{"suite":"unit","n":3,"ok":true,"x":null}}`))
	f.Add([]byte(`{"kind":"choice","shown":["a",{"x":[1,2]}],"chosen":{"x":[1,2]},"prompt":"pick"}`))
	f.Add([]byte(`{"kind":"review","value":1,"trace_id":"tr-1","weight":1000}`))
	f.Add([]byte(`{"value":{"kind":"review","value":0.5,"detail":{"why":"ok"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, err := decodeReport(b); err != nil && !errors.Is(err, field.ErrInvalid) {
			t.Fatalf("error %v is not a 400", err)
		}
	})
}

// FuzzFeedbackBody: the strict seed-004 decoder never panics and fails
// only with field errors.
func FuzzFeedbackBody(f *testing.F) {
	f.Add([]byte(`{ "metadata": {}, "data": { "score": 1.0, "comment": "Short and on point." } }`))
	f.Add([]byte(`{"metadata":{"externalId":"review-4521","labels":{"source":"csat","cadenya.com/x":"y"}},"data":{"score":-0.8}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, err := decodeFeedback(b); err != nil && !errors.Is(err, field.ErrInvalid) {
			t.Fatalf("error %v is not a 400", err)
		}
	})
}

// FuzzBodyArgs: the NATS door's reading of targets and arguments from a
// body never panics, fails only with field errors, refuses a target that
// is not a string, and keeps every member but null ones: a string as its
// value, anything else as its JSON.
func FuzzBodyArgs(f *testing.F) {
	f.Add([]byte(`{"run_id": "run_1", "objective_version": 0, "succeeded": true}`))
	f.Add([]byte(`{"objectiveId": "external_id:ticket-4521", "metadata": {}, "data": {"score": 1.0}}`))
	f.Add([]byte(`{"variation_id": 1e999}`))
	f.Add([]byte(`{"run_id": 1, "objective_version": [true]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		args, err := BodyArgs(b, "run_id")
		if err != nil {
			if !errors.Is(err, field.ErrInvalid) {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		if len(b) == 0 {
			if len(args) != 0 {
				t.Fatalf("an empty body gave %v", args)
			}
			return
		}
		v, err := fastjson.ParseBytes(b)
		if err != nil {
			t.Fatalf("BodyArgs accepted what fastjson refuses: %v", err)
		}
		if m := v.Get("run_id"); m != nil && m.Type() != fastjson.TypeString && m.Type() != fastjson.TypeNull {
			t.Fatalf("a run_id of type %s accepted", m.Type())
		}
		n := 0
		v.GetObject().Visit(func(k []byte, m *fastjson.Value) {
			got, kept := args[string(k)]
			switch {
			case m.Type() == fastjson.TypeNull:
				if kept {
					t.Fatalf("%q: null kept as %q", k, got)
				}
				return
			case m.Type() == fastjson.TypeString && got != string(m.GetStringBytes()),
				m.Type() != fastjson.TypeString && got != string(m.MarshalTo(nil)):
				t.Fatalf("%q: %q, but the body holds %s", k, got, m)
			}
			n++
		})
		if n != len(args) {
			t.Fatalf("%d members kept of %d", len(args), n)
		}
	})
}
