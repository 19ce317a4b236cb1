package api

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/judging"
)

// Calibration (seed 001: "reviews also calibrate an evaluation's model
// judges"): how the judged rewards of a task agree with the human reviews
// of the same jobs, computed on read.
//
//	GET /v1/tasks/{id}/calibration[?judge_version=jv]
//	→ {"task": id, "items": [{"task_version", "judge_version", "pairs", "agreement",
//	                          "kappa", "mae", "confusion": {"tp", "tn", "fp", "fn"}}]}
//
// A pair is a job (a run of the workspace) with both:
//   - a scored judged reward of the task whose episode_id is that run; of
//     several under the same task version and judge version, the latest
//     scored one (judging.CalibrationRewards). Its value is scores.reward.
//   - at least one standing seed-001 report of kind "review" on the run
//     (whatever its scorer; turns included). Its value is the unweighted
//     mean of the values of the run's standing review reports, so a job
//     reviewed on several turns counts once.
//
// Pairs are grouped by (task version, judge version), the same job in as
// many groups as it has rewards in; only groups with at least one pair are
// listed, task versions oldest first, then judge versions j1, j2, …. The
// figures are judge.Calibrate's (threshold 0.5 on both sides, κ null when
// undefined). An episode whose run is gone counts in no pair. judge_version
// names a judge version of the workspace (else 404) and keeps only its
// groups; absent, every judge version is listed. An unknown task is 404.
func (c *call) taskCalibration() (result, error) {
	task := c.req.Target.Task
	versions, jv, err := c.taskAndJudgeVersion()
	if err != nil {
		return result{}, err
	}
	rewards, err := c.s.judging.CalibrationRewards(c.ws, task, jv)
	if err != nil {
		return result{}, err
	}
	reviews, err := c.reviewValues(rewards)
	if err != nil {
		return result{}, err
	}

	type group struct{ tv, jv string }
	pairs := map[group][]judge.CalibrationPair{}
	for _, r := range rewards {
		if v, ok := reviews[r.EpisodeID]; ok {
			g := group{r.TaskVersion, r.JudgeVersion}
			pairs[g] = append(pairs[g], judge.CalibrationPair{Reward: r.Scores.Reward, Review: v})
		}
	}
	seq := map[string]int{}
	for _, tv := range versions {
		seq[tv.Version] = tv.Seq
	}
	groups := slices.Collect(maps.Keys(pairs))
	slices.SortFunc(groups, func(a, b group) int {
		return cmp.Or(cmp.Compare(seq[a.tv], seq[b.tv]), strings.Compare(a.tv, b.tv),
			cmp.Compare(len(a.jv), len(b.jv)), strings.Compare(a.jv, b.jv))
	})

	b := append([]byte(nil), '{')
	b = jsonw.Key(b, "task")
	b = jsonw.String(b, task)
	b = jsonw.Key(b, "items")
	b = append(b, '[')
	for i, g := range groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCalibration(b, g.tv, g.jv, judge.Calibrate(pairs[g]))
	}
	return ok(append(b, "]}"...))
}

// reviewValues reads the review value of each episode of rewards that has
// one: the mean of its run's standing review reports. Episodes are resolved
// in the workspace (a run that is gone is left out) and read one agent at a
// time.
func (c *call) reviewValues(rewards []judging.Reward) (map[string]float64, error) {
	runs := map[string][]string{} // agent → its episode runs
	seen := map[string]bool{}
	for _, r := range rewards {
		if seen[r.EpisodeID] {
			continue
		}
		seen[r.EpisodeID] = true
		runID, agent, err := c.s.reg.Run(c.ws, r.EpisodeID)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		runs[agent.ID] = append(runs[agent.ID], runID)
	}
	out := map[string]float64{}
	for agentID, ids := range runs {
		vals, err := c.s.reviewScores(c.ws, agentID, ids, c.by)
		if err != nil {
			return nil, err
		}
		for runID, v := range vals {
			out[runID] = v
		}
	}
	return out, nil
}

// reviewScoresHere reads, on the node serving agentID, the mean standing
// review of each of its runs that has one.
func (s *Service) reviewScoresHere(agentID string, runIDs []string, by time.Time) (map[string]float64, error) {
	return actors.Read(s.reg, agentID, by, func(a *engine.Agent, _ time.Time) (map[string]float64, error) {
		vals := map[string]float64{}
		for _, runID := range runIDs {
			reps, err := a.Reports(runID)
			if errors.Is(err, engine.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			var sum float64
			n := 0
			for _, rep := range reps {
				if rep.Kind == engine.ReportReview && rep.Value != nil {
					sum += *rep.Value
					n++
				}
			}
			if n > 0 {
				vals[runID] = sum / float64(n)
			}
		}
		return vals, nil
	})
}

// appendCalibration renders one group of pairs.
func appendCalibration(b []byte, tv, jv string, cal judge.Calibration) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "task_version")
	b = jsonw.String(b, tv)
	b = jsonw.Key(b, "judge_version")
	b = jsonw.String(b, jv)
	b = jsonw.Key(b, "pairs")
	b = jsonw.Int(b, int64(cal.Pairs))
	b = jsonw.Key(b, "agreement")
	b = jsonw.Float(b, cal.Agreement)
	b = jsonw.Key(b, "kappa")
	b = jsonw.FloatPtr(b, cal.Kappa)
	b = jsonw.Key(b, "mae")
	b = jsonw.Float(b, cal.MAE)
	b = jsonw.Key(b, "confusion")
	b = append(b, '{')
	b = jsonw.Key(b, "tp")
	b = jsonw.Int(b, int64(cal.Confusion.TP))
	b = jsonw.Key(b, "tn")
	b = jsonw.Int(b, int64(cal.Confusion.TN))
	b = jsonw.Key(b, "fp")
	b = jsonw.Int(b, int64(cal.Confusion.FP))
	b = jsonw.Key(b, "fn")
	b = jsonw.Int(b, int64(cal.Confusion.FN))
	return append(b, "}}"...)
}

// taskAndJudgeVersion resolves what a task's reads (calibration, reward
// summary) are about: the task's versions, oldest first (an unknown task is
// 404), and the judge_version filter, if any (an unknown one is 404).
func (c *call) taskAndJudgeVersion() ([]judging.TaskVersion, string, error) {
	task := c.req.Target.Task
	versions, err := c.s.judging.TaskVersions(c.ws, task)
	if err != nil {
		return nil, "", err
	}
	if len(versions) == 0 {
		return nil, "", notFound("task", task)
	}
	jv := c.req.arg("judge_version")
	if jv != "" {
		if _, err := c.s.judging.JudgeVersion(c.ws, jv); err != nil {
			return nil, "", err
		}
	}
	return versions, jv, nil
}
