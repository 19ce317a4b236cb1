package transport

import (
	"strconv"
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/objective"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/auth"
)

// Handlers of /api/v1 (seed 000) and the workspace administration of §1.

func (h *HTTP) listWorkspaces(c *call) (result, error) {
	return ok(appendItems(nil, h.tenancy.Workspaces(c.p), appendWorkspace))
}

func (h *HTTP) createWorkspace(c *call) (result, error) {
	var name string
	if err := parseBody(c.body, func(b *body) error { name = b.str("name", true); return nil }); err != nil {
		return result{}, err
	}
	ws, err := h.tenancy.CreateWorkspace(c.p, name)
	if err != nil {
		return result{}, err
	}
	return created(appendWorkspace(nil, ws))
}

func (h *HTTP) createKey(c *call) (result, error) {
	var name string
	if err := parseBody(c.body, func(b *body) error { name = b.str("name", true); return nil }); err != nil {
		return result{}, err
	}
	p, secret, err := h.tenancy.CreateKey(c.p, c.ws, name)
	if err != nil {
		return result{}, err
	}
	// The secret is shown once (SPEC §1): an Idempotency-Key replay of this
	// call answers the same record with "key": null.
	return result{status: 201, body: appendKey(nil, p, secret), record: appendKey(nil, p, "")}, nil
}

// appendKey renders a new API key; an empty secret renders as null.
func appendKey(b []byte, p auth.Principal, secret string) []byte {
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, p.KeyID)
	b = jsonw.Key(b, "key")
	b = jsonw.StringOrNull(b, secret)
	b = jsonw.Key(b, "name")
	b = jsonw.String(b, p.Name)
	b = jsonw.Key(b, "workspace_id")
	b = jsonw.String(b, p.Home)
	b = jsonw.Key(b, "profile")
	b = append(b, '{')
	b = jsonw.Key(b, "id")
	b = jsonw.String(b, p.ProfileID)
	b = jsonw.Key(b, "type")
	b = jsonw.String(b, auth.ProfileType)
	b = append(b, '}')
	b = jsonw.Key(b, "created_at")
	b = jsonw.Time(b, p.CreatedAt)
	return append(b, '}')
}

func (h *HTTP) listAgents(c *call) (result, error) {
	agents, err := h.reg.Agents(c.ws)
	if err != nil {
		return result{}, err
	}
	return ok(appendItems(nil, agents, appendAgent))
}

