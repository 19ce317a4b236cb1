package client

import (
	"encoding/json"
	"time"
)

// The request and answer shapes, with the wire's JSON names. A request's
// IdempotencyKey (never sent in the body) is the Idempotency-Key of the
// call; empty, the client makes one per call. Nullable strings of an
// answer read as "".

// SelectRequest creates a run, which selects one of the agent's variations
// (POST /api/v1/agents/{agent}/runs; NATS "select").
type SelectRequest struct {
	Version        string            `json:"version,omitempty"`      // the agent's release label
	VariationID    string            `json:"variation_id,omitempty"` // pins the variation
	SessionID      string            `json:"session_id,omitempty"`
	ExternalID     string            `json:"external_id,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	IdempotencyKey string            `json:"-"`
}

// Run is a run. Select's answer also names the variation it chose
// (nil when the agent has none); a finished run's answer lists its claims
// and traces.
type Run struct {
	ID          string            `json:"id"`
	AgentID     string            `json:"agent_id"`
	Version     string            `json:"version"`
	VariationID string            `json:"variation_id"`
	SessionID   string            `json:"session_id"`
	ExternalID  string            `json:"external_id"`
	Labels      map[string]string `json:"labels"`
	Status      string            `json:"status"` // running, succeeded or failed
	CreatedAt   time.Time         `json:"created_at"`
	FinishedAt  *time.Time        `json:"finished_at"`
	Claims      []Claim           `json:"claims,omitempty"`
	Traces      []Trace           `json:"traces,omitempty"`
	Variation   *VariationRef     `json:"variation,omitempty"`
	meta
}

// VariationRef names a variation.
type VariationRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Claim is an object a run claimed.
type Claim struct {
	RunID     string    `json:"run_id"`
	Object    string    `json:"object"`
	CreatedAt time.Time `json:"created_at"`
}

// Trace is a trace registered on a run.
type Trace struct {
	RunID     string    `json:"run_id"`
	TraceID   string    `json:"trace_id"`
	TurnID    string    `json:"turn_id"`
	CreatedAt time.Time `json:"created_at"`
}

// FinishRequest finishes a run (POST .../runs/{run}/finish; NATS "finish").
type FinishRequest struct {
	Succeeded      bool       `json:"succeeded"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"` // default: when the server receives it
	IdempotencyKey string     `json:"-"`
}

// SignalRequest records a signal on one subject: a run, a session or an
// object (POST /api/v1/agents/{agent}/signals; NATS "signal").
type SignalRequest struct {
	Kind           string     `json:"kind"`
	Value          float64    `json:"value"`
	RunID          string     `json:"run_id,omitempty"`
	SessionID      string     `json:"session_id,omitempty"`
	Object         string     `json:"object,omitempty"`
	DedupKey       string     `json:"dedup_key,omitempty"`
	OccurredAt     *time.Time `json:"occurred_at,omitempty"`
	IdempotencyKey string     `json:"-"`
}

// Signal is a recorded signal. RunIDs are the runs it attached to at
// receipt; Duplicate is true when its dedup key had been seen (then it is
// the first signal of that key).
type Signal struct {
	ID         string    `json:"id"`
	Kind       string    `json:"kind"`
	Value      float64   `json:"value"`
	RunIDs     []string  `json:"run_ids"`
	SessionID  string    `json:"session_id,omitempty"`
	Object     string    `json:"object,omitempty"`
	DedupKey   string    `json:"dedup_key,omitempty"`
	OccurredAt time.Time `json:"occurred_at"`
	ReceivedAt time.Time `json:"received_at"`
	Duplicate  bool      `json:"duplicate"`
	meta
}

// FeedbackRequest is seed 004's CreateObjectiveFeedbackRequest
// (POST /v1/workspaces/{ws}/objectives/{objective}/feedback; NATS
// "feedback").
type FeedbackRequest struct {
	Metadata       FeedbackMetadata `json:"metadata"`
	Data           FeedbackData     `json:"data"`
	IdempotencyKey string           `json:"-"`
}

