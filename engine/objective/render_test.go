package objective

import (
	"encoding/json"
	"testing"
	"time"
)

func TestDefaultCanonicalJSON(t *testing.T) {
	const want = `{"horizon_s":604800,"default":"exclude","guards":[{"signal":"run.succeeded","op":"lt","value":1}],` +
		`"terms":[{"signal":"human.rating","weight":1,"agg":"last","scale":[0,1],"missing":"skip","evidence":true},` +
		`{"signal":"human.approval","weight":1,"agg":"last","scale":[0,1],"missing":"skip","evidence":true}],"bounds":[0,1]}`
	if got := string(Default().AppendJSON(nil)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestAppendJSONFillsDefaults(t *testing.T) {
	d := Definition{Terms: []Term{{Signal: "a", Weight: 1}}}
	const want = `{"horizon_s":604800,"default":"exclude","guards":[],` +
		`"terms":[{"signal":"a","weight":1,"agg":"last","missing":"skip","evidence":false}],"bounds":[0,1]}`
	if got := string(d.AppendJSON(nil)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestDefinitionRoundTrip(t *testing.T) {
	full := Definition{
		HorizonS: 0.5,
		Default:  f(-0.25),
		Guards:   []Guard{{Signal: "a", Op: OpNE, Value: -1e-9}, {Signal: "b", Op: OpGE, Value: 1e300}},
		Terms: []Term{
			{Signal: "c.d", Weight: -3.75, Agg: AggCount, Scale: &[2]float64{-1e-7, 1e22}, WithinS: f(0), Missing: f(0.1), Evidence: false},
			{Signal: "E_f-9", Weight: 0, Agg: AggMean, WithinS: f(86400.5), Evidence: true},
		},
		Bounds: [2]float64{-1, 1},
	}
	for name, d := range map[string]Definition{"default": Default(), "seed": seedDefinition(t), "full": full} {
		text := d.AppendJSON(nil)
		got, err := Parse(text, "definition")
		if err != nil {
			t.Fatalf("%s: %s: %v", name, text, err)
		}
		if !equalDefinitions(got, d) {
			t.Fatalf("%s: %s parsed to %+v", name, text, got)
		}
	}
}

func TestRewardJSON(t *testing.T) {
	d := seedDefinition(t)
	scored := Evaluate(d, 1, finished, []Signal{
		sig("run.succeeded", 1, 0, 0, 1), sig("human.rating", 4, time.Hour, time.Hour, 2),
		sig("external.ticket_closed", 1, 3*time.Hour, 3*time.Hour, 3)}, t0.Add(3*day))
	const want = `{"run_id":"run_1","objective_version":1,"status":"scored","value":0.875,"matured":true,` +
		`"matures_at":"2026-03-03T12:00:00Z","terms":[` +
		`{"signal":"human.rating","weight":0.5,"agg":"last","count":1,"raw":4,"scaled":0.75,"imputed":false,"evidence":true},` +
		`{"signal":"external.ticket_closed","weight":0.5,"agg":"last","count":1,"raw":1,"scaled":1,"imputed":false,"evidence":true}],` +
		`"guards":[{"signal":"run.succeeded","op":"lt","value":1,"matched":false}],"late_signals":0}`
	if got := string(scored.AppendJSON(nil)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	// Excluded and unfinished: value, raw, scaled and matures_at are null.
	excluded := Evaluate(d, 2, unfinished, nil, t0)
	out := excluded.AppendJSON([]byte("prefix:"))[len("prefix:"):]
	if !json.Valid(out) {
		t.Fatalf("invalid JSON: %s", out)
	}
	var got struct {
		Status    string
		Value     *float64
		Matured   bool
		MaturesAt *string `json:"matures_at"`
		Terms     []struct {
			Raw, Scaled *float64
			Imputed     bool
		}
		Guards      []struct{ Matched bool }
		LateSignals *int `json:"late_signals"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Status != "excluded" || got.Value != nil || got.Matured || got.MaturesAt != nil ||
		len(got.Terms) != 2 || got.Terms[0].Raw != nil || got.Terms[0].Scaled != nil ||
		got.Terms[1].Raw == nil || !got.Terms[1].Imputed || len(got.Guards) != 1 || got.LateSignals == nil {
		t.Fatalf("unexpected reward JSON: %s", out)
	}
}