func (h *HTTP) createAgent(c *call) (result, error) {
	cmd := engine.CreateAgent{Workspace: c.ws}
	err := parseBody(c.body, func(b *body) error {
		cmd.Name = b.str("name", true)
		cmd.ExternalID = b.str("external_id", false)
		cmd.Labels = b.labels("labels")
		cmd.SelectionMode = b.str("selection_mode", false)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	return c.write(func(idem *actors.Idempotent) (any, error) { return h.reg.CreateAgent(cmd, idem) },
		func(res any) (result, error) { return created(appendAgent(nil, res.(engine.AgentInfo))) })
}

// agentCall is a call on one agent of the call's workspace.
type agentCall struct {
	*call
	h     *HTTP
	agent engine.AgentInfo
}

func (a agentCall) get() (result, error) { return ok(appendAgent(nil, a.agent)) }

// execute runs cmd on the agent and renders its result with render.
func (a agentCall) execute(cmd engine.Command, render func(res any) (result, error)) (result, error) {
	return a.write(func(idem *actors.Idempotent) (any, error) { return a.h.reg.Execute(a.agent.ID, cmd, idem) }, render)
}

func (a agentCall) query(fn func(ag *engine.Agent, now time.Time) (any, error)) (any, error) {
	return a.h.reg.Query(a.agent.ID, fn)
}

// resolveRun turns a run path segment (an id or external_id:<value>) into a
// run id of this agent; a run of another agent is 404.
func (a agentCall) resolveRun(ref string) (string, error) {
	runID, owner, err := a.h.reg.Run(a.ws, ref)
	if err != nil {
		return "", err
	}
	if owner.ID != a.agent.ID {
		return "", notFound("run", ref)
	}
	return runID, nil
}

func (a agentCall) createRun() (result, error) {
	cmd := engine.CreateRun{ProfileID: a.p.ProfileID}
	err := parseBody(a.body, func(b *body) error {
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
	return a.write(func(idem *actors.Idempotent) (any, error) { return a.h.reg.CreateRun(a.agent, cmd, idem) },
		func(res any) (result, error) { return created(appendCreatedRun(nil, res.(engine.CreatedRun))) })
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

func (a agentCall) getRun(runID string) (result, error) {
	res, err := a.query(func(ag *engine.Agent, _ time.Time) (any, error) { return ag.Run(runID) })
	if err != nil {
		return result{}, err
	}
	return ok(appendRun(nil, res.(engine.Run), true))
}

func (a agentCall) finishRun(runID string) (result, error) {
	cmd := engine.FinishRun{RunID: runID}
	err := parseBody(a.body, func(b *body) error {
		cmd.Succeeded, _ = b.boolean("succeeded", true)
		cmd.FinishedAt = b.time("finished_at")
		return nil
	})
	if err != nil {
		return result{}, err
	}
	return a.execute(cmd, func(res any) (result, error) {
		return ok(appendRun(nil, res.(engine.Run), true))
	})
}

func (a agentCall) claim(runID string) (result, error) {
	cmd := engine.ClaimObject{RunID: runID}
	if err := parseBody(a.body, func(b *body) error { cmd.Object = b.str("object", true); return nil }); err != nil {
		return result{}, err
	}
	return a.execute(cmd, func(res any) (result, error) {
		cr := res.(engine.ClaimResult)
		return result{status: statusFor(cr.Created), body: appendClaim(nil, cr.RunID, cr.Claim)}, nil
	})
}

func (a agentCall) trace(runID string) (result, error) {
	cmd := engine.RegisterTrace{RunID: runID}
	err := parseBody(a.body, func(b *body) error {
		cmd.TraceID = b.str("trace_id", true)
		cmd.TurnID = b.str("turn_id", false)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	return a.execute(cmd, func(res any) (result, error) {
		tr := res.(engine.TraceResult)
		return result{status: statusFor(tr.Created), body: appendTrace(nil, tr.RunID, tr.Trace)}, nil
	})
}

// statusFor is 201 for a call that created something, 200 for a repeat.
func statusFor(created bool) int {
	if created {
		return 201
	}
	return 200
}

func (a agentCall) postSignal() (result, error) {
	cmd, err := decodeSignal(a.body)
	if err != nil {
		return result{}, err
	}
	return a.execute(cmd, func(res any) (result, error) {
		sr := res.(engine.SignalResult)
		return result{status: statusFor(!sr.Duplicate), body: appendSignal(nil, sr.Signal, sr.RunIDs, sr.Duplicate)}, nil
	})
}

// decodeSignal reads a signal body: {kind, value, run_id | session_id |
// object, dedup_key?, occurred_at?}. The engine checks the rest.
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

func (a agentCall) runSignals(runID string) (result, error) {
	type item struct {
		s    engine.Signal
		runs []string
	}
	res, err := a.query(func(ag *engine.Agent, _ time.Time) (any, error) {
		sigs, err := ag.RunSignals(runID)
		if err != nil {
			return nil, err
		}
		items := make([]item, len(sigs))
		for i, s := range sigs {
			items[i] = item{s, ag.SignalRuns(s)}
		}
		return items, nil
	})
	if err != nil {
		return result{}, err
	}
	return ok(appendItems(nil, res.([]item), func(b []byte, it item) []byte {
		return appendSignal(b, it.s, it.runs, false)
	}))
}

func (a agentCall) putObjective() (result, error) {
	var cmd engine.PutObjective
	err := parseBody(a.body, func(b *body) error {
		raw := b.raw("definition")
		if raw == nil {
			b.fail("definition", "is required")
			return nil
		}
		def, err := objective.Parse(raw, "definition")
		if err != nil {
			return err
		}
		cmd.Definition = def
		cmd.Note = b.str("note", false)
		return nil
	})
	if err != nil {
		return result{}, err
	}
	return a.execute(cmd, func(res any) (result, error) {
		return ok(appendObjective(nil, res.(engine.ObjectiveVersion)))
	})
}

func (a agentCall) getObjective(v int) (result, error) {
	res, err := a.query(func(ag *engine.Agent, _ time.Time) (any, error) { return ag.Objective(v) })
	if err != nil {
		return result{}, err
	}
	return ok(appendObjective(nil, res.(engine.ObjectiveVersion)))
}

func (a agentCall) reward(runID string) (result, error) {
	v, err := a.objectiveVersionArg()
	if err != nil {
		return result{}, err
	}
	res, err := a.query(func(ag *engine.Agent, now time.Time) (any, error) { return ag.Reward(runID, v, now) })
	if err != nil {
		return result{}, err
	}
	return ok(res.(objective.Reward).AppendJSON(nil))
}

func (a agentCall) versionRewards(version string) (result, error) {
	v, err := a.objectiveVersionArg()
	if err != nil {
		return result{}, err
	}
	limit := 20
	if s := a.arg("limit"); len(s) > 0 {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return result{}, invalid("limit", "must be an integer from 1 to 1000")
		}
		limit = n
	}
	res, err := a.query(func(ag *engine.Agent, now time.Time) (any, error) {
		return ag.VersionRewards(version, v, limit, now)
	})
	if err != nil {
		return result{}, err
	}
	return ok(res.(objective.Summary).AppendJSON(nil))
}

// objectiveVersionArg reads ?objective_version=; absent means current (-1).
func (a agentCall) objectiveVersionArg() (int, error) {
	s := a.arg("objective_version")
	if len(s) == 0 {
		return -1, nil
	}
	return parseVersion("objective_version", s)
}

func parseVersion(path, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, invalid(path, "must be a non-negative integer, got %q", s)
	}
	return n, nil
}
