package api

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/objective"
)

// Seed 000 and the native routes: agents, runs, signals, objectives and
// rewards (/api/v1).

func (c *call) listAgents() (result, error) {
	agents, err := c.s.reg.Agents(c.ws)
	if err != nil {
		return result{}, err
	}
	return ok(appendItems(nil, agents, appendAgent))
}

func (c *call) createAgent() (result, error) {
	cmd := engine.CreateAgent{Workspace: c.ws}
	err := parseBody(c.req.Body, func(b *body) error {
		cmd.Name = b.str("name", true)
		cmd.ExternalID = b.str("external_id", false)
		cmd.Labels = b.labels("labels")
		cmd.SelectionMode = b.str("selection_mode", false)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	out, err := c.s.reg.CreateAgent(cmd, c.by, c.idem != nil)
	return settle(c, out, err, func(info engine.AgentInfo) (result, error) { return created(appendAgent(answer(), info)) })
}

// agent resolves the request's agent in the call's workspace.
func (c *call) agent() (engine.AgentInfo, error) {
	return c.s.reg.Agent(c.ws, c.req.Target.Agent)
}

// run resolves the request's run (an id or external_id:<value>) in the
// call's workspace, once: a run found is kept for the rest of the call (a
// failed lookup is tried again). With an agent, a run of another agent is
// 404.
func (c *call) run(agent *engine.AgentInfo) (string, engine.AgentInfo, error) {
	ref := c.req.Target.Run
	if !c.runFound {
		runID, owner, err := c.s.reg.Run(c.ws, ref)
		if err != nil {
			return "", engine.AgentInfo{}, err
		}
		c.runFound, c.runID, c.runOwner = true, runID, owner
	}
	if agent != nil && c.runOwner.ID != agent.ID {
		return "", engine.AgentInfo{}, notFound("run", ref)
	}
	return c.runID, c.runOwner, nil
}

// agentRun resolves the request's agent and its run.
func (c *call) agentRun() (engine.AgentInfo, string, error) {
	agent, err := c.agent()
	if err != nil {
		return engine.AgentInfo{}, "", err
	}
	runID, _, err := c.run(&agent)
	return agent, runID, err
}

func (c *call) getAgent() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	return ok(appendAgent(nil, agent))
}

func (c *call) createRun() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	cmd := engine.CreateRun{ProfileID: c.p.ProfileID}
	err = parseBody(c.req.Body, func(b *body) error {
		cmd.Version = versionLabel(b, "version")
		cmd.VariationID = b.str("variation_id", false)
		cmd.SessionID = b.str("session_id", false)
		cmd.ExternalID = b.str("external_id", false)
		cmd.Labels = b.labels("labels")
		return nil
	})
	if err != nil {
		return result{}, err
	}
	out, err := c.s.reg.CreateRun(agent, cmd, c.by, c.idem != nil)
	return settle(c, out, err, func(cr engine.CreatedRun) (result, error) { return created(appendCreatedRun(answer(), cr)) })
}

