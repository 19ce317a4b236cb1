package httpdoor

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/transport/api"
)

// route binds a method and a path pattern to an operation. Pattern segments
// in braces bind to the request's target: {ws} to the workspace, the others
// to the api.Target field of that name. {task*} takes one or more segments
// (a seed-003 task id may hold '/', as "aicme/example-001" does): the
// segments the rest of the pattern leaves. Routes are tried in order, so a
// longer pattern comes before the one whose {task*} would swallow it.
type route struct {
	method, pattern string
	op              api.Op
}

// compiledRoute is a route with its pattern split into segments once,
// rather than on every request, and where its {task*} is (-1: none).
type compiledRoute struct {
	route
	seg    []string
	greedy int
}

// table is routes, compiled.
var table = compile(routes)

func compile(rs []route) []compiledRoute {
	out := make([]compiledRoute, len(rs))
	for i, r := range rs {
		seg := splitPath(r.pattern)
		out[i] = compiledRoute{route: r, seg: seg, greedy: slices.Index(seg, "{task*}")}
	}
	return out
}

var routes = []route{
	{"GET", "/v1/workspaces", api.ListWorkspaces},
	{"POST", "/v1/workspaces", api.CreateWorkspace},
	{"GET", "/v1/workspaces/{ws}/api-keys", api.ListAPIKeys},
	{"POST", "/v1/workspaces/{ws}/api-keys", api.CreateAPIKey},
	{"DELETE", "/v1/workspaces/{ws}/api-keys/{key}", api.RevokeAPIKey},
	{"GET", "/v1/cluster", api.GetCluster},

	{"GET", "/api/v1/agents", api.ListAgents},
	{"POST", "/api/v1/agents", api.CreateAgent},
	{"GET", "/api/v1/agents/{agent}", api.GetAgent},
	{"POST", "/api/v1/agents/{agent}/signals", api.RecordSignal},
	{"POST", "/api/v1/agents/{agent}/runs", api.CreateRun},
	{"GET", "/api/v1/agents/{agent}/runs/{run}", api.GetRun},
	{"POST", "/api/v1/agents/{agent}/runs/{run}/finish", api.FinishRun},
	{"POST", "/api/v1/agents/{agent}/runs/{run}/claims", api.ClaimObject},
	{"POST", "/api/v1/agents/{agent}/runs/{run}/traces", api.RegisterTrace},
	{"GET", "/api/v1/agents/{agent}/runs/{run}/signals", api.ListRunSignals},
	{"GET", "/api/v1/agents/{agent}/runs/{run}/reward", api.GetReward},
	{"GET", "/api/v1/agents/{agent}/objective", api.GetObjective},
	{"PUT", "/api/v1/agents/{agent}/objective", api.PutObjective},
	{"GET", "/api/v1/agents/{agent}/objective/versions/{version}", api.GetObjectiveVersion},
	{"POST", "/api/v1/agents/{agent}/objective/preview", api.PreviewObjective},
	{"GET", "/api/v1/agents/{agent}/versions/{version}/rewards", api.VersionRewards},
	{"GET", "/api/v1/agents/{agent}/variations", api.ListVariations},
	{"POST", "/api/v1/agents/{agent}/variations", api.CreateVariation},
	{"GET", "/api/v1/agents/{agent}/variations/{variation}", api.GetVariation},
	{"GET", "/api/v1/agents/{agent}/overview", api.AgentOverview},

	{"POST", "/v1/jobs/{run}/rewards", api.ReportReward},
	{"GET", "/v1/jobs/{run}/rewards", api.ListEvidence},

	{"POST", "/v1/tasks", api.CreateTask},
	{"GET", "/v1/tasks", api.ListTasks},
	{"GET", "/v1/tasks/{task*}/versions/{version}", api.GetTaskVersion},
	{"GET", "/v1/tasks/{task*}/calibration", api.TaskCalibration},
	{"GET", "/v1/tasks/{task*}/rewards/summary", api.TaskRewardSummary},
	{"GET", "/v1/tasks/{task*}", api.GetTask},
	{"GET", "/v1/judge-versions", api.ListJudgeVersions},
	{"PUT", "/v1/judge-versions/{version}", api.PutJudgeVersion},
	{"POST", "/v1/rewards", api.CreateJudgedReward},
	{"GET", "/v1/rewards/{reward}", api.GetJudgedReward},

	{"POST", "/v1/workspaces/{ws}/objectives", api.CreateObjective},
	{"GET", "/v1/workspaces/{ws}/objectives/{run}", api.GetObjectiveRun},
	{"POST", "/v1/workspaces/{ws}/objectives/{run}/feedback", api.CreateFeedback},
	{"GET", "/v1/workspaces/{ws}/objectives/{run}/feedback", api.ListObjectiveFeedback},
	{"GET", "/v1/workspaces/{ws}/agents/{agent}/feedback", api.ListAgentFeedback},
	{"GET", "/v1/workspaces/{ws}/agents/{agent}/variations/{variation}", api.GetAgentVariation},
}

// Route fills req's operation, workspace, target and error shape from a
// method and a path as sent (percent-encoded): each segment between its
// slashes is decoded on its own. An unknown path is api.ErrRouteNotFound,
// a known one with another method api.ErrMethodNotAllowed, a segment that
// is not valid percent-encoding a field error of "path".
func Route(req *api.Request, method, path string) error {
	req.Errors = errorShape(path)
	var buf [maxSegments]string
	seg, err := decodeSegments(appendSegments(buf[:0], path))
	if err != nil {
		return err
	}
	known := false
	for i := range table {
		r := &table[i]
		var t api.Target
		ws, ok := r.match(seg, &t)
		if !ok {
			continue
		}
		known = true
		if r.method != method {
			continue
		}
		req.Op, req.Workspace, req.Target = r.op, ws, t
		return nil
	}
	if known {
		return fmt.Errorf("%s %s: %w", method, path, api.ErrMethodNotAllowed)
	}
	return fmt.Errorf("%s %s: %w", method, path, api.ErrRouteNotFound)
}

// errorShape is google.rpc.Status under /v1/workspaces (seed 004), the
// {"error": …} body elsewhere.
func errorShape(path string) api.ErrorShape {
	if strings.HasPrefix(path, "/v1/workspaces") {
		return api.ErrorRPC
	}
	return api.ErrorJSON
}

// match binds the segments of a path to a pattern's placeholders. It
// allocates nothing unless the pattern has {task*} and the path fits it.
func (r *compiledRoute) match(seg []string, t *api.Target) (ws string, ok bool) {
	pat, g := r.seg, r.greedy
	if g < 0 {
		if len(pat) != len(seg) {
			return "", false
		}
		return bind(pat, seg, t)
	}
	// The greedy segment takes what the segments around it leave.
	tail := len(pat) - g - 1
	if len(seg) < len(pat) {
		return "", false
	}
	ws, ok = bind(pat[:g], seg[:g], t)
	if !ok {
		return "", false
	}
	ws2, ok := bind(pat[g+1:], seg[len(seg)-tail:], t)
	if !ok {
		return "", false
	}
	t.Task = strings.Join(seg[g:len(seg)-tail], "/")
	return cmp.Or(ws, ws2), true
}

// bind matches equally long pattern and path segments.
func bind(pat, seg []string, t *api.Target) (ws string, ok bool) {
	for i, p := range pat {
		name, isVar := strings.CutPrefix(p, "{")
		if !isVar {
			if p != seg[i] {
				return "", false
			}
			continue
		}
		v := seg[i]
		switch strings.TrimSuffix(name, "}") {
		case "ws":
			ws = v
		case "agent":
			t.Agent = v
		case "run":
			t.Run = v
		case "variation":
			t.Variation = v
		case "version":
			t.Version = v
		case "key":
			t.Key = v
		case "reward":
			t.Reward = v
		}
	}
	return ws, true
}

func splitPath(path string) []string { return appendSegments(nil, path) }

// decodeSegments percent-decodes each segment in place; one without a '%'
// is left as it is, without a copy.
func decodeSegments(seg []string) ([]string, error) {
	for i, s := range seg {
		if strings.IndexByte(s, '%') < 0 {
			continue
		}
		d, err := url.PathUnescape(s)
		if err != nil {
			return nil, field.Errorf("path", "segment %s is not valid percent-encoding", field.Quote(s))
		}
		seg[i] = d
	}
	return seg, nil
}

// maxSegments is room for the segments of every route, so a request's
// path is split without allocating; a longer path (which no route
// matches) only grows the slice.
const maxSegments = 16

// appendSegments appends the segments of path, between slashes, to seg.
func appendSegments(seg []string, path string) []string {
	path = strings.Trim(path, "/")
	if path == "" {
		return seg
	}
	for {
		s, rest, found := strings.Cut(path, "/")
		seg = append(seg, s)
		if !found {
			return seg
		}
		path = rest
	}
}

// methods lists the methods the route table has for path, in table order
// without repeats: the Allow header of a 405.
func methods(path string) []string {
	seg, _ := decodeSegments(splitPath(path)) // Route decoded it first
	var out []string
	for i := range table {
		var t api.Target
		if _, ok := table[i].match(seg, &t); ok && !slices.Contains(out, table[i].method) {
			out = append(out, table[i].method)
		}
	}
	return out
}
