// Package api is Plaudit's door-neutral service: every operation of every
// door as Request → Response. It authorises the request against the
// workspaces (the door has authenticated it), replays or records
// Idempotency-Key outcomes, turns the seeds' request shapes into engine
// commands on the agent actors, and renders the answers in the seeds'
// response shapes. A door only translates its wire into a Request and a
// Response back onto it: the HTTP door (transport/httpdoor) maps method and
// path, the NATS door (transport/natsdoor) maps subject and body.
//
// Field names: the engine names invalid fields in its own words (score,
// external_id); the request shapes of a seed rename them to the seed's
// paths (data.score, metadata.externalId) here, in one table per shape.
package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/plaudit/plaudit/transport/tenancy"
)

// Op names one operation.
type Op string

// The operations, by the seed whose shapes they speak.
const (
	// Workspaces and keys (SPEC §1).
	ListWorkspaces  Op = "list_workspaces"
	CreateWorkspace Op = "create_workspace"
	ListAPIKeys     Op = "list_api_keys"
	CreateAPIKey    Op = "create_api_key"
	RevokeAPIKey    Op = "revoke_api_key"

	// Seed 000 and the native routes (/api/v1).
	ListAgents          Op = "list_agents"
	CreateAgent         Op = "create_agent"
	GetAgent            Op = "get_agent"
	RecordSignal        Op = "record_signal"
	CreateRun           Op = "create_run" // variation selection
	GetRun              Op = "get_run"
	FinishRun           Op = "finish_run"
	ClaimObject         Op = "claim_object"
	RegisterTrace       Op = "register_trace"
	ListRunSignals      Op = "list_run_signals"
	GetReward           Op = "get_reward"
	GetObjective        Op = "get_objective"
	GetObjectiveVersion Op = "get_objective_version"
	PutObjective        Op = "put_objective"
	PreviewObjective    Op = "preview_objective" // a draft tried on the history, nothing written
	VersionRewards      Op = "version_rewards"
	ListVariations      Op = "list_variations"
	CreateVariation     Op = "create_variation"
	GetVariation        Op = "get_variation"
	AgentOverview       Op = "agent_overview" // the console's agent at a glance

	// Seed 001: reward reports on a job (a run).
	ReportReward Op = "report_reward"
	ListEvidence Op = "list_evidence"

	// Seed 004: objectives (runs), feedback, variations.
	CreateObjective       Op = "create_objective"
	GetObjectiveRun       Op = "get_objective_run"
	CreateFeedback        Op = "create_feedback"
	ListObjectiveFeedback Op = "list_objective_feedback"
	ListAgentFeedback     Op = "list_agent_feedback"
	GetAgentVariation     Op = "get_agent_variation"

	// Seed 003: tasks, judge versions and judged rewards (GetReward above
	// is seed 000's reward of a run).
	CreateTask         Op = "create_task"
	ListTasks          Op = "list_tasks"
	GetTask            Op = "get_task"
	GetTaskVersion     Op = "get_task_version"
	PutJudgeVersion    Op = "put_judge_version"
	ListJudgeVersions  Op = "list_judge_versions"
	CreateJudgedReward Op = "create_judged_reward"
	GetJudgedReward    Op = "get_judged_reward"
	TaskCalibration    Op = "task_calibration"    // judged rewards against reviews
	TaskRewardSummary  Op = "task_reward_summary" // the reward distribution per task version

	// A cluster node's view of its cluster (admins).
	GetCluster Op = "get_cluster"
)

// Target names what an operation acts on: the path parameters of HTTP, the
// subject tokens and body members of NATS. References to agents and runs
// may be ids or "external_id:<value>".
type Target struct {
	Agent     string
	Run       string // a run, a seed-001 job or a seed-004 objective
	Variation string
	Version   string // an agent release label, an objective version number, a task or judge version
	Key       string // an API key id
	Task      string // a seed-003 task id (it may hold '/')
	Reward    string // a seed-003 judged reward id
}

// ErrorShape is the error body a request is answered with.
type ErrorShape int

const (
	// ErrorJSON is {"error": {code, message, request_id}}.
	ErrorJSON ErrorShape = iota
	// ErrorRPC is google.rpc.Status {code, message, details} (seed 004).
	ErrorRPC
)

