package api_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestMalformedNumbersAre400: a number outside RFC 8259's grammar (which
// fastjson's parser read as 0) or not finite is a 400 naming its field, in
// every body and in members nothing reads, and nothing is written.
func TestMalformedNumbersAre400(t *testing.T) {
	s := newS4Env(t, config{})
	c := s.c
	agent := s.agent(t, "strict", "")
	run := str(t, c.must(201, "POST", "/api/v1/agents/"+agent+"/runs", `{}`), "id")
	objective := s.objective(t, agent, "")
	agentPath := "/api/v1/agents/" + agent
	before := c.raw(agentPath+"/runs/"+run+"/signals") + c.raw(rewardsPath(run)) + c.raw(agentPath+"/objective")

	// @ stands for the malformed number.
	bodies := []struct {
		name, method, path, body, field string
		rpc                             bool // the seed-004 error shape
	}{
		{"signal value", "POST", agentPath + "/signals", `{"kind": "k", "value": @, "run_id": "` + run + `"}`, "value", false},
		{"signal member nothing reads", "POST", agentPath + "/signals", `{"kind": "k", "value": 1, "run_id": "` + run + `", "extra": {"deep": [1, @]}}`, "extra.deep[1]", false},
		{"report value", "POST", rewardsPath(run), `{"scorer": "s", "value": @}`, "value", false},
		{"report weight", "POST", rewardsPath(run), `{"scorer": "s", "value": 1, "weight": @}`, "weight", false},
		{"review value", "POST", rewardsPath(run), `{"kind": "review", "value": @}`, "value", false},
		{"enveloped report value", "POST", rewardsPath(run), `{"value": {"scorer": "s", "value": @}}`, "value.value", false},
		{"report detail", "POST", rewardsPath(run), `{"scorer": "s", "value": 1, "detail": {"b": @}}`, "detail.b", false},
		{"choice shown item", "POST", rewardsPath(run), `{"kind": "choice", "shown": [1, @], "chosen": 1}`, "shown[1]", false},
		{"feedback score", "POST", s.path("/objectives/" + objective + "/feedback"), `{"metadata": {}, "data": {"score": @}}`, "data.score", true},
		{"objective weight", "PUT", agentPath + "/objective", `{"definition": {"terms": [{"signal": "k", "weight": @}]}}`, "definition.terms[0].weight", false},
		{"objective horizon", "PUT", agentPath + "/objective", `{"definition": {"horizon_s": @, "terms": [{"signal": "k", "weight": 1}]}}`, "definition.horizon_s", false},
		{"variation config", "POST", agentPath + "/variations", `{"name": "v", "config": {"t": @}}`, "config.t", false},
		{"judged reward", "POST", "/v1/rewards", `{"task": {"id": "t"}, "answer": "a", "x": @}`, "x", false},
	}
	// fastjson's parser takes these as numbers; the answer names the field.
	lenient := []string{"+1", "1e", "-.5e", ".5", "1.", "01", "-01", "1e+", "NaN", "-inf", "1e999"}
	// These the parser itself refuses; the answer names no field.
	refused := []string{"-", "Infinity"}
	for _, b := range bodies {
		for _, n := range append(lenient, refused...) {
			want := b.field + ":"
			if slices.Contains(refused, n) {
				want = "malformed JSON"
			}
			t.Run(b.name+" "+n, func(t *testing.T) {
				res := c.on(t).request(b.method, b.path, strings.Replace(b.body, "@", n, 1), nil)
				if b.rpc {
					rpcStatus(t, res, 400, 3, want)
				} else {
					apiError(t, res, 400, "invalid_request", want)
				}
			})
		}
	}
	after := c.raw(agentPath+"/runs/"+run+"/signals") + c.raw(rewardsPath(run)) + c.raw(agentPath+"/objective")
	if after != before {
		t.Errorf("a rejected body changed state:\nbefore %s\nafter  %s", before, after)
	}
	// The same numbers written as JSON writes them are accepted.
	for _, n := range []string{"1", "-0.5", "1e0", "1E-2", "0", "-0", "10.25e+1"} {
		c.must(201, "POST", agentPath+"/signals", `{"kind": "k", "value": `+n+`, "run_id": "`+run+`"}`)
	}
}

