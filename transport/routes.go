package transport

import (
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/plaudit/plaudit/transport/auth"
)

// route dispatches by path segments. Paths without a workspace act in the
// key's home workspace; /v1/workspaces/{ws}/... act in {ws} if the key may.
func (h *HTTP) route(c *call, method string, seg []string) (result, error) {
	switch {
	case len(seg) >= 2 && seg[0] == "api" && seg[1] == "v1":
		return h.routeNative(c, method, seg[2:])
	case len(seg) >= 2 && seg[0] == "v1" && seg[1] == "workspaces":
		return h.routeWorkspaces(c, method, seg[2:])
	case len(seg) >= 2 && seg[0] == "v1" && seg[1] == "jobs":
		return h.routeJobs(c, method, seg[2:])
	}
	return result{}, fmt.Errorf("%s %s: %w", method, c.path, ErrRouteNotFound)
}

// endpoint binds methods to handlers for one path shape.
type endpoint map[string]func() (result, error)

func (e endpoint) serve(method string) (result, error) {
	if fn := e[method]; fn != nil {
		return fn()
	}
	return result{}, fmt.Errorf("%s: %w", method, ErrMethodNotAllowed)
}

func (h *HTTP) routeWorkspaces(c *call, method string, seg []string) (result, error) {
	switch {
	case len(seg) == 0:
		return endpoint{
			fasthttp.MethodGet:  func() (result, error) { return h.listWorkspaces(c) },
			fasthttp.MethodPost: func() (result, error) { return h.createWorkspace(c) },
		}.serve(method)
	case len(seg) == 2 && seg[1] == "api-keys":
		if err := h.enterWorkspace(c, seg[0]); err != nil {
			return result{}, err
		}
		return endpoint{fasthttp.MethodPost: func() (result, error) { return h.createKey(c) }}.serve(method)
	case len(seg) >= 2:
		if err := h.enterWorkspace(c, seg[0]); err != nil {
			return result{}, err
		}
		return h.routeSeed004(c, method, seg[1:])
	}
	return result{}, fmt.Errorf("%s %s: %w", method, c.path, ErrRouteNotFound)
}

func (h *HTTP) routeNative(c *call, method string, seg []string) (result, error) {
	if len(seg) == 0 || seg[0] != "agents" {
		return result{}, fmt.Errorf("%s %s: %w", method, c.path, ErrRouteNotFound)
	}
	if len(seg) == 1 {
		return endpoint{
			fasthttp.MethodGet:  func() (result, error) { return h.listAgents(c) },
			fasthttp.MethodPost: func() (result, error) { return h.createAgent(c) },
		}.serve(method)
	}
	agent, err := h.reg.Agent(c.ws, seg[1])
	if err != nil {
		return result{}, err
	}
	a := agentCall{call: c, h: h, agent: agent}
	rest := seg[2:]
	switch {
	case len(rest) == 0:
		return endpoint{fasthttp.MethodGet: a.get}.serve(method)
	case len(rest) == 1 && rest[0] == "signals":
		return endpoint{fasthttp.MethodPost: a.postSignal}.serve(method)
	case len(rest) == 1 && rest[0] == "runs":
		return endpoint{fasthttp.MethodPost: a.createRun}.serve(method)
	case len(rest) == 1 && rest[0] == "variations":
		return endpoint{
			fasthttp.MethodGet:  a.listVariations,
			fasthttp.MethodPost: a.createVariation,
		}.serve(method)
	case len(rest) == 2 && rest[0] == "variations":
		return endpoint{fasthttp.MethodGet: func() (result, error) { return a.getVariation(rest[1]) }}.serve(method)
	case len(rest) == 1 && rest[0] == "objective":
		return endpoint{
			fasthttp.MethodGet: func() (result, error) { return a.getObjective(-1) },
			fasthttp.MethodPut: a.putObjective,
		}.serve(method)
	case len(rest) == 3 && rest[0] == "objective" && rest[1] == "versions":
		v, err := parseVersion("objective version", rest[2])
		if err != nil {
			return result{}, err
		}
		return endpoint{fasthttp.MethodGet: func() (result, error) { return a.getObjective(v) }}.serve(method)
	case len(rest) == 3 && rest[0] == "versions" && rest[2] == "rewards":
		return endpoint{fasthttp.MethodGet: func() (result, error) { return a.versionRewards(rest[1]) }}.serve(method)
	case len(rest) >= 2 && rest[0] == "runs":
		return h.routeRun(a, method, rest[1], rest[2:])
	}
	return result{}, fmt.Errorf("%s %s: %w", method, c.path, ErrRouteNotFound)
}

func (h *HTTP) routeRun(a agentCall, method, runRef string, rest []string) (result, error) {
	runID, err := a.resolveRun(runRef)
	if err != nil {
		return result{}, err
	}
	var e endpoint
	switch {
	case len(rest) == 0:
		e = endpoint{fasthttp.MethodGet: func() (result, error) { return a.getRun(runID) }}
	case len(rest) == 1 && rest[0] == "finish":
		e = endpoint{fasthttp.MethodPost: func() (result, error) { return a.finishRun(runID) }}
	case len(rest) == 1 && rest[0] == "claims":
		e = endpoint{fasthttp.MethodPost: func() (result, error) { return a.claim(runID) }}
	case len(rest) == 1 && rest[0] == "traces":
		e = endpoint{fasthttp.MethodPost: func() (result, error) { return a.trace(runID) }}
	case len(rest) == 1 && rest[0] == "signals":
		e = endpoint{fasthttp.MethodGet: func() (result, error) { return a.runSignals(runID) }}
	case len(rest) == 1 && rest[0] == "reward":
		e = endpoint{fasthttp.MethodGet: func() (result, error) { return a.reward(runID) }}
	default:
		return result{}, fmt.Errorf("%s %s: %w", method, a.path, ErrRouteNotFound)
	}
	return e.serve(method)
}

// enterWorkspace makes the call act in ws: 404 if there is no such
// workspace, 403 if the key may not use it.
func (h *HTTP) enterWorkspace(c *call, ws string) error {
	if _, ok := h.tenancy.Workspace(ws); !ok {
		if !c.p.Admin {
			return fmt.Errorf("workspace %s: %w", ws, auth.ErrForbidden)
		}
		return notFound("workspace", ws)
	}
	if !c.p.CanUse(ws) {
		return fmt.Errorf("workspace %s: %w", ws, auth.ErrForbidden)
	}
	c.ws = ws
	return nil
}