// Request is one operation as a door admitted it.
type Request struct {
	Op        Op
	Principal tenancy.Principal // who the door authenticated
	// Workspace is the workspace the request names (a /v1/workspaces/{ws}
	// path, a NATS subject); empty, it acts in the principal's home.
	Workspace string
	Target    Target
	Body      []byte // owned by the service once handed over
	// Query holds the query arguments; nil means none.
	Query Arguments
	// IdempotencyKey is the Idempotency-Key header; nil when absent.
	IdempotencyKey []byte
	// Prefer is the Prefer header ("" when absent): "wait=N" holds a
	// judged reward's answer until it is final or N seconds pass.
	Prefer  string
	Started uint64 // start order, stamped at admission (Service.Stamp)
	// Deadline is when the request stops being worth answering; zero
	// takes Config.RequestDeadline from when the service gets it. A door
	// that knows when the request arrived sets it from then.
	Deadline time.Time
	// Door is the door that admitted the request, and Arrived when (zero:
	// when the service gets it); the metrics and the access log use them.
	Door      Door
	Arrived   time.Time
	RequestID string
	Errors    ErrorShape
	// MaxReply bounds the answer's body (0: unbounded): a door whose
	// transport carries no more (NATS's max_payload) sets it, and a larger
	// answer is a 500, counted and logged as the one sent.
	MaxReply int
	// Forwarded marks a request another node of a cluster handed over
	// (Router): it is served here or refused, never forwarded again.
	Forwarded bool
}

func (r *Request) arg(name string) string {
	if r.Query == nil {
		return ""
	}
	return r.Query.Arg(name)
}

// Arguments are a request's query arguments, as its door reads them.
type Arguments interface {
	// Arg returns the argument name ("" when absent).
	Arg(name string) string
}

// ArgsMap is a map of arguments as Arguments.
type ArgsMap map[string]string

// Arg implements Arguments.
func (m ArgsMap) Arg(name string) string { return m[name] }

// scope is what an Idempotency-Key is scoped to besides its workspace: the
// operation and its target t (see call.keyTarget), the same on every door.
// (Its last part was the request's error shape; it is ErrorJSON's for every
// request now. A recorded error is kept in that shape and answered in the
// request's: see replayed.)
func (r *Request) scope(t Target) string { return r.scopeAs(t, ErrorJSON) }

// legacyScope is where the request found its record before scopes named
// targets by id and left the error shape out: its target as the door named
// it, and its shape. A record stored there before is still answered.
func (r *Request) legacyScope() string { return r.scopeAs(r.Target, r.Errors) }

func (r *Request) scopeAs(t Target, shape ErrorShape) string {
	parts := []string{string(r.Op), t.Agent, t.Run, t.Variation, t.Version, t.Key, t.Task,
		strconv.Itoa(int(shape))}
	if t.Reward != "" { // appended only when set, so older records keep their scope
		parts = append(parts, t.Reward)
	}
	return strings.Join(parts, "\x00")
}

// Response is what the door writes back.
type Response struct {
	Status int
	Body   []byte // JSON
	// RequestID is the id to report: the request's own, or on a replay the
	// first response's.
	RequestID string
	// RetryAfter, in seconds, when the client should retry (503).
	RetryAfter int
	// Message is the error message of a failed request ("" on success),
	// for doors that carry it outside the body (NATS error headers).
	Message string
	// NotServed marks the answer of a forwarded request that reached a
	// node not serving its agent (ErrNotServed): nothing was done, and
	// the sender may send it again to the agent's owner.
	NotServed bool
}

// result is what a handler answers on success.
type result struct {
	status int
	body   []byte
	reqID  string // a replayed response's own request id
	// record, when set, is what an Idempotency-Key records instead of body:
	// a response that carries a secret records it without the secret.
	record []byte
	// forwarded is the answer of the node the request was forwarded to,
	// passed on as it is.
	forwarded *Response
}

// answer is the buffer a write's or a single read's answer is rendered
// into: most are a few hundred bytes, so it is allocated once at about
// their size instead of growing from nothing (an eighth of the bytes a
// feedback allocated were the answer's regrowths).
func answer() []byte { return make([]byte, 0, 512) }

func ok(b []byte) (result, error)      { return result{status: 200, body: b}, nil }
func created(b []byte) (result, error) { return result{status: 201, body: b}, nil }

// statusFor is 201 for a call that created something, 200 for a repeat.
func statusFor(created bool) int {
	if created {
		return 201
	}
	return 200
}

func notFound(what, ref string) error {
	return fmt.Errorf("%s %s: %w", what, ref, errNotFound)
}
