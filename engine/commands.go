package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"time"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/id"
	"github.com/plaudit/plaudit/engine/objective"
)

// Command is a request to change an agent.
type Command interface{ command() }

// CreateAgent creates the agent; ID is chosen by the caller, which routes
// by it before the agent exists.
type CreateAgent struct {
	ID, Workspace, Name, ExternalID, SelectionMode string
	Labels                                         map[string]string
}

// CreateRun starts a run. Creating a run is variation selection: a given
// VariationID pins it, else one is chosen by the agent's selection mode.
type CreateRun struct {
	Version, VariationID, SessionID, ExternalID, ProfileID string
	Labels                                                 map[string]string
}

// FinishRun finishes a run; FinishedAt zero means now.
type FinishRun struct {
	RunID      string
	Succeeded  bool
	FinishedAt time.Time
}

// ClaimObject makes a run claim an object.
type ClaimObject struct{ RunID, Object string }

// RegisterTrace registers a model call of a run; TurnID defaults to TraceID.
type RegisterTrace struct{ RunID, TraceID, TurnID string }

// RecordSignal appends a signal. Exactly one of RunID, SessionID, Object.
// OccurredAt zero means now.
type RecordSignal struct {
	Kind                               string
	Value                              float64
	RunID, SessionID, Object, DedupKey string
	OccurredAt                         time.Time
}

// PutObjective adds an objective version.
type PutObjective struct {
	Definition objective.Definition
	Note       string
}

func (CreateAgent) command()   {}
func (CreateRun) command()     {}
func (FinishRun) command()     {}
func (ClaimObject) command()   {}
func (RegisterTrace) command() {}
func (RecordSignal) command()  {}
func (PutObjective) command()  {}

// SignalResult is what RecordSignal answers: the stored signal and whether
// the call was a repeat of its dedup key.
type SignalResult struct {
	Signal    Signal
	RunIDs    []string // the runs the signal attaches to now
	Duplicate bool
}

// ClaimResult and TraceResult report whether the call added anything.
type ClaimResult struct {
	RunID   string
	Claim   Claim
	Created bool
}

// TraceResult is what RegisterTrace answers.
type TraceResult struct {
	RunID   string
	Trace   Trace
	Created bool
}

var kindPattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,100}$`)

// Limits on free-form strings.
const (
	maxIDLen     = 200
	maxNameLen   = 200
	maxLabels    = 64
	maxLabelKey  = 317 // a 253-character DNS prefix, '/', a 63-character name
	maxLabelVal  = 256
	maxObjectLen = 500
	maxNoteLen   = 4096
)

// Execute validates cmd, applies the events it decides on and returns them
// with the command's result. On error nothing changed.
func (a *Agent) Execute(cmd Command, now time.Time, rnd *rand.Rand) (any, []Event, error) {
	if _, ok := cmd.(CreateAgent); !ok && !a.created {
		return nil, nil, fmt.Errorf("agent: %w", ErrNotFound)
	}
	now = now.UTC()
	var (
		res    any
		events []Event
		err    error
	)
	switch c := cmd.(type) {
	case CreateAgent:
		res, events, err = a.createAgent(c, now)
	case CreateRun:
		res, events, err = a.createRun(c, now, rnd)
	case FinishRun:
		res, events, err = a.finishRun(c, now, rnd)
	case ClaimObject:
		res, events, err = a.claimObject(c, now)
	case RegisterTrace:
		res, events, err = a.registerTrace(c, now)
	case RecordSignal:
		res, events, err = a.recordSignal(c, now, rnd)
	case PutObjective:
		res, events, err = a.putObjective(c, now)
	case CreateVariation:
		res, events, err = a.createVariation(c, now, rnd)
	case RecordFeedback:
		res, events, err = a.recordFeedback(c, now, rnd)
	case ReportReward:
		res, events, err = a.reportReward(c, now, rnd)
	default:
		return nil, nil, fmt.Errorf("engine: unknown command %T", cmd)
	}
	if err != nil {
		return nil, nil, err
	}
	for _, ev := range events {
		if err := a.apply(ev); err != nil {
			// A decided event that does not apply is a bug, not bad input.
			panic(err)
		}
	}
	return a.resultAfter(res), events, nil
}

// CreatedRun is what CreateRun answers: the run and the variation chosen.
type CreatedRun struct {
	Run       Run
	Variation *Variation // nil when the agent has no variations
}

// resultAfter refreshes results that point into state changed by apply.
func (a *Agent) resultAfter(res any) any {
	switch r := res.(type) {
	case *Run:
		return a.runView(a.runs[r.ID])
	case CreatedRun:
		r.Run = a.runView(a.runs[r.Run.ID])
		if v := a.variations[r.Run.VariationID]; v != nil {
			vv := *v
			r.Variation = &vv
		}
		return r
	}
	return res
}

func (a *Agent) createAgent(c CreateAgent, now time.Time) (any, []Event, error) {
	if a.created {
		return nil, nil, fmt.Errorf("agent %s: %w", c.ID, ErrConflict)
	}
	if err := checkText("name", c.Name, 1, maxNameLen); err != nil {
		return nil, nil, err
	}
	if err := checkText("external_id", c.ExternalID, 0, maxIDLen); err != nil {
		return nil, nil, err
	}
	if err := CheckLabels("labels", c.Labels); err != nil {
		return nil, nil, err
	}
	mode := c.SelectionMode
	switch mode {
	case "":
		mode = SelectionWeighted
	case SelectionWeighted, SelectionRandom:
	default:
		return nil, nil, field.Errorf("selection_mode", "must be %s or %s", SelectionWeighted, SelectionRandom)
	}
	info := AgentInfo{ID: c.ID, Workspace: c.Workspace, Name: c.Name, ExternalID: c.ExternalID,
		Labels: c.Labels, SelectionMode: mode, CreatedAt: now}
	return info, []Event{AgentCreated{Info: info}}, nil
}

func (a *Agent) createRun(c CreateRun, now time.Time, rnd *rand.Rand) (any, []Event, error) {
	for _, f := range []struct{ path, v string }{{"version", c.Version}, {"session_id", c.SessionID},
		{"external_id", c.ExternalID}, {"variation_id", c.VariationID}} {
		if err := checkText(f.path, f.v, 0, maxIDLen); err != nil {
			return nil, nil, err
		}
	}
	if err := CheckLabels("labels", c.Labels); err != nil {
		return nil, nil, err
	}
	if c.ExternalID != "" && a.runByExternal[c.ExternalID] != nil {
		return nil, nil, fmt.Errorf("run external_id %q already used: %w", c.ExternalID, ErrConflict)
	}
	variation, err := a.selectVariation(c.VariationID, rnd)
	if err != nil {
		return nil, nil, err
	}
	r := Run{ID: id.New(id.Run, now, rnd), AgentID: a.info.ID, Version: c.Version, VariationID: variation, SessionID: c.SessionID,
		ExternalID: c.ExternalID, Labels: c.Labels, ProfileID: c.ProfileID, CreatedAt: now}
	return CreatedRun{Run: r}, []Event{RunCreated{Run: r}}, nil
}

func (a *Agent) finishRun(c FinishRun, now time.Time, rnd *rand.Rand) (any, []Event, error) {
	r, err := a.run(c.RunID)
	if err != nil {
		return nil, nil, err
	}
	if r.Finished {
		return nil, nil, fmt.Errorf("run %s already finished: %w", r.ID, ErrConflict)
	}
	at := c.FinishedAt
	if at.IsZero() {
		at = now
	}
	at = at.UTC()
	value := 0.0
	if c.Succeeded {
		value = 1
	}
	sig := Signal{ID: id.New(id.Signal, now, rnd), Kind: SucceededSignal, Value: value, RunID: r.ID,
		OccurredAt: at, ReceivedAt: now, Seq: a.seq + 2}
	return r, []Event{
		RunFinished{RunID: r.ID, Succeeded: c.Succeeded, FinishedAt: at},
		SignalRecorded{Signal: sig},
	}, nil
}

func (a *Agent) claimObject(c ClaimObject, now time.Time) (any, []Event, error) {
	r, err := a.run(c.RunID)
	if err != nil {
		return nil, nil, err
	}
	if err := checkText("object", c.Object, 1, maxObjectLen); err != nil {
		return nil, nil, err
	}
	for _, cl := range r.Claims {
		if cl.Object == c.Object {
			return ClaimResult{RunID: r.ID, Claim: cl}, nil, nil
		}
	}
	cl := Claim{Object: c.Object, CreatedAt: now}
	return ClaimResult{RunID: r.ID, Claim: cl, Created: true}, []Event{ObjectClaimed{RunID: r.ID, Claim: cl}}, nil
}

func (a *Agent) registerTrace(c RegisterTrace, now time.Time) (any, []Event, error) {
	r, err := a.run(c.RunID)
	if err != nil {
		return nil, nil, err
	}
	if err := checkText("trace_id", c.TraceID, 1, maxIDLen); err != nil {
		return nil, nil, err
	}
	if err := checkText("turn_id", c.TurnID, 0, maxIDLen); err != nil {
		return nil, nil, err
	}
	turn := c.TurnID
	if turn == "" {
		turn = c.TraceID
	}
	for _, t := range r.Traces {
		if t.TraceID != c.TraceID {
			continue
		}
		if t.TurnID != turn {
			return nil, nil, fmt.Errorf("trace %s is registered with turn %s: %w", t.TraceID, t.TurnID, ErrConflict)
		}
		return TraceResult{RunID: r.ID, Trace: t}, nil, nil
	}
	t := Trace{TraceID: c.TraceID, TurnID: turn, CreatedAt: now}
	return TraceResult{RunID: r.ID, Trace: t, Created: true}, []Event{TraceRegistered{RunID: r.ID, Trace: t}}, nil
}

func (a *Agent) recordSignal(c RecordSignal, now time.Time, rnd *rand.Rand) (any, []Event, error) {
	if !kindPattern.MatchString(c.Kind) {
		return nil, nil, field.Errorf("kind", "must match ^[a-zA-Z0-9_.-]{1,100}$")
	}
	if math.IsNaN(c.Value) || math.IsInf(c.Value, 0) {
		return nil, nil, field.Errorf("value", "must be a finite number")
	}
	subjects := 0
	for _, s := range []string{c.RunID, c.SessionID, c.Object} {
		if s != "" {
			subjects++
		}
	}
	if subjects != 1 {
		return nil, nil, field.Errorf("", "exactly one of run_id, session_id or object is required")
	}
	if err := checkText("dedup_key", c.DedupKey, 0, maxIDLen); err != nil {
		return nil, nil, err
	}
	if err := checkText("object", c.Object, 0, maxObjectLen); err != nil {
		return nil, nil, err
	}
	if err := checkText("session_id", c.SessionID, 0, maxIDLen); err != nil {
		return nil, nil, err
	}
	if c.DedupKey != "" {
		if i, ok := a.dedup[c.DedupKey]; ok {
			s := a.signals[i]
			return SignalResult{Signal: s, RunIDs: a.SignalRuns(s), Duplicate: true}, nil, nil
		}
	}
	runID := c.RunID
	switch {
	case c.RunID != "":
		if _, err := a.run(c.RunID); err != nil {
			return nil, nil, err
		}
	case c.SessionID != "":
		r := a.sessionLatest[c.SessionID]
		if r == nil {
			return nil, nil, fmt.Errorf("session %s has no finished run: %w", c.SessionID, ErrNotFound)
		}
		runID = r.ID
	}
	at := c.OccurredAt
	if at.IsZero() {
		at = now
	}
	s := Signal{ID: id.New(id.Signal, now, rnd), Kind: c.Kind, Value: c.Value, RunID: runID,
		SessionID: c.SessionID, Object: c.Object, DedupKey: c.DedupKey, OccurredAt: at.UTC(),
		ReceivedAt: now, Seq: a.seq + 1}
	return SignalResult{Signal: s, RunIDs: a.SignalRuns(s)}, []Event{SignalRecorded{Signal: s}}, nil
}

func (a *Agent) putObjective(c PutObjective, now time.Time) (any, []Event, error) {
	if err := checkText("note", c.Note, 0, maxNoteLen); err != nil {
		return nil, nil, err
	}
	v := ObjectiveVersion{Version: len(a.objectives) + 1, Definition: c.Definition, Note: c.Note, CreatedAt: now}
	return v, []Event{ObjectivePut(v)}, nil
}

func (a *Agent) run(runID string) (*Run, error) {
	if r := a.runs[runID]; r != nil {
		return r, nil
	}
	return nil, fmt.Errorf("run %s: %w", runID, ErrNotFound)
}

// SignalRuns lists the runs a signal attaches to at this moment: an object
// signal reaches every run that has claimed the object so far.
func (a *Agent) SignalRuns(s Signal) []string {
	if s.RunID != "" {
		return []string{s.RunID}
	}
	return append([]string{}, a.objectRuns[s.Object]...)
}

func checkText(path, v string, min, max int) error {
	if len(v) < min {
		if min == 1 {
			return field.Errorf(path, "is required")
		}
		return field.Errorf(path, "must be at least %d characters", min)
	}
	if len(v) > max {
		return field.Errorf(path, "must be at most %d characters", max)
	}
	return nil
}

// CheckLabels validates free-form labels: at most 64, keys 1–317 bytes,
// values at most 256 bytes.
func CheckLabels(path string, labels map[string]string) error {
	if len(labels) > maxLabels {
		return field.Errorf(path, "at most %d labels", maxLabels)
	}
	for k, v := range labels {
		if k == "" || len(k) > maxLabelKey {
			return field.Errorf(path, "label keys must be 1-%d characters", maxLabelKey)
		}
		if len(v) > maxLabelVal {
			return field.Errorf(field.Join(path, k), "must be at most %d characters", maxLabelVal)
		}
	}
	return nil
}
