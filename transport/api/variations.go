package api

import (
	"math/rand/v2"
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/internal/jsonw"
)

// Native variation routes: POST/GET /api/v1/agents/{agent}/variations and
// GET .../variations/{variation}.

func (c *call) createVariation() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	var cmd engine.CreateVariation
	err = parseBody(c.req.Body, func(b *body) error {
		cmd.Name = b.str("name", true)
		if v := b.get("config"); v != nil {
			if v.Type() != fastjson.TypeObject {
				b.fail("config", "must be an object")
				return nil
			}
			cmd.Config = b.json("config")
		}
		return nil
	})
	if err != nil {
		return result{}, err
	}
	return write(c, agent.ID, func(a *engine.Agent, now time.Time, rnd *rand.Rand) (engine.Variation, []engine.Event, error) {
		return a.CreateVariation(cmd, now, rnd)
	}, func(v engine.Variation) (result, error) { return created(appendVariation(nil, agent.ID, v)) })
}

func (c *call) listVariations() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	vs, err := actors.Read(c.s.reg, agent.ID, c.by, func(a *engine.Agent, _ time.Time) ([]engine.Variation, error) {
		return a.Variations(), nil
	})
	if err != nil {
		return result{}, err
	}
	return ok(appendItems(nil, vs, func(b []byte, v engine.Variation) []byte { return appendVariation(b, agent.ID, v) }))
}

func (c *call) getVariation() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	v, err := c.variation(agent.ID)
	if err != nil {
		return result{}, err
	}
	return ok(appendVariation(nil, agent.ID, v))
}

func (c *call) variation(agentID string) (engine.Variation, error) {
	varID := c.req.Target.Variation
	return actors.Read(c.s.reg, agentID, c.by, func(a *engine.Agent, _ time.Time) (engine.Variation, error) {
		return a.Variation(varID)
	})
}

// appendVariation renders {id, agent_id, name, config, created_at,
// info: {score, feedback_count, alpha, beta}}.
func appendVariation(b []byte, agentID string, v engine.Variation) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, v.ID)
	b = jsonw.Key(b, "agent_id")
	b = jsonw.String(b, agentID)
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, v.Name)
	b = jsonw.Key(b, "config")
	if v.Config == "" {
		b = append(b, "null"...)
	} else {
		b = jsonw.Raw(b, v.Config)
	}
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, v.CreatedAt)
	b = jsonw.Key(b, "info")
	b = append(b, '{')
	b = jsonw.Key(b, "score")
	b = jsonw.Float(b, v.Score())
	b = jsonw.Key(b, "feedback_count")
	b = jsonw.Int(b, int64(v.FeedbackCount))
	b = jsonw.Key(b, "alpha")
	b = jsonw.Float(b, v.Alpha)
	b = jsonw.Key(b, "beta")
	b = jsonw.Float(b, v.Beta)
	return append(b, "}}"...)
}
