package engine

import (
	"time"

	"github.com/plaudit/plaudit/engine/objective"
)

// Event is one persisted change of an agent. Events are applied in order,
// live by the command methods, on recovery by Replay and Restore.
type Event interface{ eventType() eventType }

type eventType byte

// Event type tags, stable on disk: never renumber.
const (
	evAgentCreated     eventType = 1
	evRunCreated       eventType = 2
	evRunFinished      eventType = 3
	evObjectClaimed    eventType = 4
	evTraceRegistered  eventType = 5
	evSignalRecorded   eventType = 6
	evObjectivePut     eventType = 7
	evVariationCreated eventType = 8
	evFeedbackRecorded eventType = 9
	evReportRecorded   eventType = 10
)

// AgentCreated starts an agent's log.
type AgentCreated struct{ Info AgentInfo }

// RunCreated adds a run.
type RunCreated struct{ Run Run }

// RunFinished closes a run.
type RunFinished struct {
	RunID      string
	Succeeded  bool
	FinishedAt time.Time
}

// ObjectClaimed records a claim of a run.
type ObjectClaimed struct {
	RunID string
	Claim Claim
}

// TraceRegistered records a model call of a run.
type TraceRegistered struct {
	RunID string
	Trace Trace
}

// SignalRecorded appends a signal.
type SignalRecorded struct{ Signal Signal }

// ObjectivePut adds an objective version.
type ObjectivePut struct {
	Version    int
	Definition objective.Definition
	Note       string
	CreatedAt  time.Time
}

func (AgentCreated) eventType() eventType    { return evAgentCreated }
func (RunCreated) eventType() eventType      { return evRunCreated }
func (RunFinished) eventType() eventType     { return evRunFinished }
func (ObjectClaimed) eventType() eventType   { return evObjectClaimed }
func (TraceRegistered) eventType() eventType { return evTraceRegistered }
func (SignalRecorded) eventType() eventType  { return evSignalRecorded }
func (ObjectivePut) eventType() eventType    { return evObjectivePut }
