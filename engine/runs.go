package engine

import (
	"iter"
	"time"

	"github.com/plaudit/plaudit/engine/id"
	"github.com/plaudit/plaudit/engine/objective"
)

// runTable holds an agent's runs in creation order, numbered from 0 as the
// signal log numbers them. A selecting agent keeps a run per selection, so
// each run is a fixed-size record without pointers, as signals are:
//
//   - the version, variation, session and profile are interned in names;
//   - times are Unix nanoseconds;
//   - the id is kept once, in ids, which the index maps back into.
//
// What few runs have goes to a side table (extras), by run number: an
// external id, labels, claims, traces, and what a record cannot hold (a
// time outside Unix nanoseconds, an agent id not the agent's own). Keyed by
// run number rather than kept in the order runs first needed one, it is the
// same however the runs were rebuilt (live, from the log, from a snapshot),
// which orders claims and traces differently.
//
// The rejected alternative is a *Run per run, as the table held until
// 2026-12-04: 240 bytes and ten pointers each, which the collector scanned
// on every cycle, and a copy of the Run for every change.
//
// A run changes after it is made (finished, claims, traces), so records
// and extras are kept in copy-on-write blocks: a view shares them, and a
// block a view holds is copied before one of its runs changes.
// The zero runTable is empty, and so is a nil one, which is what an agent
// that never had a run holds; a view has no index.
type runTable struct {
	recs   cowChunked[runRecord]
	ids    chunked[string]
	extras cowSparse[runExtra]
	names  names
	agent  string   // the agent id of the first run, which nearly every run names
	index  runIndex // id → number; made at the first run, none in a view
}

// runRecord is one run: 40 bytes, no pointers.
type runRecord struct {
	created   stamp // noTime: zero, or in the extra when runFarCreated is set
	finished  stamp // likewise, runFarFinished
	version   uint32
	variation uint32
	session   uint32
	profile   uint32
	flags     runFlags
}

type runFlags uint8

const (
	runFinished runFlags = 1 << iota
	runSucceeded
	runFarCreated  // CreatedAt is extra.created
	runFarFinished // FinishedAt is extra.finished
	runOtherAgent  // AgentID is extra.agentID, not the table's
)

// runExtra is what few runs carry.
type runExtra struct {
	agentID, externalID string
	labels              map[string]string
	claims              []Claim
	traces              []Trace
	created, finished   time.Time // only when the record cannot hold them
}

// len is the number of runs.
func (t *runTable) len() int {
	if t == nil {
		return 0
	}
	return t.recs.Len()
}

// add appends r as the next run.
func (t *runTable) add(r Run) {
	if t.index.ulids == nil {
		t.index = newRunIndex()
		t.agent = r.AgentID
	}
	n := int32(t.len())
	t.index.put(r.ID, n)
	t.ids.Append(r.ID)
	rec := runRecord{version: t.names.intern(r.Version), variation: t.names.intern(r.VariationID),
		session: t.names.intern(r.SessionID), profile: t.names.intern(r.ProfileID)}
	x := runExtra{externalID: r.ExternalID, labels: r.Labels, claims: r.Claims, traces: r.Traces}
	if r.AgentID != t.agent {
		x.agentID, rec.flags = r.AgentID, rec.flags|runOtherAgent
	}
	if s, ok := exactStamp(r.CreatedAt); ok {
		rec.created = s
	} else {
		rec.created, x.created, rec.flags = noTime, r.CreatedAt, rec.flags|runFarCreated
	}
	t.setFinished(&rec, &x, r.Finished, r.Succeeded, r.FinishedAt)
	// nil and empty differ: each reads back as it was given.
	if x.externalID != "" || x.labels != nil || x.claims != nil || x.traces != nil ||
		rec.flags&(runOtherAgent|runFarCreated|runFarFinished) != 0 {
		*t.extras.mut(int(n)) = x
	}
	t.recs.Append(rec)
}

