package api

import (
	"math/rand/v2"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/judging"
)

// Seed 001: reward reports on a job (a run here).
//
//	POST /v1/jobs/{id}/rewards   report, or replace the (scorer, turn)'s report
//	GET  /v1/jobs/{id}/rewards   every piece of evidence on the job: its reports, its
//	                             seed-004 feedback, then the seed-003 judged rewards whose
//	                             episode_id is the job

// Limits of seed 001.
const (
	maxReportWeight = 1000
	maxDetailKeys   = 20
	maxDetailString = 256
	maxPromptLen    = 12000
	maxTurnLen      = 200
)

// decodeReport validates a report body against every constraint of seed
// 001 that needs no state; the engine checks the trace and the race. The
// report is the body itself, or, as seed 001 documents the body
// ("value: object", one of the shapes), the object under "value": in the
// flat external shape "value" is a number or null, never an object, so the
// two never clash. enveloped tells which, for the paths of errors.
func decodeReport(raw []byte) (cmd engine.ReportReward, enveloped bool, err error) {
	err = parseBody(raw, func(top *body) error {
		b := top
		if v := top.get("value"); v != nil && v.Type() == fastjson.TypeObject {
			b, enveloped = top.object("value"), true
		}
		cmd.Kind = b.str("kind", false)
		weight := 1.0
		switch cmd.Kind {
		case "", engine.ReportExternal:
			cmd.Kind = engine.ReportExternal
			cmd.Scorer = b.str("scorer", true)
			if b.v.Get("value") == nil {
				b.fail("value", "is required (a number or null)")
			}
			if v, ok := b.num("value", false); ok {
				cmd.Value = &v
			}
		case engine.ReportReview:
			cmd.Scorer = scorerOr(b, "review")
			v, ok := b.num("value", true)
			if ok && (v < 0 || v > 1) {
				b.fail("value", "must be between 0 and 1")
			}
			cmd.Value = &v
			weight = 2
		case engine.ReportChoice:
			cmd.Scorer = scorerOr(b, "choice")
			cmd.Shown, cmd.Chosen = choice(b)
			if b.has("prompt") {
				cmd.Prompt = b.str("prompt", false)
				if n := len([]rune(cmd.Prompt)); n < 1 || n > maxPromptLen {
					b.fail("prompt", "must be 1-%d characters", maxPromptLen)
				}
			}
		default:
			b.fail("kind", "must be external, review or choice")
			return nil
		}
		if w, ok := b.num("weight", false); ok {
			if w < 0 || w > maxReportWeight {
				b.fail("weight", "must be between 0 and %d", maxReportWeight)
			}
			weight = w
		}
		cmd.Weight = weight
		for _, k := range []string{"turn_id", "trace_id"} {
			if b.has(k) {
				if n := utf8.RuneCountInString(b.str(k, false)); n < 1 || n > maxTurnLen {
					b.fail(k, "must be 1-%d characters", maxTurnLen)
				}
			}
		}
		cmd.TurnID, cmd.TraceID = b.str("turn_id", false), b.str("trace_id", false)
		cmd.Detail = detail(b)
		return nil
	})
	return cmd, enveloped, err
}

// envelopeFields are the paths of the engine's report fields inside the
// "value" envelope.
var envelopeFields = map[string]string{"scorer": "value.scorer", "value": "value.value",
	"trace_id": "value.trace_id", "turn_id": "value.turn_id"}

// scorerOr reads scorer, or def when the field is absent. An explicit empty
// scorer stays empty, for the engine to reject.
func scorerOr(b *body, def string) string {
	if !b.has("scorer") {
		return def
	}
	return b.str("scorer", false)
}

// choice reads shown (2-20 items) and chosen (one of them, or null).
func choice(b *body) (shown, chosen string) {
	sv := b.get("shown")
	if sv == nil {
		b.fail("shown", "is required")
		return "", ""
	}
	items, err := sv.Array()
	if err != nil || len(items) < 2 || len(items) > 20 {
		b.fail("shown", "must be an array of 2-20 items")
		return "", ""
	}
	cv := b.v.Get("chosen")
	if cv == nil {
		b.fail("chosen", "is required (one of shown, or null)")
		return "", ""
	}
	chosen = string(jsonw.Value(nil, cv))
	if cv.Type() != fastjson.TypeNull {
		found := false
		for _, it := range items {
			if jsonEqual(it, cv) {
				found = true
				break
			}
		}
		if !found {
			b.fail("chosen", "must be one of shown, or null")
		}
	}
	return string(jsonw.Value(nil, sv)), chosen
}

