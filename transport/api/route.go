package api

import (
	"errors"
	"fmt"
	"time"

	"github.com/valyala/fastjson"

	"github.com/plaudit/plaudit/persist"
)

// Router places requests in a cluster, where each agent is served by the
// node that owns its partition. A request is placed by its agent's id, or
// by another placement key (a judged reward's task, an Idempotency-Key;
// see placement) that hashes into a partition the same way; the methods
// take either as agentID.
type Router interface {
	// Local reports whether this node serves agentID's partition now.
	Local(agentID string) bool
	// Forward hands req to the node serving agentID and returns its
	// answer. The node it reaches handles req as its own door would, with
	// Forwarded set; it does not forward it again. It returns ErrNoOwner
	// when no node serves the agent now (its partition is between owners).
	Forward(req *Request, agentID string) (Response, error)
}

// ErrNotServed answers a forwarded request on a node that does not serve
// its agent (Response.NotServed): nothing was done.
var ErrNotServed = fmt.Errorf("forwarded to a node that does not serve it: %w", persist.ErrMoved)

// ErrNoOwner is a Router's answer for an agent no node serves at the
// moment: its partition is being handed over, or its owner stopped.
var ErrNoOwner = errors.New("no node serves the agent now")

// QueryArgs names every query argument an operation reads: a forwarded
// request carries these (Request.Args).
var QueryArgs = []string{"agentVariationId", "buckets", "bucket_s", "createdAfter", "createdBefore", "cursor",
	"includeInfo", "judge_version", "labels", "limit", "objective_version", "query", "rewards", "sentiment"}

// Args returns the request's query arguments that are set, by name.
func (r *Request) Args() map[string]string {
	args := map[string]string{}
	for _, name := range QueryArgs {
		if v := r.arg(name); v != "" {
			args[name] = v
		}
	}
	return args
}

// routeAgent is the agent a request acts on, resolved by its id or
// external id, or through its run: what places it in a cluster. A request
// that names neither, or one that does not resolve (its handler answers
// why), is served where it arrived.
func (c *call) routeAgent() string {
	switch {
	case c.req.Target.Agent != "":
		if info, err := c.agent(); err == nil {
			return info.ID
		}
	case c.req.Target.Run != "":
		if _, info, err := c.run(nil); err == nil {
			return info.ID
		}
	case c.req.Op == CreateObjective:
		// Seed 004 names the agent in the body: spec.agentId.
		v, err := fastjson.ParseBytes(c.req.Body)
		if err != nil {
			return ""
		}
		if info, err := c.s.reg.Agent(c.ws, string(v.GetStringBytes("spec", "agentId"))); err == nil {
			return info.ID
		}
	}
	return ""
}

// placement is what places the request in a cluster, and how errors name
// it: its agent; or, for a write that names no agent (a workspace, a key)
// but carries an Idempotency-Key, the key, so that one node decides it
// (the key's reservation is a node's own); or nothing: served where it
// arrived.
func (c *call) placement(write bool) (key, name string) {
	if agentID := c.routeAgent(); agentID != "" {
		return agentID, "agent " + agentID
	}
	if task := c.judgedRewardTask(); task != "" {
		return taskPlacement(c.ws, task), "task " + task
	}
	if write && c.req.IdempotencyKey != nil {
		return "idempotency/" + c.ws + "/" + string(c.req.IdempotencyKey), "Idempotency-Key"
	}
	return "", ""
}

// taskPlacement places a task's judged rewards: the node serving it
// creates them (its locks decide a task's pin and an answer's first
// reward) and asks their judges.
func taskPlacement(ws, task string) string { return "task/" + ws + "/" + task }

// judgedRewardTask is the task of a judged reward the request creates or
// reads ("" for other requests, or when the body or the reward does not
// say: the handler answers why).
func (c *call) judgedRewardTask() string {
	switch c.req.Op {
	case CreateJudgedReward:
		v, err := fastjson.ParseBytes(c.req.Body)
		if err != nil {
			return ""
		}
		return string(v.GetStringBytes("task", "id"))
	case GetJudgedReward:
		r, err := c.s.judging.Reward(c.ws, c.req.Target.Reward)
		if err != nil {
			return ""
		}
		return r.TaskID
	}
	return ""
}

// route forwards the request to the node serving its placement, when that
// is not this node; ok is false when this node serves it.
func (c *call) route(write bool) (resp Response, ok bool, err error) {
	r := c.s.cfg.Router
	if r == nil {
		return Response{}, false, nil
	}
	agentID, name := c.placement(write)
	if agentID == "" {
		return Response{}, false, nil
	}
	// During a handover no node serves the agent for a moment: wait for
	// one, here or there, until the request's deadline (--request-deadline,
	// 5s), then answer 503 with a Retry-After.
	until := c.by
	for {
		if r.Local(agentID) {
			return Response{}, false, nil
		}
		if c.req.Forwarded {
			// Forwarded here, but not served here: this node is still
			// taking the agent's partition, or it moved on meanwhile. The
			// sender is told at once, and sends it again to the owner it
			// sees then: held here, the request would wait for a take that
			// may fail, and the sender, seeing the partition go elsewhere,
			// could no longer tell whether it was done.
			return Response{}, false, fmt.Errorf("%s: %w", name, ErrNotServed)
		}
		resp, err = r.Forward(c.req, agentID)
		if errors.Is(err, ErrNoOwner) && time.Now().Before(until) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			return Response{}, false, fmt.Errorf("%s: forwarding to its node: %v: %w", name, err, persist.ErrMoved)
		}
		return resp, true, nil
	}
}
