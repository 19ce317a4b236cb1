package api

import (
	"time"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/internal/jsonw"
)

// POST /api/v1/agents/{agent}/objective/preview {definition, version?,
// limit?}: a draft objective tried on the agent's history, nothing written.

func (c *call) previewObjective() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	var cmd engine.PreviewObjective
	err = parseBody(c.req.Body, func(b *body) error {
		def, err := definition(b)
		if err != nil || b.top().err != nil {
			return err
		}
		cmd.Definition = def
		if b.get("version") != nil {
			label := versionLabel(b, "version")
			cmd.Version = &label
		}
		if n, ok := b.num("limit", false); ok {
			if n != float64(int(n)) || n < 1 || n > 1000 {
				b.fail("limit", "must be an integer from 1 to 1000")
				return nil
			}
			cmd.Limit = int(n)
		}
		return nil
	})
	if err != nil {
		return result{}, err
	}
	p, err := actors.ReadSteps(c.s.reg, agent.ID, c.by, func(a *engine.Agent, now time.Time) (previewSteps, error) {
		p, err := a.StartPreview(cmd, now)
		return previewSteps{p}, err
	})
	if err != nil {
		return result{}, err
	}
	return ok(appendPreview(nil, cmd, p.Result()))
}

// previewSteps runs an engine.Preview as a read in steps of the agent's
// actor, each holding it about 2 ms (engine.PreviewStepBudget).
type previewSteps struct{ *engine.Preview }

func (p previewSteps) Step() bool { return p.Preview.Step(engine.PreviewStepBudget) }

// appendPreview renders {version, definition, seq, evaluated_at, current,
// draft, changed, moved: [{run_id, matured, current, draft, delta,
// current_status, draft_status}]}.
func appendPreview(b []byte, cmd engine.PreviewObjective, res engine.PreviewResult) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "version")
	if cmd.Version == nil {
		b = append(b, "null"...)
	} else {
		b = jsonw.String(b, *cmd.Version)
	}
	b = jsonw.Key(b, "definition")
	b = cmd.Definition.AppendJSON(b)
	b = jsonw.Key(b, "seq")
	b = jsonw.Int(b, int64(res.Seq))
	b = jsonw.Key(b, "evaluated_at")
	b = jsonw.Time(b, res.At)
	b = jsonw.Key(b, "current")
	b = res.Current.AppendJSON(b)
	b = jsonw.Key(b, "draft")
	b = res.Draft.AppendJSON(b)
	b = jsonw.Key(b, "changed")
	b = jsonw.Int(b, int64(res.Changed))
	b = jsonw.Key(b, "moved")
	b = append(b, '[')
	for i, m := range res.Moved {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = jsonw.Key(b, "run_id")
		b = jsonw.String(b, m.RunID)
		b = jsonw.Key(b, "matured")
		b = jsonw.Bool(b, m.Matured)
		b = jsonw.Key(b, "current")
		b = jsonw.Float(b, m.Current)
		b = jsonw.Key(b, "draft")
		b = jsonw.Float(b, m.Draft)
		b = jsonw.Key(b, "delta")
		b = jsonw.Float(b, m.Delta())
		b = jsonw.Key(b, "current_status")
		b = jsonw.String(b, string(m.CurrentStatus))
		b = jsonw.Key(b, "draft_status")
		b = jsonw.String(b, string(m.DraftStatus))
		b = append(b, '}')
	}
	return append(b, "]}"...)
}