// jsonEqual compares two JSON values structurally (object key order aside).
func jsonEqual(a, b *fastjson.Value) bool {
	if a.Type() != b.Type() {
		return false
	}
	switch a.Type() {
	case fastjson.TypeObject:
		ao, bo := a.GetObject(), b.GetObject()
		if ao.Len() != bo.Len() {
			return false
		}
		eq := true
		ao.Visit(func(k []byte, v *fastjson.Value) {
			if w := bo.Get(string(k)); w == nil || !jsonEqual(v, w) {
				eq = false
			}
		})
		return eq
	case fastjson.TypeArray:
		aa, ba := a.GetArray(), b.GetArray()
		if len(aa) != len(ba) {
			return false
		}
		for i := range aa {
			if !jsonEqual(aa[i], ba[i]) {
				return false
			}
		}
		return true
	case fastjson.TypeNumber:
		return a.GetFloat64() == b.GetFloat64()
	case fastjson.TypeString:
		return string(a.GetStringBytes()) == string(b.GetStringBytes())
	}
	return true // true, false, null
}

// detail reads detail: at most 20 keys of short plaintext values.
func detail(b *body) string {
	v := b.get("detail")
	if v == nil {
		return ""
	}
	o, err := v.Object()
	if err != nil {
		b.fail("detail", "must be an object")
		return ""
	}
	if o.Len() > maxDetailKeys {
		b.fail("detail", "at most %d keys", maxDetailKeys)
		return ""
	}
	o.Visit(func(k []byte, dv *fastjson.Value) {
		switch dv.Type() {
		case fastjson.TypeString:
			if len([]rune(string(dv.GetStringBytes()))) > maxDetailString {
				b.failMember("detail", string(k), "must be at most %d characters", maxDetailString)
			}
		case fastjson.TypeNumber, fastjson.TypeTrue, fastjson.TypeFalse, fastjson.TypeNull:
		default:
			b.failMember("detail", string(k), "must be a string, number, boolean or null")
		}
	})
	return string(jsonw.Value(nil, v))
}

func (c *call) reportReward() (result, error) {
	cmd, enveloped, err := decodeReport(c.req.Body)
	if err != nil {
		return result{}, err
	}
	// Over HTTP the job alone names the run; the NATS door names its agent
	// too, which must then own it.
	var owner *engine.AgentInfo
	if c.req.Target.Agent != "" {
		a, err := c.agent()
		if err != nil {
			return result{}, err
		}
		owner = &a
	}
	runID, agent, err := c.run(owner)
	if err != nil {
		return result{}, notFound("job", c.req.Target.Run)
	}
	cmd.RunID, cmd.Started = runID, c.req.Started
	return write(c, agent.ID, func(a *engine.Agent, now time.Time, rnd *rand.Rand) (engine.Report, []engine.Event, error) {
		rep, evs, err := a.ReportReward(cmd, now, rnd)
		if enveloped {
			err = field.Rename(err, envelopeFields)
		}
		return rep, evs, err
	}, func(rep engine.Report) (result, error) { return created(appendReport(answer(), rep)) })
}

func (c *call) listEvidence() (result, error) {
	runID, agent, err := c.run(nil)
	if err != nil {
		return result{}, notFound("job", c.req.Target.Run)
	}
	type evidence struct {
		reports  []engine.Report
		feedback []engine.Feedback
	}
	ev, err := actors.Read(c.s.reg, agent.ID, c.by, func(a *engine.Agent, _ time.Time) (evidence, error) {
		reps, err := a.Reports(runID)
		return evidence{reps, a.RunFeedback(runID)}, err
	})
	if err != nil {
		return result{}, err
	}
	judged, err := c.s.judging.EpisodeRewards(c.ws, runID)
	if err != nil {
		return result{}, err
	}
	b := append([]byte(nil), `{"items":[`...)
	n := 0
	sep := func() {
		if n > 0 {
			b = append(b, ',')
		}
		n++
	}
	for _, rep := range ev.reports {
		sep()
		b = appendReport(b, rep)
	}
	for _, fb := range ev.feedback {
		sep()
		b = appendFeedbackEvidence(b, fb)
	}
	judges := map[[2]string]bool{} // task version → it has a model-judge criterion
	for _, r := range judged {
		tv := [2]string{r.TaskID, r.TaskVersion}
		hasJudge, seen := judges[tv]
		if !seen {
			v, err := c.s.judging.TaskVersion(c.ws, r.TaskID, r.TaskVersion)
			if err != nil {
				return result{}, err
			}
			hasJudge = slices.ContainsFunc(v.Task.Criteria, func(cr judge.Criterion) bool { return cr.Check.IsJudge() })
			judges[tv] = hasJudge
		}
		sep()
		b = appendJudgedEvidence(b, r, hasJudge)
	}
	return ok(append(b, "]}"...))
}

