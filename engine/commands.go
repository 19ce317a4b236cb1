package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/id"
	"github.com/plaudit/plaudit/engine/objective"
)

// Commands are plain values; each is carried out by the *Agent method of
// the same name, which validates it against the current state, applies the
// events it decides on and returns its typed answer with those events, for
// the caller to persist. On error nothing changed and no event is returned.

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

// validKind reports whether s is a signal kind (or scorer): 1 to 100 of
// [a-zA-Z0-9_.-]. It is a loop, not a regexp: every signal is checked, and
// the regexp was 2% of a signal's CPU.
func validKind(s string) bool {
	if len(s) == 0 || len(s) > 100 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

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

// execute carries out one command: decide checks it against the state and
// returns the events that carry it out, which are applied before answer
// reads the result. Only CreateAgent runs before the agent exists.
func execute[R any](a *Agent, decide func() ([]Event, error), answer func() R) (R, []Event, error) {
	var zero R
	events, err := decide()
	if err != nil {
		return zero, nil, err
	}
	a.commit(events)
	return answer(), events, nil
}

// ready is ErrNotFound until the agent is created.
func (a *Agent) ready() error {
	if !a.created {
		return fmt.Errorf("agent: %w", ErrNotFound)
	}
	return nil
}

// CreatedRun is what CreateRun answers: the run and the variation chosen.
type CreatedRun struct {
	Run       Run
	Variation *Variation // nil when the agent has no variations
}

// CreateAgent creates the agent.
func (a *Agent) CreateAgent(c CreateAgent, now time.Time) (AgentInfo, []Event, error) {
	return execute(a, func() ([]Event, error) { return a.createAgent(c, now.UTC()) },
		func() AgentInfo { return a.info })
}

// CreateRun starts a run, selecting its variation.
func (a *Agent) CreateRun(c CreateRun, now time.Time, rnd *rand.Rand) (CreatedRun, []Event, error) {
	return execute(a, func() ([]Event, error) { return a.createRun(c, now.UTC(), rnd) },
		func() CreatedRun {
			cr := CreatedRun{Run: a.runs.at(a.runs.len() - 1)} // the run just created
			if v := a.variations[cr.Run.VariationID]; v != nil {
				vv := *v
				cr.Variation = &vv
			}
			return cr
		})
}

// FinishRun finishes a run and appends its run.succeeded signal.
func (a *Agent) FinishRun(c FinishRun, now time.Time, rnd *rand.Rand) (Run, []Event, error) {
	return execute(a, func() ([]Event, error) { return a.finishRun(c, now.UTC(), rnd) },
		func() Run { i, _ := a.runs.find(c.RunID); return a.runs.at(i) })
}

// ClaimObject makes a run claim an object; claiming it again changes nothing.
func (a *Agent) ClaimObject(c ClaimObject, now time.Time) (ClaimResult, []Event, error) {
	var res ClaimResult
	return execute(a, func() (evs []Event, err error) { res, evs, err = a.claimObject(c, now.UTC()); return },
		func() ClaimResult {
			if res.Created {
				i, _ := a.runs.find(res.RunID)
				claims := a.runs.claims(i)
				res.Claim = claims[len(claims)-1]
			}
			return res
		})
}

// RegisterTrace registers a model call of a run; the same trace and turn
// again changes nothing.
func (a *Agent) RegisterTrace(c RegisterTrace, now time.Time) (TraceResult, []Event, error) {
	var res TraceResult
	return execute(a, func() (evs []Event, err error) { res, evs, err = a.registerTrace(c, now.UTC()); return },
		func() TraceResult { return res })
}

// RecordSignal appends a signal, or answers the first one of its dedup key.
func (a *Agent) RecordSignal(c RecordSignal, now time.Time, rnd *rand.Rand) (SignalResult, []Event, error) {
	var res SignalResult
	return execute(a, func() (evs []Event, err error) { res, evs, err = a.recordSignal(c, now.UTC(), rnd); return },
		func() SignalResult {
			if !res.Duplicate {
				res.Signal = a.signals.At(a.signals.Len() - 1)
			}
			return res
		})
}

// PutObjective adds the next objective version.
func (a *Agent) PutObjective(c PutObjective, now time.Time) (ObjectiveVersion, []Event, error) {
	return execute(a, func() ([]Event, error) { return a.putObjective(c, now.UTC()) },
		func() ObjectiveVersion { return a.objectives[len(a.objectives)-1] })
}

func (a *Agent) createAgent(c CreateAgent, now time.Time) ([]Event, error) {
	if a.created {
		return nil, fmt.Errorf("agent %s: %w", c.ID, ErrConflict)
	}
	if err := checkText("name", c.Name, true, maxNameLen); err != nil {
		return nil, err
	}
	if err := checkText("external_id", c.ExternalID, false, maxIDLen); err != nil {
		return nil, err
	}
	if err := CheckLabels("labels", c.Labels); err != nil {
		return nil, err
	}
	mode := c.SelectionMode
	switch mode {
	case "":
		mode = SelectionWeighted
	case SelectionWeighted, SelectionRandom:
	default:
		return nil, field.Errorf("selection_mode", "must be %s or %s", SelectionWeighted, SelectionRandom)
	}
	info := AgentInfo{ID: c.ID, Workspace: c.Workspace, Name: c.Name, ExternalID: c.ExternalID,
		Labels: c.Labels, SelectionMode: mode, CreatedAt: now}
	return []Event{AgentCreated{Info: info}}, nil
}

func (a *Agent) createRun(c CreateRun, now time.Time, rnd *rand.Rand) ([]Event, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	for _, f := range []struct{ path, v string }{{"version", c.Version}, {"session_id", c.SessionID},
		{"external_id", c.ExternalID}, {"variation_id", c.VariationID}} {
		if err := checkText(f.path, f.v, false, maxIDLen); err != nil {
			return nil, err
		}
	}
	if err := CheckLabels("labels", c.Labels); err != nil {
		return nil, err
	}
	if _, taken := a.runByExternal[c.ExternalID]; c.ExternalID != "" && taken {
		return nil, fmt.Errorf("run external_id %s already used: %w", field.Quote(c.ExternalID), ErrConflict)
	}
	variation, err := a.selectVariation(c.VariationID, rnd)
	if err != nil {
		return nil, err
	}
	r := Run{ID: id.NewNumbered(id.Run, now, rnd, uint32(a.runs.len())), AgentID: a.info.ID, Version: c.Version, VariationID: variation, SessionID: c.SessionID,
		ExternalID: c.ExternalID, Labels: c.Labels, ProfileID: c.ProfileID, CreatedAt: now}
	return []Event{RunCreated{Run: r}}, nil
}

func (a *Agent) finishRun(c FinishRun, now time.Time, rnd *rand.Rand) ([]Event, error) {
	r, err := a.run(c.RunID)
	if err != nil {
		return nil, err
	}
	if r.Finished {
		return nil, fmt.Errorf("run %s already finished: %w", r.ID, ErrConflict)
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
		OccurredAt: at, ReceivedAt: now}
	return []Event{
		RunFinished{RunID: r.ID, Succeeded: c.Succeeded, FinishedAt: at},
		SignalRecorded{Signal: sig},
	}, nil
}

func (a *Agent) claimObject(c ClaimObject, now time.Time) (ClaimResult, []Event, error) {
	r, err := a.run(c.RunID)
	if err != nil {
		return ClaimResult{}, nil, err
	}
	if err := checkText("object", c.Object, true, maxObjectLen); err != nil {
		return ClaimResult{}, nil, err
	}
	for _, cl := range r.Claims {
		if cl.Object == c.Object {
			return ClaimResult{RunID: r.ID, Claim: cl}, nil, nil
		}
	}
	cl := Claim{Object: c.Object, CreatedAt: now}
	return ClaimResult{RunID: r.ID, Claim: cl, Created: true}, []Event{ObjectClaimed{RunID: r.ID, Claim: cl}}, nil
}

func (a *Agent) registerTrace(c RegisterTrace, now time.Time) (TraceResult, []Event, error) {
	r, err := a.run(c.RunID)
	if err != nil {
		return TraceResult{}, nil, err
	}
	if err := checkText("trace_id", c.TraceID, true, maxIDLen); err != nil {
		return TraceResult{}, nil, err
	}
	if err := checkText("turn_id", c.TurnID, false, maxIDLen); err != nil {
		return TraceResult{}, nil, err
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
			return TraceResult{}, nil, fmt.Errorf("trace %s is registered with turn %s: %w", t.TraceID, t.TurnID, ErrConflict)
		}
		return TraceResult{RunID: r.ID, Trace: t}, nil, nil
	}
	t := Trace{TraceID: c.TraceID, TurnID: turn, CreatedAt: now}
	return TraceResult{RunID: r.ID, Trace: t, Created: true}, []Event{TraceRegistered{RunID: r.ID, Trace: t}}, nil
}

