package engine

import "fmt"

// Agent is the in-memory state of one agent. It is not safe for concurrent
// use: one actor owns it. The views it hands out (State, VersionSummary)
// are, as they share only what it never changes.
type Agent struct {
	info    AgentInfo
	created bool

	runs          *runTable        // creation order, indexed by id; nil before the first
	runByExternal map[string]int32 // external id → run number
	// sessionLatest is, per session, the finished run with the latest finished_at.
	sessionLatest map[string]int32    // → run number
	objectRuns    map[string][]string // object → ids of the runs that claimed it, in claim order

	signals SignalLog // receipt order, indexed by run, object and dedup key

	objectives []ObjectiveVersion // objectives[i].Version == i+1

	variations    map[string]*Variation
	variationList []*Variation // creation order
	feedback      feedbackLog  // append order

	reports *reportTable // standing reports, first-made order, by (run, scorer, turn); nil before the first

	seq uint64 // events applied so far = sequence of the last event

	read      *rewardRead  // reused by reward reads; nil before the first
	summaries summaryCache // version summaries since the last event

	// previews are the open previews, which apply tells of what it
	// overwrites in place (see Preview); nil but while one runs.
	previews []*Preview
}

// NewAgent returns an empty agent; its first event must be AgentCreated.
func NewAgent() *Agent { return &Agent{} }

// makeIndexes makes the agent's maps, at its first event after
// AgentCreated: an idle agent, created and then never used, keeps none.
func (a *Agent) makeIndexes() {
	a.runByExternal = map[string]int32{}
	a.sessionLatest = map[string]int32{}
	a.objectRuns = map[string][]string{}
	a.variations = map[string]*Variation{}
}

// Info describes the agent; zero until AgentCreated is applied.
func (a *Agent) Info() AgentInfo { return a.info }

// Created reports whether the agent exists.
func (a *Agent) Created() bool { return a.created }

// LastSeq is the sequence number of the last applied event.
func (a *Agent) LastSeq() uint64 { return a.seq }

// Replay applies one persisted event; seq must follow LastSeq.
func (a *Agent) Replay(seq uint64, ev Event) error {
	if seq != a.seq+1 {
		return fmt.Errorf("engine: replay event %d after %d", seq, a.seq)
	}
	if err := a.apply(seq, ev); err != nil {
		return err
	}
	a.seq = seq
	return nil
}

// ReplayEncoded is Replay of an event's encoding (AppendEvent's), as the log
// holds it. A signal goes from its bytes into the log's record, as a
// snapshot's do (SignalLog.addEncoded), which is what applying it does;
// every other event is decoded and applied.
func (a *Agent) ReplayEncoded(seq uint64, b []byte) error {
	if len(b) < 2 || b[0] != codecVersion || eventType(b[1]) != evSignalRecorded {
		ev, err := DecodeEvent(b)
		if err != nil {
			return err
		}
		return a.Replay(seq, ev)
	}
	if seq != a.seq+1 {
		return fmt.Errorf("engine: replay event %d after %d", seq, a.seq)
	}
	r := &reader{b: b[2:]}
	e := r.encodedSignal()
	if err := r.done(); err != nil {
		return err
	}
	if a.runByExternal == nil {
		a.makeIndexes() // as apply does for every event but AgentCreated
	}
	run, ok := e.runIn(a.runs)
	if !ok {
		return fmt.Errorf("engine: signal of unknown run %s", e.runID)
	}
	e.seq = seq // apply stamps a signal's seq
	a.signals.addEncoded(&e, run)
	a.seq = seq
	return nil
}

// commit applies events a command decided on, numbering them after LastSeq.
func (a *Agent) commit(events []Event) {
	for _, ev := range events {
		if err := a.apply(a.seq+1, ev); err != nil {
			// A decided event that does not apply is a bug, not bad input.
			panic(err)
		}
		a.seq++
	}
}

// apply is the one place state changes: live (commit), on replay of the
// log (Replay) and on restore from a snapshot (Restore). seq is the
// sequence number of the event; apply stamps it on what the event records
// (signals, claims, reports), so no command has to predict it.
func (a *Agent) apply(seq uint64, ev Event) error {
	if _, creation := ev.(AgentCreated); !creation && a.runByExternal == nil {
		a.makeIndexes()
	}
	switch e := ev.(type) {
	case AgentCreated:
		a.info = e.Info
		a.created = true
	case RunCreated:
		r := e.Run
		i := int32(a.runs.len())
		if a.runs == nil {
			a.runs = &runTable{}
		}
		a.runs.add(r)
		a.signals.addRun(r.ID)
		if r.ExternalID != "" {
			a.runByExternal[r.ExternalID] = i
		}
	case RunFinished:
		i, ok := a.runs.find(e.RunID)
		if !ok {
			return fmt.Errorf("engine: finish of unknown run %s", e.RunID)
		}
		if len(a.previews) > 0 {
			a.noteFinish(i)
		}
		a.runs.finish(i, e.Succeeded, e.FinishedAt)
		a.noteSessionFinish(i)
	case ObjectClaimed:
		i, ok := a.runs.find(e.RunID)
		if !ok {
			return fmt.Errorf("engine: claim of unknown run %s", e.RunID)
		}
		cl := e.Claim
		cl.Seq = seq
		x := a.runs.mutExtra(i)
		x.claims = append(x.claims, cl)
		a.objectRuns[cl.Object] = append(a.objectRuns[cl.Object], a.runs.id(i))
	case TraceRegistered:
		i, ok := a.runs.find(e.RunID)
		if !ok {
			return fmt.Errorf("engine: trace of unknown run %s", e.RunID)
		}
		x := a.runs.mutExtra(i)
		x.traces = append(x.traces, e.Trace)
	case SignalRecorded:
		s := e.Signal
		s.Seq = seq
		run := -1
		if s.RunID != "" {
			var ok bool
			if run, ok = a.runs.find(s.RunID); !ok {
				return fmt.Errorf("engine: signal of unknown run %s", s.RunID)
			}
		}
		a.signals.add(s, run)
	case VariationCreated:
		v := e.Variation
		a.variations[v.ID] = &v
		a.variationList = append(a.variationList, &v)
	case FeedbackRecorded:
		a.applyFeedback(e.Feedback)
	case ReportRecorded:
		rep := e.Report
		rep.Seq = seq
		if err := a.applyReport(rep); err != nil {
			return err
		}
	case ObjectivePut:
		if e.Version != len(a.objectives)+1 {
			return fmt.Errorf("engine: objective version %d after %d", e.Version, len(a.objectives))
		}
		a.objectives = append(a.objectives, ObjectiveVersion(e))
	default:
		return fmt.Errorf("engine: unknown event %T", ev)
	}
	return nil
}

// noteSessionFinish keeps, per session, the finished run with the latest
// finished_at; ties go to the later-created run (the later in the run
// table: ids of one millisecond are in no order), so live apply and
// Restore agree.
func (a *Agent) noteSessionFinish(i int) {
	r := a.runs.at(i)
	if r.SessionID == "" || !r.Finished {
		return
	}
	if j, ok := a.sessionLatest[r.SessionID]; ok {
		cur := a.runs.at(int(j))
		if !r.FinishedAt.After(cur.FinishedAt) && !(r.FinishedAt.Equal(cur.FinishedAt) && i > int(j)) {
			return
		}
	}
	a.sessionLatest[r.SessionID] = int32(i)
}
