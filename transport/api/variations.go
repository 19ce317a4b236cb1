package api

import (
	"encoding/binary"
	"hash/fnv"
	"math"
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
	}, func(v engine.Variation) (result, error) { return created(appendVariation(nil, agent.ID, v, nil)) })
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
	best := probBest(vs)
	i := 0
	return ok(appendItems(nil, vs, func(b []byte, v engine.Variation) []byte {
		b = appendVariation(b, agent.ID, v, &best[i])
		i++
		return b
	}))
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
	return ok(appendVariation(nil, agent.ID, v, nil))
}

// probBest estimates each variation's probability of being best, outside
// the agent's actor (it is a few thousand draws per variation). The draws
// are seeded from the posteriors, so reads of the same state answer the
// same, as every other read does; a new feedback reseeds them.
func probBest(vs []engine.Variation) []float64 {
	h := fnv.New64a()
	var buf [8]byte
	for _, v := range vs {
		h.Write([]byte(v.ID))
		h.Write(binary.LittleEndian.AppendUint64(buf[:0], math.Float64bits(v.Alpha)))
		h.Write(binary.LittleEndian.AppendUint64(buf[:0], math.Float64bits(v.Beta)))
	}
	seed := h.Sum64()
	return engine.ProbBest(vs, engine.ProbBestDraws, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
}

func (c *call) variation(agentID string) (engine.Variation, error) {
	varID := c.req.Target.Variation
	return actors.Read(c.s.reg, agentID, c.by, func(a *engine.Agent, _ time.Time) (engine.Variation, error) {
		return a.Variation(varID)
	})
}

// credibleMass is the mass of the posterior interval variations report.
const credibleMass = 0.95

// appendVariation renders {id, agent_id, name, config, created_at,
// info: {score, feedback_count, alpha, beta, mean, interval, prob_best?}}:
// mean is score, the posterior mean; interval the 95% equal-tailed
// credible interval; prob_best, the probability of being best among the
// agent's variations (probBest), only in the listing, the one read of
// them all (best nil: none).
func appendVariation(b []byte, agentID string, v engine.Variation, best *float64) []byte {
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
	b = jsonw.Key(b, "mean")
	b = jsonw.Float(b, v.Score())
	iv := v.Interval(credibleMass)
	b = jsonw.Key(b, "interval")
	b = append(b, '[')
	b = jsonw.Float(b, iv[0])
	b = append(b, ',')
	b = jsonw.Float(b, iv[1])
	b = append(b, ']')
	if best != nil {
		b = jsonw.Key(b, "prob_best")
		b = jsonw.Float(b, *best)
	}
	return append(b, "}}"...)
}