func (a *Agent) recordSignal(c RecordSignal, now time.Time, rnd *rand.Rand) (SignalResult, []Event, error) {
	if err := a.ready(); err != nil {
		return SignalResult{}, nil, err
	}
	if !validKind(c.Kind) {
		return SignalResult{}, nil, field.Errorf("kind", "must match ^[a-zA-Z0-9_.-]{1,100}$")
	}
	if math.IsNaN(c.Value) || math.IsInf(c.Value, 0) {
		return SignalResult{}, nil, field.Errorf("value", "must be a finite number")
	}
	subjects := 0
	for _, s := range []string{c.RunID, c.SessionID, c.Object} {
		if s != "" {
			subjects++
		}
	}
	if subjects != 1 {
		return SignalResult{}, nil, field.Errorf("", "exactly one of run_id, session_id or object is required")
	}
	if err := checkText("dedup_key", c.DedupKey, false, maxIDLen); err != nil {
		return SignalResult{}, nil, err
	}
	if err := checkText("object", c.Object, false, maxObjectLen); err != nil {
		return SignalResult{}, nil, err
	}
	if err := checkText("session_id", c.SessionID, false, maxIDLen); err != nil {
		return SignalResult{}, nil, err
	}
	if c.DedupKey != "" {
		if i, ok := a.signals.byDedupKey(c.DedupKey); ok {
			s := a.signals.At(i)
			return SignalResult{Signal: s, RunIDs: a.SignalRuns(s), Duplicate: true}, nil, nil
		}
	}
	runID := c.RunID
	switch {
	case c.RunID != "":
		if _, err := a.run(c.RunID); err != nil {
			return SignalResult{}, nil, err
		}
	case c.SessionID != "":
		i, ok := a.sessionLatest[c.SessionID]
		if !ok {
			return SignalResult{}, nil, fmt.Errorf("session %s has no finished run: %w", c.SessionID, ErrNotFound)
		}
		runID = a.runs.id(int(i))
	}
	at := c.OccurredAt
	if at.IsZero() {
		at = now
	}
	s := Signal{ID: id.New(id.Signal, now, rnd), Kind: c.Kind, Value: c.Value, RunID: runID,
		SessionID: c.SessionID, Object: c.Object, DedupKey: c.DedupKey, OccurredAt: at.UTC(), ReceivedAt: now}
	return SignalResult{Signal: s, RunIDs: a.SignalRuns(s)}, []Event{SignalRecorded{Signal: s}}, nil
}

