package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Agents and runs are named by id or "external_id:<value>"; path segments
// are escaped.

// Select creates a run of agent, which selects one of its variations.
func (c *Client) Select(ctx context.Context, agent string, req SelectRequest) (*Run, error) {
	out := new(Run)
	return out, c.do(ctx, &call{method: http.MethodPost, path: "/api/v1/agents/" + seg(agent) + "/runs",
		op: "select", agent: agent, in: req, write: true, key: req.IdempotencyKey, out: out})
}

// Finish finishes agent's run, appending run.succeeded.
func (c *Client) Finish(ctx context.Context, agent, run string, req FinishRequest) (*Run, error) {
	out := new(Run)
	return out, c.do(ctx, &call{method: http.MethodPost, path: "/api/v1/agents/" + seg(agent) + "/runs/" + seg(run) + "/finish",
		op: "finish", agent: agent, members: [][2]string{{"run_id", run}},
		in: req, write: true, key: req.IdempotencyKey, out: out})
}

// Signal records a signal of agent.
func (c *Client) Signal(ctx context.Context, agent string, req SignalRequest) (*Signal, error) {
	out := new(Signal)
	return out, c.do(ctx, &call{method: http.MethodPost, path: "/api/v1/agents/" + seg(agent) + "/signals",
		op: "signal", agent: agent, in: req, write: true, key: req.IdempotencyKey, out: out})
}

// Feedback records seed-004 feedback on objective, a run of agent (seed
// 004's objective). NATS addresses the agent; HTTP needs only the run, in
// the client's workspace.
func (c *Client) Feedback(ctx context.Context, agent, objective string, req FeedbackRequest) (*Feedback, error) {
	out := new(Feedback)
	return out, c.do(ctx, &call{method: http.MethodPost,
		path: "/v1/workspaces/" + seg(c.opts.workspace) + "/objectives/" + seg(objective) + "/feedback",
		op:   "feedback", agent: agent, members: [][2]string{{"objectiveId", objective}},
		in: req, write: true, key: req.IdempotencyKey, out: out})
}

// Reward reads run's reward under agent's current objective.
func (c *Client) Reward(ctx context.Context, agent, run string) (*Reward, error) {
	return c.reward(ctx, agent, run, nil, nil)
}

// RewardAt reads run's reward under objective version n.
func (c *Client) RewardAt(ctx context.Context, agent, run string, n int) (*Reward, error) {
	v := strconv.Itoa(n)
	return c.reward(ctx, agent, run, url.Values{"objective_version": {v}}, [][2]string{{"objective_version", v}})
}

func (c *Client) reward(ctx context.Context, agent, run string, q url.Values, members [][2]string) (*Reward, error) {
	out := new(Reward)
	return out, c.do(ctx, &call{method: http.MethodGet, path: "/api/v1/agents/" + seg(agent) + "/runs/" + seg(run) + "/reward",
		query: q, op: "reward", agent: agent, members: append([][2]string{{"run_id", run}}, members...), out: out})
}

// Report posts a seed-001 reward report on job (a run of agent): reporting
// the same scorer and turn again replaces its value. NATS addresses the
// agent; HTTP needs only the job.
func (c *Client) Report(ctx context.Context, agent, job string, req ReportRequest) (*Report, error) {
	out := new(Report)
	return out, c.do(ctx, &call{method: http.MethodPost, path: "/v1/jobs/" + seg(job) + "/rewards",
		op: "report", agent: agent, members: [][2]string{{"run_id", job}},
		in: req, write: true, key: req.IdempotencyKey, out: out})
}

// JudgedReward asks for seed 003's judged reward of an answer. Its Status
// is "pending" while a model judge has not answered (see
// JudgedRewardRequest.Wait and GetJudgedReward).
func (c *Client) JudgedReward(ctx context.Context, req JudgedRewardRequest) (*JudgedReward, error) {
	out := new(JudgedReward)
	return out, c.do(ctx, &call{method: http.MethodPost, path: "/v1/rewards",
		op: "reward", agent: "tasks", in: req, write: true, key: req.IdempotencyKey, wait: req.Wait, out: out})
}

// GetJudgedReward reads a judged reward, waiting up to wait (whole seconds,
// at most 120) for it to be final. HTTP only.
func (c *Client) GetJudgedReward(ctx context.Context, id string, wait time.Duration) (*JudgedReward, error) {
	out := new(JudgedReward)
	return out, c.do(ctx, &call{method: http.MethodGet, path: "/v1/rewards/" + seg(id), wait: wait, out: out})
}

// CreateAgent creates an agent. HTTP only.
func (c *Client) CreateAgent(ctx context.Context, req AgentRequest) (*Agent, error) {
	out := new(Agent)
	return out, c.do(ctx, &call{method: http.MethodPost, path: "/api/v1/agents",
		in: req, write: true, key: req.IdempotencyKey, out: out})
}

// Do calls any HTTP route: in (nil for none) is sent as JSON, a success is
// decoded into out (nil to discard it). A POST or PUT carries an
// Idempotency-Key (WithIdempotencyKey's, or a generated one) and is retried
// under it like the typed writes. HTTP only.
func (c *Client) Do(ctx context.Context, method, path string, in, out any, opts ...CallOption) error {
	cl := &call{method: method, path: path, in: in, out: out,
		write: method == http.MethodPost || method == http.MethodPut}
	for _, o := range opts {
		o(cl)
	}
	return c.do(ctx, cl)
}

// CallOption configures one call of Do.
type CallOption func(*call)

// WithIdempotencyKey makes key a POST's or PUT's Idempotency-Key, on every
// attempt: a repeat of the call under the same key, even from another
// process, is a replay of the first. Other methods take no key.
func WithIdempotencyKey(key string) CallOption {
	return func(cl *call) {
		if cl.write {
			cl.key = key
		}
	}
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }
