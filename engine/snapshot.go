package engine

import (
	"slices"
	"time"
)

// State is an immutable view of an agent, cheap to take inside the actor and
// safe to encode outside it: its slices are capped prefixes of append-only
// slices, and runs are copied by value.
type State struct {
	Info       AgentInfo
	Created    bool
	Runs       []Run
	Signals    []Signal
	Objectives []ObjectiveVersion
	Variations []Variation
	Feedback   []Feedback
	Reports    []Report
	Seq        uint64
}

// Snapshot returns a view of the agent as of LastSeq.
func (a *Agent) Snapshot() State {
	runs := make([]Run, len(a.runList))
	for i, r := range a.runList {
		runs[i] = a.runView(r)
	}
	return State{
		Info:       a.info,
		Created:    a.created,
		Runs:       runs,
		Signals:    a.signals[:len(a.signals):len(a.signals)],
		Objectives: a.objectives[:len(a.objectives):len(a.objectives)],
		Variations: a.Variations(),
		Feedback:   a.feedback[:len(a.feedback):len(a.feedback)],
		Reports:    a.allReports(),
		Seq:        a.seq,
	}
}

// Restore rebuilds an agent from a snapshot view, indexes included.
func Restore(s State) *Agent {
	a := NewAgent()
	a.info, a.created, a.seq = s.Info, s.Created, s.Seq
	for i := range s.Runs {
		r := s.Runs[i]
		claims, traces := r.Claims, r.Traces
		r.Claims, r.Traces = nil, nil
		a.runs[r.ID] = &r
		a.runList = append(a.runList, &r)
		if r.ExternalID != "" {
			a.runByExternal[r.ExternalID] = &r
		}
		for _, cl := range claims {
			r.Claims = append(r.Claims, cl)
			a.objectRuns[cl.Object] = append(a.objectRuns[cl.Object], r.ID)
		}
		r.Traces = append(r.Traces, traces...)
	}
	// objectRuns lists each object's runs in claim order, as apply built it.
	for obj, ids := range a.objectRuns {
		slices.SortStableFunc(ids, func(x, y string) int {
			return claimTime(a.runs[x], obj).Compare(claimTime(a.runs[y], obj))
		})
	}
	for _, r := range a.runList {
		if r.Finished && r.SessionID != "" {
			a.noteSessionFinish(r)
		}
	}
	for _, sig := range s.Signals {
		a.addSignal(sig)
	}
	a.objectives = append(a.objectives, s.Objectives...)
	for i := range s.Variations {
		v := s.Variations[i]
		a.variations[v.ID] = &v
		a.variationList = append(a.variationList, &v)
	}
	a.feedback = append(a.feedback, s.Feedback...)
	for _, rep := range s.Reports {
		a.applyReport(rep)
	}
	return a
}

func claimTime(r *Run, obj string) time.Time {
	for _, cl := range r.Claims {
		if cl.Object == obj {
			return cl.CreatedAt
		}
	}
	return time.Time{}
}

// allReports copies every standing report, run by run in run order, each
// run's in first-made order, so Restore rebuilds the same lists.
func (a *Agent) allReports() []Report {
	var out []Report
	for _, r := range a.runList {
		for _, p := range a.runReports[r.ID] {
			out = append(out, *p)
		}
	}
	return out
}