func (a *Agent) putObjective(c PutObjective, now time.Time) ([]Event, error) {
	if err := a.ready(); err != nil {
		return nil, err
	}
	if err := checkText("note", c.Note, false, maxNoteLen); err != nil {
		return nil, err
	}
	return []Event{ObjectivePut{Version: len(a.objectives) + 1, Definition: c.Definition, Note: c.Note, CreatedAt: now}}, nil
}

func (a *Agent) run(runID string) (Run, error) {
	r, _, err := a.runIndex(runID)
	return r, err
}

// runIndex finds a run and its number.
func (a *Agent) runIndex(runID string) (Run, int, error) {
	if i, ok := a.runs.find(runID); ok {
		return a.runs.at(i), i, nil
	}
	return Run{}, -1, fmt.Errorf("run %s: %w", runID, ErrNotFound)
}

// SignalRuns lists the runs a signal attaches to at this moment: an object
// signal reaches every run that has claimed the object so far.
func (a *Agent) SignalRuns(s Signal) []string {
	if s.RunID != "" {
		return []string{s.RunID}
	}
	return append([]string{}, a.objectRuns[s.Object]...)
}

func checkText(path, v string, required bool, max int) error {
	if required && v == "" {
		return field.Errorf(path, "is required")
	}
	if len(v) > max {
		return field.Errorf(path, "must be at most %d bytes", max)
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
			return field.Errorf(field.Join(path, k), "label keys must be 1-%d bytes", maxLabelKey)
		}
		if len(v) > maxLabelVal {
			return field.Errorf(field.Join(path, k), "must be at most %d bytes", maxLabelVal)
		}
	}
	return nil
}
