package engine

import (
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// Selection modes of an agent.
const (
	SelectionWeighted = "VARIATION_SELECTION_MODE_WEIGHTED"
	SelectionRandom   = "VARIATION_SELECTION_MODE_RANDOM"
)

// SucceededSignal is the platform signal a finished run gets: 1 or 0.
const SucceededSignal = "run.succeeded"

// AgentInfo is what an agent is, as created.
type AgentInfo struct {
	ID            string
	Workspace     string
	Name          string
	ExternalID    string
	Labels        map[string]string
	SelectionMode string
	CreatedAt     time.Time
}

// Run is one execution of an agent. Claims and Traces only grow.
type Run struct {
	ID          string
	AgentID     string
	Version     string
	VariationID string
	SessionID   string
	ExternalID  string
	Labels      map[string]string
	ProfileID   string // who created it
	CreatedAt   time.Time
	Finished    bool
	Succeeded   bool
	FinishedAt  time.Time
	Claims      []Claim
	Traces      []Trace
}

// Status is "running" until the run is finished, then "succeeded" or "failed".
func (r *Run) Status() string {
	switch {
	case !r.Finished:
		return "running"
	case r.Succeeded:
		return "succeeded"
	default:
		return "failed"
	}
}

// Claim records that a run acted on an object such as "zendesk.ticket/42".
type Claim struct {
	Object    string
	CreatedAt time.Time
	Seq       uint64 // the sequence of the event that recorded it: claim order within the agent
}

// Trace is one model call of a run.
type Trace struct {
	TraceID   string
	TurnID    string
	CreatedAt time.Time
}

// Signal is one fact about one or more runs. Exactly one of RunID (a run id
// subject, or a session subject resolved at receipt), or Object is set.
type Signal struct {
	ID         string
	Kind       string
	Value      float64
	RunID      string
	SessionID  string // the subject as given, when it was a session
	Object     string
	DedupKey   string
	OccurredAt time.Time
	ReceivedAt time.Time
	Seq        uint64 // the sequence of the event that recorded it: receipt order within the agent
}

// ObjectiveVersion is one PUT of the agent's objective; versions count from 1.
type ObjectiveVersion struct {
	Version    int
	Definition objective.Definition
	Note       string
	CreatedAt  time.Time
}

// DefaultObjective is version 0, the one every agent uses before its first PUT.
func DefaultObjective() ObjectiveVersion {
	return ObjectiveVersion{Version: 0, Definition: objective.Default()}
}
