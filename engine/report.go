package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/id"
	"github.com/plaudit/plaudit/engine/objective"
)

// ErrSuperseded means a report lost a race: a report for the same (scorer,
// turn) whose request started later already stands.
var ErrSuperseded = errors.New("reward superseded")

// Report kinds of seed 001.
const (
	ReportExternal = "external"
	ReportReview   = "review"
	ReportChoice   = "choice"
)

// Report is a scorer's reward for a run (seed 001's job), one per (scorer,
// turn): reporting again replaces it under the same id.
type Report struct {
	ID        string
	RunID     string
	Kind      string
	Scorer    string
	TurnID    string
	TraceID   string
	Value     *float64
	Weight    float64
	Detail    string // raw JSON object, "" when none
	Shown     string // choice: raw JSON array of the items shown
	Chosen    string // choice: raw JSON of the chosen item, "null" when none
	Prompt    string // choice
	CreatedAt time.Time
	UpdatedAt time.Time
	// Started orders racing reports: the stamp the door gave the request
	// when it admitted it. A report started before the standing one loses.
	Started uint64
	Seq     uint64 // sequence of the event that last set it
}

// ReportReward records a report. The door has validated the shape (kinds,
// ranges, detail, choice items); the engine checks what needs state.
type ReportReward struct {
	RunID                         string
	Kind, Scorer, TurnID, TraceID string
	Value                         *float64
	Weight                        float64
	Detail, Shown, Chosen, Prompt string
	Started                       uint64
}

// ReportRecorded sets the report for its (scorer, turn).
type ReportRecorded struct{ Report Report }

func (ReportRecorded) eventType() eventType { return evReportRecorded }

// ReportReward records a report, or replaces the standing one of its
// (scorer, turn) unless that one started later (ErrSuperseded).
func (a *Agent) ReportReward(c ReportReward, now time.Time, rnd *rand.Rand) (Report, []Event, error) {
	var rep Report
	return execute(a, func() (evs []Event, err error) { rep, evs, err = a.reportReward(c, now.UTC(), rnd); return },
		func() Report {
			run, _ := a.runs.find(rep.RunID)
			n, _ := a.reports.find(run, rep.Scorer, rep.TurnID) // it stands now, made or replaced
			return a.reports.at(n, a.runs)
		})
}

func (a *Agent) reportReward(c ReportReward, now time.Time, rnd *rand.Rand) (Report, []Event, error) {
	r, run, err := a.runIndex(c.RunID)
	if err != nil {
		return Report{}, nil, err
	}
	if !validKind(c.Scorer) {
		return Report{}, nil, field.Errorf("scorer", "must match ^[a-zA-Z0-9_.-]{1,100}$")
	}
	if c.Value != nil && (math.IsNaN(*c.Value) || math.IsInf(*c.Value, 0)) {
		return Report{}, nil, field.Errorf("value", "must be a finite number")
	}
	turn := c.TurnID
	if c.TraceID != "" {
		var trace *Trace
		for i := range r.Traces {
			if r.Traces[i].TraceID == c.TraceID {
				trace = &r.Traces[i]
			}
		}
		if trace == nil {
			return Report{}, nil, field.Errorf("trace_id", "%q is not a registered trace of job %s", c.TraceID, r.ID)
		}
		if c.TurnID != "" && c.TurnID != trace.TurnID {
			return Report{}, nil, field.Errorf("turn_id", "%q conflicts with trace %s, which is turn %q", c.TurnID, c.TraceID, trace.TurnID)
		}
		turn = trace.TurnID
	}
	rep := Report{RunID: r.ID, Kind: c.Kind, Scorer: c.Scorer, TurnID: turn, TraceID: c.TraceID, Value: c.Value,
		Weight: c.Weight, Detail: c.Detail, Shown: c.Shown, Chosen: c.Chosen, Prompt: c.Prompt,
		CreatedAt: now, UpdatedAt: now, Started: c.Started}
	if n, ok := a.reports.find(run, c.Scorer, turn); ok {
		cur := a.reports.at(n, a.runs)
		if c.Started < cur.Started {
			return Report{}, nil, fmt.Errorf("report %s for (%s, %q) was replaced by a later request: %w", cur.ID, c.Scorer, turn, ErrSuperseded)
		}
		rep.ID, rep.CreatedAt = cur.ID, cur.CreatedAt
	} else {
		rep.ID = id.New(id.Report, now, rnd)
	}
	return rep, []Event{ReportRecorded{Report: rep}}, nil
}

func (a *Agent) applyReport(rep Report) error {
	run, ok := a.runs.find(rep.RunID)
	if !ok {
		return fmt.Errorf("engine: report of unknown run %s", rep.RunID)
	}
	if a.reports == nil {
		a.reports = &reportTable{}
	}
	a.reports.set(rep, run)
	return nil
}

// Reports lists a run's standing reports in the order they were first made.
func (a *Agent) Reports(runID string) ([]Report, error) {
	_, run, err := a.runIndex(runID)
	if err != nil {
		return nil, err
	}
	idx := a.reports.ofRun(run)
	out := make([]Report, len(idx))
	for i, n := range idx {
		out[i] = a.reports.at(int(n), a.runs)
	}
	return out, nil
}

// Feedback lists a run's feedback records in append order.
func (a *Agent) RunFeedback(runID string) []Feedback {
	var out []Feedback
	run := -1
	if i, ok := a.runs.find(runID); ok {
		run = i
	}
	for i := range a.feedback.Len() {
		if a.feedback.ofRun(i, run, runID) {
			out = append(out, a.feedback.at(i, &a.signals))
		}
	}
	return out
}

// reportObservations appends, for the reward evaluator reading run number
// run (as r) under def, a signal of kind = scorer per report with a value
// as it stood at event upTo (math.MaxUint64: now), its kind numbered by
// codes (see codesFor); for one replaced after the run's deadline, also
// the value it held by then, which the reward uses in its place (see
// reportTable.appendObserved).
func (a *Agent) reportObservations(run int, r objective.Run, def objective.Definition, buf []objective.Observation,
	codes kindCodes, upTo uint64) []objective.Observation {
	deadline, closes := def.Deadline(r)
	for _, n := range a.reports.ofRun(run) {
		buf = a.reports.appendObserved(buf, int(n), codes, upTo, deadline, closes)
	}
	return buf
}

// evalCodes numbers the kinds a Kinds lists among the names of the
// agent's signals and of its reports, for the observations of a reward
// evaluation.
type evalCodes struct {
	signals, reports kindCodes
}

// codesFor fills c for k.
func (a *Agent) codesFor(c *evalCodes, k *objective.Kinds) {
	c.signals = a.signals.names.codes(c.signals, k)
	c.reports = c.reports[:0]
	if a.reports != nil {
		c.reports = a.reports.names.codes(c.reports, k)
	}
}