// setFinished sets the record's status and finish time, the time in x
// when the record cannot hold it.
func (t *runTable) setFinished(rec *runRecord, x *runExtra, finished, succeeded bool, at time.Time) {
	rec.flags &^= runFinished | runSucceeded | runFarFinished
	if finished {
		rec.flags |= runFinished
	}
	if succeeded {
		rec.flags |= runSucceeded
	}
	x.finished = time.Time{}
	if s, ok := exactStamp(at); ok {
		rec.finished = s
		return
	}
	rec.finished, x.finished, rec.flags = noTime, at, rec.flags|runFarFinished
}

// find returns the number of the run with that id: the number the id
// carries, when the run so numbered has that id, else the index's.
func (t *runTable) find(runID string) (int, bool) {
	if t == nil || t.index.ulids == nil {
		return -1, false
	}
	var (
		n  int32
		ok bool
	)
	if u, isULID := id.Parse(id.Run, runID); isULID {
		if c := int(id.Number(u)); c < t.len() && t.id(c) == runID {
			return c, true
		}
		n, ok = t.index.getULID(u)
	} else {
		n, ok = t.index.getOdd(runID)
	}
	if !ok {
		return -1, false
	}
	return int(n), true
}

// id returns the id of run i.
func (t *runTable) id(i int) string { return *t.ids.At(i) }

// version returns the version of run i.
func (t *runTable) version(i int) string { return t.names.at(t.recs.At(i).version) }

// claims returns the claims of run i, capped so that later claims never
// show in what it returns.
func (t *runTable) claims(i int) []Claim {
	if x := t.extras.at(i); x != nil {
		return capped(x.claims)
	}
	return nil
}

// at returns run i; its slices are capped, so later changes never show.
func (t *runTable) at(i int) Run {
	rec := t.recs.At(i)
	r := Run{ID: t.id(i), AgentID: t.agent, Version: t.names.at(rec.version), VariationID: t.names.at(rec.variation),
		SessionID: t.names.at(rec.session), ProfileID: t.names.at(rec.profile),
		CreatedAt: rec.created.exact(), Finished: rec.flags&runFinished != 0, Succeeded: rec.flags&runSucceeded != 0,
		FinishedAt: rec.finished.exact()}
	x := t.extras.at(i)
	if x == nil {
		return r
	}
	if rec.flags&runOtherAgent != 0 {
		r.AgentID = x.agentID
	}
	r.ExternalID, r.Labels, r.Claims, r.Traces = x.externalID, x.labels, capped(x.claims), capped(x.traces)
	if rec.flags&runFarCreated != 0 {
		r.CreatedAt = x.created
	}
	if rec.flags&runFarFinished != 0 {
		r.FinishedAt = x.finished
	}
	return r
}

// objectiveRun is run i as the reward evaluator reads it.
func (t *runTable) objectiveRun(i int) objective.Run {
	rec := t.recs.At(i)
	r := objective.Run{ID: t.id(i), Finished: rec.flags&runFinished != 0, FinishedAt: rec.finished.exact()}
	if rec.flags&runFarFinished != 0 {
		r.FinishedAt = t.extras.at(i).finished
	}
	return r
}

// finish finishes run i.
func (t *runTable) finish(i int, succeeded bool, at time.Time) {
	rec := t.recs.mut(i)
	var x runExtra
	t.setFinished(rec, &x, true, succeeded, at)
	if rec.flags&runFarFinished != 0 {
		t.mutExtra(i).finished = x.finished
	}
}

// mutExtra returns run i's extra to change in place; valid until the
// table's next change or view.
func (t *runTable) mutExtra(i int) *runExtra { return t.extras.mut(i) }

// All yields every run in creation order.
func (t *runTable) All() iter.Seq[Run] {
	return func(yield func(Run) bool) {
		for i := range t.len() {
			if !yield(t.at(i)) {
				return
			}
		}
	}
}

// view is an immutable copy: later runs and changes never show in it.
func (t *runTable) view() runTable {
	if t == nil {
		return runTable{}
	}
	return runTable{recs: t.recs.view(), ids: t.ids.view(), extras: t.extras.view(), names: t.names.view(), agent: t.agent}
}
