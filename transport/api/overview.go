package api

import (
	"strconv"
	"time"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/internal/jsonw"
)

// agentOverview answers an agent at a glance (engine.Overview):
//
//	GET /api/v1/agents/{agent}/overview[?buckets=24&bucket_s=3600&rewards=false]
//	→ {agent_id, seq, objective_version, runs, runs_24h, runs_7d, matured, mean,
//	   feedback_count, versions: [{version, runs}],
//	   selections: {start, bucket_s, items: [{variation_id, name, counts}]}}
//
// buckets is 1–400 (24), bucket_s 60–2592000 (3600). A run without a
// release label counts under version null. rewards=false skips evaluating
// every run's reward: mean is then null and matured 0 (a cheap read of seq
// and the counts, for polling).
func (c *call) agentOverview() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	buckets, err := c.intArg("buckets", 24, 1, 400)
	if err != nil {
		return result{}, err
	}
	bucketS, err := c.intArg("bucket_s", 3600, 60, 30*24*3600)
	if err != nil {
		return result{}, err
	}
	rewards := c.req.arg("rewards") != "false"
	windows := []time.Duration{24 * time.Hour, 7 * 24 * time.Hour}
	o, err := actors.Read(c.s.reg, agent.ID, c.by, func(a *engine.Agent, now time.Time) (engine.Overview, error) {
		return a.Overview(now, windows, buckets, time.Duration(bucketS)*time.Second, rewards), nil
	})
	if err != nil {
		return result{}, err
	}
	b := append([]byte(nil), '{')
	b = jsonw.Key(b, "agent_id")
	b = jsonw.String(b, agent.ID)
	b = jsonw.Key(b, "seq")
	b = jsonw.Int(b, int64(o.Seq))
	b = jsonw.Key(b, "objective_version")
	b = jsonw.Int(b, int64(o.ObjectiveVersion))
	for _, f := range [...]struct {
		key string
		n   int
	}{{"runs", o.Runs}, {"runs_24h", o.RunsSince[0]}, {"runs_7d", o.RunsSince[1]}, {"matured", o.Matured}} {
		b = jsonw.Key(b, f.key)
		b = jsonw.Int(b, int64(f.n))
	}
	b = jsonw.Key(b, "mean")
	b = jsonw.FloatPtr(b, o.Mean)
	b = jsonw.Key(b, "feedback_count")
	b = jsonw.Int(b, int64(o.Feedback))
	b = jsonw.Key(b, "versions")
	b = append(b, '[')
	for i, v := range o.Versions {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = jsonw.Key(b, "version")
		b = jsonw.StringOrNull(b, v.Version)
		b = jsonw.Key(b, "runs")
		b = jsonw.Int(b, int64(v.Runs))
		b = append(b, '}')
	}
	b = append(b, ']')
	b = jsonw.Key(b, "selections")
	b = append(b, '{')
	b = jsonw.Key(b, "start")
	b = jsonw.Time(b, o.Start)
	b = jsonw.Key(b, "bucket_s")
	b = jsonw.Int(b, int64(bucketS))
	b = jsonw.Key(b, "items")
	b = appendSelections(b, o.Selections)
	return ok(append(b, "}}"...))
}

func appendSelections(b []byte, sel []engine.VariationSelections) []byte {
	b = append(b, '[')
	for i, s := range sel {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = jsonw.Key(b, "variation_id")
		b = jsonw.String(b, s.VariationID)
		b = jsonw.Key(b, "name")
		b = jsonw.String(b, s.Name)
		b = jsonw.Key(b, "counts")
		b = jsonw.Ints(b, s.Counts)
		b = append(b, '}')
	}
	return append(b, ']')
}

// intArg reads an integer query argument in [lo, hi]; absent, def.
func (c *call) intArg(name string, def, lo, hi int) (int, error) {
	s := c.req.arg(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, invalid(name, "must be an integer from %d to %d", lo, hi)
	}
	return n, nil
}
