package api

import (
	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/judging"
)

// The reward distribution of a task's judged rewards, per task version,
// computed on read:
//
//	GET /v1/tasks/{id}/rewards/summary[?judge_version=jv]
//	→ {"task": id, "items": [{"task_version", "seq", "rewards", "scored", "pending", "failed",
//	                          "mean", "histogram": {"bounds": [0, 1], "counts": [20 ints]},
//	                          "flags": {"<flag>": n, …}}]}
//
// Every version of the task is listed, oldest first, with zeros when it has
// no reward. The figures are judge.Distribution's: counts by status (scored
// and failed are final), the mean, bins and flags of the scored rewards.
// judge_version names a judge version of the workspace (else 404) and
// counts only its rewards. An unknown task is 404; like every seed-003
// read, only the key's workspace is counted.
//
// The rewards are read from the task's index (judging.TaskRewards), one
// prefix scan of that task's entries in the workspace: the cost grows with
// the task's rewards only, not with other tasks' or workspaces'.
func (c *call) taskRewardSummary() (result, error) {
	task := c.req.Target.Task
	versions, jv, err := c.taskAndJudgeVersion()
	if err != nil {
		return result{}, err
	}
	rewards, err := c.s.judging.TaskRewards(c.ws, task)
	if err != nil {
		return result{}, err
	}
	dist := make(map[string]*judge.Distribution, len(versions))
	for _, tv := range versions {
		dist[tv.Version] = &judge.Distribution{}
	}
	for _, r := range rewards {
		d := dist[r.TaskVersion]
		if d == nil || (jv != "" && r.JudgeVersion != jv) {
			continue
		}
		switch r.Status {
		case judging.StatusScored:
			d.AddScored(r.Reward, r.Flags)
		case judging.StatusPending:
			d.Pending++
		case judging.StatusFailed:
			d.Failed++
		}
	}

	b := append([]byte(nil), '{')
	b = jsonw.Key(b, "task")
	b = jsonw.String(b, task)
	b = jsonw.Key(b, "items")
	b = append(b, '[')
	for i, tv := range versions {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendDistribution(b, tv, dist[tv.Version])
	}
	return ok(append(b, "]}"...))
}

// appendDistribution renders one task version's distribution.
func appendDistribution(b []byte, tv judging.TaskVersion, d *judge.Distribution) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "task_version")
	b = jsonw.String(b, tv.Version)
	b = jsonw.Key(b, "seq")
	b = jsonw.Int(b, int64(tv.Seq))
	for _, n := range []struct {
		key string
		n   int
	}{{"rewards", d.Rewards()}, {"scored", d.Scored}, {"pending", d.Pending}, {"failed", d.Failed}} {
		b = jsonw.Key(b, n.key)
		b = jsonw.Int(b, int64(n.n))
	}
	b = jsonw.Key(b, "mean")
	b = jsonw.FloatPtr(b, d.Mean)
	b = jsonw.Key(b, "histogram")
	b = append(b, '{')
	b = jsonw.Key(b, "bounds")
	b = append(b, "[0,1]"...)
	b = jsonw.Key(b, "counts")
	b = jsonw.Ints(b, d.Histogram[:])
	b = append(b, '}')
	b = jsonw.Key(b, "flags")
	b = append(b, '{')
	for _, f := range d.FlagNames() {
		b = jsonw.Key(b, f)
		b = jsonw.Int(b, int64(d.Flags[f]))
	}
	return append(b, "}}"...)
}
