package api

import (
	"fmt"
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/actors"
	"github.com/plaudit/plaudit/engine"
	"github.com/plaudit/plaudit/engine/judge"
	"github.com/plaudit/plaudit/internal/jsonw"
	"github.com/plaudit/plaudit/transport/judging"
	"github.com/plaudit/plaudit/transport/tenancy"
)

// Operations a node asks of the node serving another agent, in a cluster:
// the parts of a cross-agent operation (a judged reward's episode, a
// calibration's reviews) that need that agent's actor. No door routes to
// them: they reach a service from itself, forwarded to the agent's node.
const (
	// JudgeSignals appends a scored reward's judge.* signals to its
	// episode: {"reward", "episode", "scores"}.
	JudgeSignals Op = "judge_signals"
	// ReviewScores reads the mean standing review of some runs of one
	// agent: {"runs": [...]} → {"<run id>": mean, ...}.
	ReviewScores Op = "review_scores"
	// RunDurable answers once a run of the agent, and every write its
	// agent took before, is durable: {"run"} → {}.
	RunDurable Op = "run_durable"
)

// servedElsewhere reports whether another node of the cluster serves
// agentID now (or may: it is between owners).
func (s *Service) servedElsewhere(agentID string) bool {
	r := s.cfg.Router
	return r != nil && !r.Local(agentID)
}

// onAgentsNode runs op on the node serving agentID, as an internal request
// of workspace ws, and returns its answer's body.
func (s *Service) onAgentsNode(ws, agentID string, op Op, body []byte, by time.Time) ([]byte, error) {
	resp := s.handle(&Request{Op: op, Principal: tenancy.Principal{KeyID: "internal", Home: ws},
		Target: Target{Agent: agentID}, Body: body, Deadline: by, RequestID: s.RequestID()})
	switch {
	case resp.Status == 200:
		return resp.Body, nil
	case resp.Status == 404:
		return nil, fmt.Errorf("%s on agent %s's node: %s: %w", op, agentID, resp.Message, engine.ErrNotFound)
	case resp.Status == 503:
		return nil, fmt.Errorf("%s on agent %s's node: %s: %w", op, agentID, resp.Message, actors.ErrUnavailable)
	}
	return nil, fmt.Errorf("%s on agent %s's node: status %d: %s", op, agentID, resp.Status, resp.Message)
}

// appendJudgeSignals appends a reward's judge.* signals to one episode, on
// the node serving the episode's agent.
func (s *Service) appendJudgeSignals(e judging.EpisodeSignals) error {
	if !s.servedElsewhere(e.Agent) {
		return s.appendJudgeSignalsHere(e)
	}
	b := append([]byte(nil), '{')
	b = jsonw.Key(b, "reward")
	b = jsonw.String(b, e.Reward)
	b = jsonw.Key(b, "key")
	b = jsonw.String(b, e.Key)
	b = jsonw.Key(b, "episode")
	b = jsonw.String(b, e.Run)
	b = jsonw.Key(b, "scores")
	b = e.Scores.AppendJSON(b)
	b = append(b, '}')
	_, err := s.onAgentsNode(e.Workspace, e.Agent, JudgeSignals, b, time.Now().Add(s.cfg.RequestDeadline))
	return err
}

// judgeSignals serves JudgeSignals on the episode agent's node. A body
// without "key" (from a node of an older version) keys them by the reward.
func (c *call) judgeSignals() (result, error) {
	v, err := fastjson.ParseBytes(c.req.Body)
	if err != nil {
		return result{}, fmt.Errorf("judge signals: %w", err)
	}
	sc := v.Get("scores")
	e := judging.EpisodeSignals{Workspace: c.ws, Reward: string(v.GetStringBytes("reward")), Key: string(v.GetStringBytes("key")),
		Run: string(v.GetStringBytes("episode")), Agent: c.req.Target.Agent, Scores: judge.Scores{Reward: sc.GetFloat64("reward"),
			Partial: sc.GetFloat64("partial"), MustPass: sc.GetFloat64("must_pass"), AllPass: sc.GetFloat64("all_pass")}}
	if e.Key == "" {
		e.Key = e.Reward
	}
	if err := c.s.appendJudgeSignalsHere(e); err != nil {
		return result{}, err
	}
	return ok([]byte("{}"))
}

// reviewScores reads the mean standing review of runIDs of agentID, on the
// node serving it.
func (s *Service) reviewScores(ws, agentID string, runIDs []string, by time.Time) (map[string]float64, error) {
	if !s.servedElsewhere(agentID) {
		return s.reviewScoresHere(agentID, runIDs, by)
	}
	b := jsonw.Strings(append([]byte(nil), `{"runs":`...), runIDs)
	body, err := s.onAgentsNode(ws, agentID, ReviewScores, append(b, '}'), by)
	if err != nil {
		return nil, err
	}
	v, err := fastjson.ParseBytes(body)
	if err != nil {
		return nil, fmt.Errorf("review scores of agent %s: %w", agentID, err)
	}
	o, err := v.Object()
	if err != nil {
		return nil, fmt.Errorf("review scores of agent %s: %w", agentID, err)
	}
	out := map[string]float64{}
	o.Visit(func(k []byte, v *fastjson.Value) { out[string(k)] = v.GetFloat64() })
	return out, nil
}

// reviewScores serves ReviewScores on the agent's node.
func (c *call) reviewScores() (result, error) {
	v, err := fastjson.ParseBytes(c.req.Body)
	if err != nil {
		return result{}, fmt.Errorf("review scores: %w", err)
	}
	var runIDs []string
	for _, r := range v.GetArray("runs") {
		runIDs = append(runIDs, string(r.GetStringBytes()))
	}
	vals, err := c.s.reviewScoresHere(c.req.Target.Agent, runIDs, c.by)
	if err != nil {
		return result{}, err
	}
	b := append([]byte(nil), '{')
	first := true
	for id, val := range vals {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsonw.Key(b, id)
		b = jsonw.Float(b, val)
	}
	return ok(append(b, '}'))
}

// runDurable returns once run runID of agentID is durable, on the node
// serving the agent: a write stored outside the agent that refers to the
// run (a judged reward's episode) waits for it, since a run is answered
// before it is durable (see actors.Registry.CreateRun) and a crash may
// lose it until then.
func (s *Service) runDurable(ws, agentID, runID string, by time.Time) error {
	if !s.servedElsewhere(agentID) {
		return s.runDurableHere(agentID, runID, by)
	}
	b := jsonw.String(append([]byte(nil), `{"run":`...), runID)
	_, err := s.onAgentsNode(ws, agentID, RunDurable, append(b, '}'), by)
	return err
}

// runDurableHere is runDurable on the agent's node: a read of the run in
// its actor, which is answered once every write before it is durable.
func (s *Service) runDurableHere(agentID, runID string, by time.Time) error {
	_, err := actors.Read(s.reg, agentID, by, func(a *engine.Agent, _ time.Time) (struct{}, error) {
		_, err := a.Run(runID)
		return struct{}{}, err
	})
	return err
}

// runDurable serves RunDurable on the agent's node.
func (c *call) runDurable() (result, error) {
	v, err := fastjson.ParseBytes(c.req.Body)
	if err != nil {
		return result{}, fmt.Errorf("run durable: %w", err)
	}
	if err := c.s.runDurableHere(c.req.Target.Agent, string(v.GetStringBytes("run")), c.by); err != nil {
		return result{}, err
	}
	return ok([]byte("{}"))
}