// TestEvidenceStaysJSON: a report's detail with non-finite or malformed
// numbers, or bytes that are not UTF-8, is refused at the door; control
// characters in its strings are kept and escaped, so the job's evidence
// list (and every other answer, as the harness checks) stays JSON.
func TestEvidenceStaysJSON(t *testing.T) {
	e := newS1Env(t)
	for _, tc := range []struct{ body, want string }{
		{`{"scorer": "s", "value": 1, "detail": {"a": NaN, "b": +1, "c": -inf, "d": "x\u0000y"}}`, "detail.a:"},
		{`{"scorer": "s", "value": 1, "detail": {"b": +1}}`, "detail.b:"},
		{`{"scorer": "s", "value": 1, "detail": {"c": -inf}}`, "detail.c:"},
		{"{\"scorer\": \"s\", \"value\": 1, \"detail\": {\"e\": \"\xff\"}}", "detail.e:"},
		{"{\"scorer\": \"s\xfe\", \"value\": 1}", "scorer:"},
		{"{\"scorer\": \"s\", \"value\": 1}\xff", "malformed JSON at byte 27: expected the end of the document"},
		{`{"scorer": "s", "value": 1 "detail": {}}`, `malformed JSON at byte 27: expected ',' or '}' after an object member, found '"'`},
		// Half a surrogate pair is no UTF-8: fastjson kept it as its escape's
		// six characters, or ate the escape after it ("x\ud800\u0041y" read
		// as "x\ufffdy").
		{`{"scorer": "s\ud800", "value": 1}`, "scorer: must be valid UTF-8"},
		{`{"scorer": "s", "value": 1, "detail": {"n": ["x\ud800\u0041y"]}}`, "detail.n[0]: must be valid UTF-8"},
		{`{"scorer": "s", "value": 1, "detail": {"\udfff": 1}}`, "detail: has a key that is not valid UTF-8"},
		// A key twice in one object: which counts is the reader's choice
		// (a proxy taking the last would see another report).
		{`{"scorer": "s", "value": 1, "value": 0}`, "value: is given more than once"},
		{`{"scorer": "s", "value": 1, "detail": {"a": [{"k": 1, "k": 2}]}}`, "detail.a[0].k: is given more than once"},
	} {
		apiError(t, e.report(e.c, e.job, tc.body, nil), 400, "invalid_request", tc.want)
	}
	e.mustReport(t, `{"scorer": "s", "value": 1, "detail": {"d": "x\u0000y\u001f", "e": "<\u00ff&>\u2028", "f": 1.50, "g": "\ud83d\ude00\\ud800"}}`)
	e.mustReport(t, `{"kind": "choice", "shown": ["a\u0000", {"k": "\u0007"}], "chosen": {"k": "\u0007"}}`)
	raw := e.evidence(t)
	var got struct {
		Items []struct {
			Detail map[string]any `json:"detail_json"`
			Shown  []any          `json:"shown"`
			Chosen any            `json:"chosen"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil || len(got.Items) != 2 {
		t.Fatalf("evidence %s: %v", raw, err)
	}
	if d := got.Items[0].Detail; d["d"] != "x\x00y\x1f" || d["e"] != "<\u00ff&>\u2028" || d["f"] != 1.5 || d["g"] != "😀\\ud800" {
		t.Errorf("detail_json = %#v, want the strings and number as sent", d)
	}
	if s := got.Items[1].Shown; len(s) != 2 || s[0] != "a\x00" || got.Items[1].Chosen.(map[string]any)["k"] != "\a" {
		t.Errorf("shown = %#v, chosen = %#v, want them as sent", s, got.Items[1].Chosen)
	}
}
