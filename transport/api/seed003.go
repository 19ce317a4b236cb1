package api

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
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

// Seed 003: tasks, their content-addressed versions, judge versions and
// judged rewards, in the key's home workspace.
//
//	POST /v1/tasks                          a version of a task: 201 new, 200 known
//	GET  /v1/tasks/{id}                     its versions, oldest first, and the current one
//	GET  /v1/tasks/{id}/versions/{tv}       one version
//	PUT  /v1/judge-versions/{jv}            publish a judge version: 201, 200 the same again, 409 another
//	GET  /v1/judge-versions                 j1 and the published ones

func (c *call) createTask() (result, error) {
	t, err := judge.Parse(orEmptyObject(c.req.Body), "")
	if err != nil {
		return result{}, err
	}
	tv, created, err := c.s.judging.PutTask(c.ws, t)
	if err != nil {
		return result{}, err
	}
	return result{status: statusFor(created), body: appendTaskVersion(nil, tv)}, nil
}

func (c *call) getTask() (result, error) {
	versions, err := c.s.judging.TaskVersions(c.ws, c.req.Target.Task)
	if err != nil {
		return result{}, err
	}
	if len(versions) == 0 {
		return result{}, notFound("task", c.req.Target.Task)
	}
	b := append([]byte(nil), '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, c.req.Target.Task)
	b = jsonw.Key(b, "current")
	b = jsonw.String(b, versions[len(versions)-1].Version)
	b = jsonw.Key(b, "items")
	b = append(b, '[')
	for i, tv := range versions {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendTaskVersion(b, tv)
	}
	return ok(append(b, "]}"...))
}

// listPromptChars is how much of a task's prompt the list carries: a
// prompt may be up to a request body long, and a list of whole prompts
// grew by as much a task. The task's version holds the whole of it.
const listPromptChars = 500

// listTasks renders the workspace's tasks by id: {"items": [{"object":
// "task", id, current, versions, created_at (its first version's),
// updated_at (its current version's), prompt (the current version's, its
// first listPromptChars characters), prompt_truncated}]}.
func (c *call) listTasks() (result, error) {
	tasks, err := c.s.judging.Tasks(c.ws)
	if err != nil {
		return result{}, err
	}
	return ok(appendItems(nil, tasks, func(b []byte, t judging.TaskSummary) []byte {
		b = append(b, '{')
		b = jsonw.Key(b, "object")
		b = jsonw.String(b, "task")
		b = jsonw.Key(b, "id")
		b = jsonw.String(b, t.ID)
		b = jsonw.Key(b, "current")
		b = jsonw.String(b, t.Current.Version)
		b = jsonw.Key(b, "versions")
		b = jsonw.Int(b, int64(t.Versions))
		b = jsonw.Key(b, "created_at")
		b = jsonw.Time(b, t.CreatedAt)
		b = jsonw.Key(b, "updated_at")
		b = jsonw.Time(b, t.Current.CreatedAt)
		prompt, clipped := clipChars(t.Current.Task.Prompt, listPromptChars)
		b = jsonw.Key(b, "prompt")
		b = jsonw.String(b, prompt)
		b = jsonw.Key(b, "prompt_truncated")
		b = jsonw.Bool(b, clipped)
		return append(b, '}')
	}))
}

func (c *call) getTaskVersion() (result, error) {
	tv, err := c.s.judging.TaskVersion(c.ws, c.req.Target.Task, c.req.Target.Version)
	if err != nil {
		return result{}, err
	}
	return ok(appendTaskVersion(nil, tv))
}

// appendTaskVersion renders {"object": "task_version", id, version, seq,
// created_at, task: the canonical task, defaults filled in}.
func appendTaskVersion(b []byte, tv judging.TaskVersion) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "object")
	b = jsonw.String(b, "task_version")
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, tv.Task.ID)
	b = jsonw.Key(b, "version")
	b = jsonw.String(b, tv.Version)
	b = jsonw.Key(b, "seq")
	b = jsonw.Int(b, int64(tv.Seq))
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, tv.CreatedAt)
	b = jsonw.Key(b, "task")
	b = tv.Task.AppendJSON(b)
	return append(b, '}')
}

func (c *call) putJudgeVersion() (result, error) {
	jv, err := judging.ParseJudgeVersion(c.req.Target.Version, orEmptyObject(c.req.Body))
	if err != nil {
		return result{}, err
	}
	jv, created, err := c.s.judging.PublishJudgeVersion(c.ws, jv)
	if err != nil {
		return result{}, err
	}
	return result{status: statusFor(created), body: jv.AppendJSON(nil)}, nil
}

