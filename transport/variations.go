package transport

import (
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/internal/jsonw"
)

// Native variation routes: POST/GET /api/v1/agents/{agent}/variations and
// GET .../variations/{variation}.

func (a agentCall) createVariation() (result, error) {
	var cmd engine.CreateVariation
	err := parseBody(a.body, func(b *body) error {
		cmd.Name = b.str("name", true)
		if v := b.get("config"); v != nil {
			if v.Type() != fastjson.TypeObject {
				b.fail("config", "must be an object")
				return nil
			}
			cmd.Config = string(v.MarshalTo(nil))
		}
		return nil
	})
	if err != nil {
		return result{}, err
	}
	return a.execute(cmd, func(res any) (result, error) {
		return created(appendVariation(nil, a.agent.ID, res.(engine.Variation)))
	})
}

func (a agentCall) listVariations() (result, error) {
	res, err := a.query(func(ag *engine.Agent, _ time.Time) (any, error) { return ag.Variations(), nil })
	if err != nil {
		return result{}, err
	}
	return ok(appendItems(nil, res.([]engine.Variation), func(b []byte, v engine.Variation) []byte {
		return appendVariation(b, a.agent.ID, v)
	}))
}

func (a agentCall) getVariation(varID string) (result, error) {
	res, err := a.query(func(ag *engine.Agent, _ time.Time) (any, error) { return ag.Variation(varID) })
	if err != nil {
		return result{}, err
	}
	return ok(appendVariation(nil, a.agent.ID, res.(engine.Variation)))
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
		b = append(b, v.Config...)
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