// FeedbackMetadata is seed 004's CreateOperationMetadata.
type FeedbackMetadata struct {
	ExternalID string            `json:"externalId,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// FeedbackData is a feedback's score and comment. A positive score adds
// its magnitude to the variation's α, a negative one to its β; no score
// adds 0.5 to both.
type FeedbackData struct {
	Score   *float64 `json:"score,omitempty"`
	Comment string   `json:"comment,omitempty"`
}

// Feedback is seed 004's ObjectiveFeedback.
type Feedback struct {
	Metadata OperationMetadata `json:"metadata"`
	Data     FeedbackData      `json:"data"`
	Info     FeedbackInfo      `json:"info"`
	meta
}

// OperationMetadata is seed 004's OperationMetadata.
type OperationMetadata struct {
	ID          string            `json:"id"`
	AccountID   string            `json:"accountId"`
	WorkspaceID string            `json:"workspaceId"`
	Labels      map[string]string `json:"labels"`
	CreatedAt   time.Time         `json:"createdAt"`
	ExternalID  string            `json:"externalId,omitempty"`
	ProfileID   string            `json:"profileId"`
}

// FeedbackInfo says who submitted a feedback; its profile is kept raw.
type FeedbackInfo struct {
	SubmittedBy json.RawMessage `json:"submittedBy"`
}

// Reward is one run's reward under one objective version (GET
// .../runs/{run}/reward; NATS "reward").
type Reward struct {
	RunID            string       `json:"run_id"`
	ObjectiveVersion int          `json:"objective_version"`
	Status           string       `json:"status"` // scored, guarded or excluded
	Value            *float64     `json:"value"`  // nil when excluded
	Matured          bool         `json:"matured"`
	MaturesAt        *time.Time   `json:"matures_at"` // nil while the run is unfinished
	Terms            []TermResult `json:"terms"`
	Guards           []Guard      `json:"guards"`
	LateSignals      int          `json:"late_signals"`
	meta
}

// TermResult is how one objective term scored.
type TermResult struct {
	Signal   string   `json:"signal"`
	Weight   float64  `json:"weight"`
	Agg      string   `json:"agg"`
	Count    int      `json:"count"`
	Raw      *float64 `json:"raw"`
	Scaled   *float64 `json:"scaled"`
	Imputed  bool     `json:"imputed"`
	Evidence bool     `json:"evidence"`
}

// Guard is one objective guard and whether it matched.
type Guard struct {
	Signal  string  `json:"signal"`
	Op      string  `json:"op"`
	Value   float64 `json:"value"`
	Matched bool    `json:"matched"`
}

// ReportRequest is seed 001's reward report on a job (POST
// /v1/jobs/{job}/rewards). Value is sent as given, null included: an
// external report needs it (a number or null), a review needs a number, a
// choice ignores it.
type ReportRequest struct {
	Kind    string         `json:"kind,omitempty"` // external (default), review or choice
	Scorer  string         `json:"scorer,omitempty"`
	Value   *float64       `json:"value"`
	Weight  *float64       `json:"weight,omitempty"`
	TurnID  string         `json:"turn_id,omitempty"`
	TraceID string         `json:"trace_id,omitempty"`
	Detail  map[string]any `json:"detail,omitempty"`
	// Shown and Chosen are a choice's options and the one chosen (one of
	// Shown, or JSON null).
	Shown          json.RawMessage `json:"shown,omitempty"`
	Chosen         json.RawMessage `json:"chosen,omitempty"`
	Prompt         string          `json:"prompt,omitempty"`
	IdempotencyKey string          `json:"-"`
}

// Report is a reward report on a job, or another piece of its evidence.
type Report struct {
	ID         string          `json:"id"`
	JobID      string          `json:"job_id"`
	Kind       string          `json:"kind"`
	Scorer     string          `json:"scorer"`
	TurnID     string          `json:"turn_id"`
	TraceID    string          `json:"trace_id"`
	Value      *float64        `json:"value"`
	Weight     float64         `json:"weight"`
	Gate       bool            `json:"gate"`
	DetailJSON json.RawMessage `json:"detail_json"`
	Shown      json.RawMessage `json:"shown,omitempty"`
	Chosen     json.RawMessage `json:"chosen,omitempty"`
	Prompt     string          `json:"prompt,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	meta
}

// JudgedRewardRequest asks for seed 003's judged reward of an answer to a
// task (POST /v1/rewards; NATS plaudit.v1.<ws>.tasks.reward).
type JudgedRewardRequest struct {
	Task         TaskRef `json:"task"`
	Answer       string  `json:"answer"`
	JudgeVersion string  `json:"judge_version,omitempty"`
	EpisodeID    string  `json:"episode_id,omitempty"` // a run: the reward becomes its evidence
	ClientRef    *string `json:"client_ref,omitempty"`
	// Wait, in whole seconds up to 120, holds the answer until the reward
	// is final or the time passes (Prefer: wait=N); zero answers at once,
	// pending when a model judge has not answered.
	Wait           time.Duration `json:"-"`
	IdempotencyKey string        `json:"-"`
}

// TaskRef names a task and, optionally, one of its versions.
type TaskRef struct {
	ID      string `json:"id"`
	Version string `json:"version,omitempty"`
}

// JudgedReward is a judged reward: pending, scored or failed.
type JudgedReward struct {
	Object       string     `json:"object"` // "reward"
	ID           string     `json:"id"`
	Status       string     `json:"status"`
	EpisodeID    string     `json:"episode_id"`
	Task         TaskRef    `json:"task"`
	JudgeVersion string     `json:"judge_version"`
	Scores       *Scores    `json:"scores"` // nil unless scored
	Flags        []string   `json:"flags"`
	Failure      *Failure   `json:"failure"`
	ClientRef    *string    `json:"client_ref"`
	CreatedAt    time.Time  `json:"created_at"`
	ScoredAt     *time.Time `json:"scored_at"`
	meta
}

// Scores are a scored reward's scores.
type Scores struct {
	Reward   float64 `json:"reward"`
	Partial  float64 `json:"partial"`
	MustPass float64 `json:"must_pass"`
	AllPass  float64 `json:"all_pass"`
}

// Failure is why a reward failed.
type Failure struct {
	Reason    string `json:"reason"`
	Retryable bool   `json:"retryable"`
}

// AgentRequest creates an agent (POST /api/v1/agents).
type AgentRequest struct {
	Name           string            `json:"name"`
	ExternalID     string            `json:"external_id,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	SelectionMode  string            `json:"selection_mode,omitempty"`
	IdempotencyKey string            `json:"-"`
}

// Agent is an agent.
type Agent struct {
	ID            string            `json:"id"`
	WorkspaceID   string            `json:"workspace_id"`
	Name          string            `json:"name"`
	ExternalID    string            `json:"external_id"`
	Labels        map[string]string `json:"labels"`
	SelectionMode string            `json:"selection_mode"`
	CreatedAt     time.Time         `json:"created_at"`
	meta
}