func (c *call) listJudgeVersions() (result, error) {
	jvs, err := c.s.judging.JudgeVersions(c.ws)
	if err != nil {
		return result{}, err
	}
	return ok(appendItems(nil, jvs, func(b []byte, jv judging.JudgeVersion) []byte { return jv.AppendJSON(b) }))
}

// Judged rewards (seed 003):
//
//	POST /v1/rewards        {task: {id, version?}, answer, judge_version?, episode_id?, client_ref?}:
//	                        201 a new reward scored (or failed) by the answer, 202 + Retry-After pending,
//	                        200 the first reward of the same answer (202 while that one is pending)
//	GET  /v1/rewards/{id}   200 scored or failed, 202 + Retry-After pending
//
// Both take Prefer: wait=N (0 to 120): the answer waits until the reward is
// final or N seconds pass.

// maxClientRef is the most characters a client_ref may have.
const maxClientRef = 256

// maxPreferWait is the longest Prefer: wait, in seconds.
const maxPreferWait = 120

func (c *call) createJudgedReward() (result, error) {
	wait, err := c.preferWait()
	if err != nil {
		return result{}, err
	}
	in, err := decodeJudgedReward(c.req.Body)
	if err != nil {
		return result{}, err
	}
	if in.EpisodeID != "" {
		runID, agent, err := c.s.reg.Run(c.ws, in.EpisodeID)
		if err == nil {
			err = c.s.runDurable(c.ws, agent.ID, runID, c.by)
		}
		if err != nil {
			return result{}, fmt.Errorf("episode_id: %w", err)
		}
		in.EpisodeID, in.EpisodeAgent = runID, agent.ID
	}
	r, created, err := c.s.judging.CreateReward(c.ws, in)
	if err != nil {
		return result{}, err
	}
	// The same answer again, with an episode of its own: the first reward
	// answers, and the episode gets its signals (now if it is final, else
	// when its dispatcher finishes it).
	linked := !created && in.EpisodeID != "" && in.EpisodeID != r.EpisodeID
	if linked {
		if err := c.s.judging.LinkEpisode(c.ws, r.ID, in.EpisodeID, in.EpisodeAgent); err != nil {
			return result{}, err
		}
		// Read again: a dispatcher that finished the reward before the
		// link was stored did not see it.
		if r, err = c.s.judging.Reward(c.ws, r.ID); err != nil {
			return result{}, err
		}
	}
	if created {
		switch {
		case !r.Final():
			c.s.judges.Start(r)
		case r.SignalsPending:
			// Its episode's signals. (A reward made final here has no
			// link to look for: a request linking an episode to it reads
			// it final and settles the link itself.)
			c.s.judges.Settle(r)
		}
	}
	if !r.Final() && wait > 0 {
		if r, err = c.s.judges.Wait(c.ws, r.ID, wait); err != nil {
			return result{}, err
		}
	}
	// A dispatcher closing (the server stopping) leaves the link to the
	// next start's Resume.
	if linked {
		if err := c.s.judges.SettleLinks(r); err != nil && !errors.Is(err, judging.ErrClosed) {
			return result{}, err
		}
	}
	status := 200
	switch {
	case !r.Final():
		status = 202
	case created:
		status = 201
	}
	return result{status: status, body: r.AppendJSON(answer())}, nil
}

func (c *call) getJudgedReward() (result, error) {
	wait, err := c.preferWait()
	if err != nil {
		return result{}, err
	}
	r, err := c.s.judges.Wait(c.ws, c.req.Target.Reward, wait)
	if err != nil {
		return result{}, err
	}
	status := 200
	if !r.Final() {
		status = 202
	}
	return result{status: status, body: r.AppendJSON(answer())}, nil
}

// preferWait reads wait=N from the Prefer header (other preferences are
// ignored): 0 when absent, else N from 0 to 120 seconds. N may be quoted
// (RFC 7240 allows wait="5").
func (c *call) preferWait() (time.Duration, error) {
	for pref := range strings.SplitSeq(c.req.Prefer, ",") {
		pref, _, _ = strings.Cut(pref, ";") // a preference's parameters (RFC 7240) say nothing here
		name, val, hasVal := strings.Cut(strings.TrimSpace(pref), "=")
		if !strings.EqualFold(strings.TrimSpace(name), "wait") {
			continue
		}
		val = strings.TrimSpace(val)
		if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
			val = val[1 : len(val)-1]
		}
		n, err := strconv.Atoi(val)
		if !hasVal || err != nil || n < 0 || n > maxPreferWait {
			return 0, invalid("Prefer", "wait must be a whole number of seconds from 0 to %d", maxPreferWait)
		}
		return time.Duration(n) * time.Second, nil
	}
	return 0, nil
}