// versionLabel reads the agent's release label; a JSON number is taken as
// its decimal text, since `"version": 3` is what a user means by "3".
func versionLabel(b *body, key string) string {
	v := b.get(key)
	if v != nil && v.Type() == fastjson.TypeNumber {
		f, _ := b.num(key, false)
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return b.str(key, false)
}

func (c *call) getRun() (result, error) {
	agent, runID, err := c.agentRun()
	if err != nil {
		return result{}, err
	}
	r, err := actors.Read(c.s.reg, agent.ID, c.by, func(a *engine.Agent, _ time.Time) (engine.Run, error) { return a.Run(runID) })
	if err != nil {
		return result{}, err
	}
	return ok(appendRun(nil, r, true))
}

func (c *call) finishRun() (result, error) {
	agent, runID, err := c.agentRun()
	if err != nil {
		return result{}, err
	}
	cmd := engine.FinishRun{RunID: runID}
	err = parseBody(c.req.Body, func(b *body) error {
		cmd.Succeeded, _ = b.boolean("succeeded", true)
		cmd.FinishedAt = b.time("finished_at")
		return nil
	})
	if err != nil {
		return result{}, err
	}
	return write(c, agent.ID, func(a *engine.Agent, now time.Time, rnd *rand.Rand) (engine.Run, []engine.Event, error) {
		return a.FinishRun(cmd, now, rnd)
	}, func(r engine.Run) (result, error) { return ok(appendRun(answer(), r, true)) })
}

func (c *call) claimObject() (result, error) {
	agent, runID, err := c.agentRun()
	if err != nil {
		return result{}, err
	}
	cmd := engine.ClaimObject{RunID: runID}
	if err := parseBody(c.req.Body, func(b *body) error { cmd.Object = b.str("object", true); return nil }); err != nil {
		return result{}, err
	}
	return write(c, agent.ID, func(a *engine.Agent, now time.Time, _ *rand.Rand) (engine.ClaimResult, []engine.Event, error) {
		return a.ClaimObject(cmd, now)
	}, func(cr engine.ClaimResult) (result, error) {
		return result{status: statusFor(cr.Created), body: appendClaim(nil, cr.RunID, cr.Claim)}, nil
	})
}

func (c *call) registerTrace() (result, error) {
	agent, runID, err := c.agentRun()
	if err != nil {
		return result{}, err
	}
	cmd := engine.RegisterTrace{RunID: runID}
	err = parseBody(c.req.Body, func(b *body) error {
		cmd.TraceID = b.str("trace_id", true)
		cmd.TurnID = b.str("turn_id", false)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	return write(c, agent.ID, func(a *engine.Agent, now time.Time, _ *rand.Rand) (engine.TraceResult, []engine.Event, error) {
		return a.RegisterTrace(cmd, now)
	}, func(tr engine.TraceResult) (result, error) {
		return result{status: statusFor(tr.Created), body: appendTrace(nil, tr.RunID, tr.Trace)}, nil
	})
}

func (c *call) recordSignal() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	cmd, err := decodeSignal(c.req.Body)
	if err != nil {
		return result{}, err
	}
	return write(c, agent.ID, func(a *engine.Agent, now time.Time, rnd *rand.Rand) (engine.SignalResult, []engine.Event, error) {
		if ext, ok := strings.CutPrefix(cmd.RunID, externalRef); ok {
			// A run of the agent's, by external id; another agent's is 404.
			r, err := a.RunByExternalID(ext)
			if err != nil {
				return engine.SignalResult{}, nil, notFound("run", cmd.RunID)
			}
			cmd.RunID = r.ID
		}
		return a.RecordSignal(cmd, now, rnd)
	}, func(sr engine.SignalResult) (result, error) {
		return result{status: statusFor(!sr.Duplicate), body: appendSignal(answer(), sr.Signal, sr.RunIDs, sr.Duplicate)}, nil
	})
}

// decodeSignal reads a signal body: {kind, value, run_id | session_id |
// object, dedup_key?, occurred_at?}; run_id may be external_id:<value>.
// The engine checks the rest.
func decodeSignal(raw []byte) (engine.RecordSignal, error) {
	var cmd engine.RecordSignal
	err := parseBody(raw, func(b *body) error {
		cmd.Kind = b.str("kind", true)
		cmd.Value, _ = b.num("value", true)
		cmd.RunID = b.str("run_id", false)
		cmd.SessionID = b.str("session_id", false)
		cmd.Object = b.str("object", false)
		cmd.DedupKey = b.str("dedup_key", false)
		cmd.OccurredAt = b.time("occurred_at")
		return nil
	})
	return cmd, err
}

func (c *call) listRunSignals() (result, error) {
	agent, runID, err := c.agentRun()
	if err != nil {
		return result{}, err
	}
	type item struct {
		s    engine.Signal
		runs []string
	}
	items, err := actors.Read(c.s.reg, agent.ID, c.by, func(a *engine.Agent, _ time.Time) ([]item, error) {
		sigs, err := a.RunSignals(runID)
		if err != nil {
			return nil, err
		}
		items := make([]item, len(sigs))
		for i, s := range sigs {
			items[i] = item{s, a.SignalRuns(s)}
		}
		return items, nil
	})
	if err != nil {
		return result{}, err
	}
	return ok(appendItems(nil, items, func(b []byte, it item) []byte { return appendSignal(b, it.s, it.runs, false) }))
}

func (c *call) putObjective() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	var cmd engine.PutObjective
	err = parseBody(c.req.Body, func(b *body) error {
		def, err := definition(b)
		if err != nil || b.top().err != nil {
			return err
		}
		cmd.Definition = def
		cmd.Note = b.str("note", false)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	return write(c, agent.ID, func(a *engine.Agent, now time.Time, _ *rand.Rand) (engine.ObjectiveVersion, []engine.Event, error) {
		return a.PutObjective(cmd, now)
	}, func(o engine.ObjectiveVersion) (result, error) { return ok(appendObjective(nil, o)) })
}

func (c *call) getObjective() (result, error) { return c.objectiveVersion(-1) }

func (c *call) getObjectiveVersion() (result, error) {
	v, err := parseVersion("objective version", c.req.Target.Version)
	if err != nil {
		return result{}, err
	}
	return c.objectiveVersion(v)
}

func (c *call) objectiveVersion(v int) (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	o, err := actors.Read(c.s.reg, agent.ID, c.by, func(a *engine.Agent, _ time.Time) (engine.ObjectiveVersion, error) {
		return a.Objective(v)
	})
	if err != nil {
		return result{}, err
	}
	return ok(appendObjective(nil, o))
}

func (c *call) getReward() (result, error) {
	agent, runID, err := c.agentRun()
	if err != nil {
		return result{}, err
	}
	v, err := c.objectiveVersionArg()
	if err != nil {
		return result{}, err
	}
	rw, err := actors.Read(c.s.reg, agent.ID, c.by, func(a *engine.Agent, now time.Time) (objective.Reward, error) {
		return a.Reward(runID, v, now)
	})
	if err != nil {
		return result{}, err
	}
	return ok(rw.AppendJSON(answer()))
}

func (c *call) versionRewards() (result, error) {
	agent, err := c.agent()
	if err != nil {
		return result{}, err
	}
	v, err := c.objectiveVersionArg()
	if err != nil {
		return result{}, err
	}
	limit := 20
	if s := c.req.arg("limit"); len(s) > 0 {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return result{}, invalid("limit", "must be an integer from 1 to 1000")
		}
		limit = n
	}
	version := c.req.Target.Version
	// The actor takes the summary's view; its runs are evaluated here, so
	// that the agent serves other requests meanwhile and distinct
	// summaries are computed on as many cores as there are readers.
	var at time.Time
	sum, err := actors.Read(c.s.reg, agent.ID, c.by, func(a *engine.Agent, now time.Time) (*engine.VersionSummary, error) {
		at = now
		return a.VersionSummary(version, v, limit, now)
	})
	if err != nil {
		return result{}, err
	}
	s := sum.At(at)
	return ok(s.AppendJSON(nil))
}

// objectiveVersionArg reads ?objective_version=; absent means current (-1).
func (c *call) objectiveVersionArg() (int, error) {
	s := c.req.arg("objective_version")
	if len(s) == 0 {
		return -1, nil
	}
	return parseVersion("objective_version", s)
}

func parseVersion(path, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, invalid(path, "must be a non-negative integer, got %s", field.Quote(s))
	}
	return n, nil
}

// definition reads a body's required "definition", an objective validated
// as a published one is (field paths under "definition").
func definition(b *body) (objective.Definition, error) {
	v := b.get("definition")
	if v == nil {
		b.fail("definition", "is required")
		return objective.Definition{}, nil
	}
	return objective.ParseValue(v, "definition")
}