// The kinds of a judged reward (seed 003) listed as evidence on its
// episode.
const (
	evidenceModelJudge = "model_judge" // the task has a model-judge criterion
	evidenceCheck      = "check"       // built-in checks only
)

// appendJudgedEvidence renders a judged reward whose episode is the job in
// the report shape: kind model_judge or check, scorer "judge", value = its
// reward score (null while pending or when failed), weight 1, and task_id,
// task_version, judge_version, status, flags (and failure, when failed) in
// detail_json; updated_at is when it was scored or failed.
func appendJudgedEvidence(b []byte, r judging.Reward, hasJudge bool) []byte {
	kind := evidenceCheck
	if hasJudge {
		kind = evidenceModelJudge
	}
	var value *float64
	if r.Status == judging.StatusScored {
		v := r.Scores.Reward
		value = &v
	}
	detail := []byte{'{'}
	detail = jsonw.Key(detail, "task_id")
	detail = jsonw.String(detail, r.TaskID)
	detail = jsonw.Key(detail, "task_version")
	detail = jsonw.String(detail, r.TaskVersion)
	detail = jsonw.Key(detail, "judge_version")
	detail = jsonw.String(detail, r.JudgeVersion)
	detail = jsonw.Key(detail, "status")
	detail = jsonw.String(detail, r.Status)
	detail = jsonw.Key(detail, "flags")
	detail = jsonw.Strings(detail, r.Flags)
	if r.Status == judging.StatusFailed {
		detail = jsonw.Key(detail, "failure")
		detail = jsonw.String(detail, r.Failure)
	}
	detail = append(detail, '}')
	updated := r.CreatedAt
	if !r.ScoredAt.IsZero() {
		updated = r.ScoredAt
	}
	return appendReport(b, engine.Report{ID: r.ID, RunID: r.EpisodeID, Kind: kind, Scorer: "judge",
		Value: value, Weight: 1, Detail: string(detail), CreatedAt: r.CreatedAt, UpdatedAt: updated})
}

// appendReport renders seed 001's 201 body.
func appendReport(b []byte, p engine.Report) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, p.ID)
	b = jsonw.Key(b, "job_id")
	b = jsonw.String(b, p.RunID)
	b = jsonw.Key(b, "kind")
	b = jsonw.String(b, p.Kind)
	b = jsonw.Key(b, "scorer")
	b = jsonw.String(b, p.Scorer)
	b = jsonw.Key(b, "turn_id")
	b = jsonw.StringOrNull(b, p.TurnID)
	b = jsonw.Key(b, "trace_id")
	b = jsonw.StringOrNull(b, p.TraceID)
	b = jsonw.Key(b, "value")
	b = jsonw.FloatPtr(b, p.Value)
	b = jsonw.Key(b, "weight")
	b = jsonw.Float(b, p.Weight)
	b = jsonw.Key(b, "gate")
	b = jsonw.Bool(b, false)
	b = jsonw.Key(b, "detail_json")
	if p.Detail == "" {
		b = append(b, "{}"...)
	} else {
		b = jsonw.Raw(b, p.Detail)
	}
	if p.Kind == engine.ReportChoice {
		b = jsonw.Key(b, "shown")
		b = jsonw.Raw(b, p.Shown)
		b = jsonw.Key(b, "chosen")
		b = jsonw.Raw(b, p.Chosen)
		if p.Prompt != "" {
			b = jsonw.Key(b, "prompt")
			b = jsonw.String(b, p.Prompt)
		}
	}
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, p.CreatedAt)
	b = jsonw.Key(b, "updated_at")
	b = jsonw.Time(b, p.UpdatedAt)
	return append(b, '}')
}

// appendFeedbackEvidence renders seed-004 feedback in the report shape:
// kind "feedback", value = score, comment and labels in detail_json.
func appendFeedbackEvidence(b []byte, fb engine.Feedback) []byte {
	detail := []byte{'{'}
	if fb.Comment != "" {
		detail = jsonw.Key(detail, "comment")
		detail = jsonw.String(detail, fb.Comment)
	}
	if len(fb.Labels) > 0 {
		detail = jsonw.Key(detail, "labels")
		detail = jsonw.StringMap(detail, fb.Labels)
	}
	detail = append(detail, '}')
	return appendReport(b, engine.Report{ID: fb.ID, RunID: fb.RunID, Kind: engine.FeedbackSignal,
		Scorer: engine.FeedbackSignal, Value: fb.Score, Weight: 1, Detail: string(detail),
		CreatedAt: fb.CreatedAt, UpdatedAt: fb.CreatedAt})
}