// decodeJudgedReward reads {task: {id, version?}, answer, judge_version?,
// episode_id?, client_ref?}. An empty answer is valid (it is flagged
// empty_answer); episode_id is resolved by the caller.
func decodeJudgedReward(raw []byte) (judging.NewReward, error) {
	return field.ParseJSON(orEmptyObject(raw), "", func(v *fastjson.Value) (judging.NewReward, error) {
		var dec field.Decoder
		o := dec.Object(v, "")
		str := func(v *fastjson.Value, path string) string {
			if v == nil {
				dec.Fail(path, "is required")
				return ""
			}
			s, err := v.StringBytes()
			switch {
			case err != nil:
				dec.Fail(path, "must be a string")
			case !utf8.Valid(s):
				dec.Fail(path, "must be valid UTF-8")
			}
			return string(s)
		}
		var in judging.NewReward
		t := dec.Object(field.Member(o, "task"), "task")
		if in.TaskID = str(field.Member(t, "id"), "task.id"); dec.Err == nil && in.TaskID == "" {
			dec.Fail("task.id", "must not be empty")
		}
		if x := field.Member(t, "version"); x != nil {
			in.TaskVersion = str(x, "task.version")
		}
		in.Answer = str(field.Member(o, "answer"), "answer")
		if x := field.Member(o, "judge_version"); x != nil {
			in.JudgeVersion = str(x, "judge_version")
		}
		if x := field.Member(o, "episode_id"); x != nil {
			if in.EpisodeID = str(x, "episode_id"); dec.Err == nil && in.EpisodeID == "" {
				dec.Fail("episode_id", "must not be empty")
			}
		}
		if x := field.Member(o, "client_ref"); x != nil {
			ref := str(x, "client_ref")
			if utf8.RuneCountInString(ref) > maxClientRef {
				dec.Fail("client_ref", "must be at most %d characters", maxClientRef)
			}
			in.ClientRef = &ref
		}
		return in, dec.Err
	})
}

// judgeSignals are the signals a scored reward appends to its episode.
var judgeSignals = []struct {
	kind  string
	value func(judge.Scores) float64
}{
	{"judge.reward", func(s judge.Scores) float64 { return s.Reward }},
	{"judge.partial", func(s judge.Scores) float64 { return s.Partial }},
	{"judge.must_pass", func(s judge.Scores) float64 { return s.MustPass }},
	{"judge.all_pass", func(s judge.Scores) float64 { return s.AllPass }},
}

// appendJudgeSignalsHere appends a reward's judge.* signals to one episode
// in one write, each with dedup key "<kind>/<e.Key>", so appending them
// again (a resume after a crash) adds nothing. A delivery failure is
// returned (the reward or link stays open and is tried again at the next
// start); the engine refusing them (the run is gone) is logged and not
// retried.
func (s *Service) appendJudgeSignalsHere(e judging.EpisodeSignals) error {
	out, err := actors.Write(s.reg, e.Agent, time.Time{}, false, func(a *engine.Agent, now time.Time, rnd *rand.Rand) (struct{}, []engine.Event, error) {
		var evs []engine.Event
		for _, sig := range judgeSignals {
			_, ev, err := a.RecordSignal(engine.RecordSignal{Kind: sig.kind, Value: sig.value(e.Scores),
				RunID: e.Run, DedupKey: sig.kind + "/" + e.Key}, now, rnd)
			if err != nil {
				return struct{}{}, evs, err
			}
			evs = append(evs, ev...)
		}
		return struct{}{}, evs, nil
	})
	if err != nil {
		return err
	}
	if out.Err != nil {
		s.cfg.Logger.Warn("judge signals refused by the episode; not retried", "reward", e.Reward, "episode", e.Run, "err", out.Err)
	}
	return nil
}

// clipChars returns s's first n characters (runes), and whether it had
// more.
func clipChars(s string, n int) (string, bool) {
	for i := range s {
		if n == 0 {
			return s[:i], true
		}
		n--
	}
	return s, false
}
