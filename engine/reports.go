package engine

import (
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/plaudit/plaudit/engine/id"
	"github.com/plaudit/plaudit/engine/objective"
)

// reportTable holds an agent's standing reports in first-made order,
// numbered from 0. A reporting agent keeps one per (run, scorer, turn), so
// each is a fixed-size record without pointers, as signals and runs are:
//
//   - the run is its number in the run table;
//   - the scorer and the turn, which make the key and never change, are
//     interned in names; the kind is one of seed 001's three;
//   - the id is the 16 bytes of its ULID, written "rpt_" + base 32 on read;
//   - times are Unix nanoseconds.
//
// A trace id, a detail, a choice's items and prompt go to a side table by
// report number (extras), and so does what a record cannot hold: an id
// that is not "rpt_" + a ULID, another kind, a time outside Unix
// nanoseconds.
//
// The rejected alternative is a Report per report, as the agent held until
// 2026-12-04: about 325 bytes with its strings, thirteen pointers the
// collector scanned on every cycle, and its key of three strings in a map.
//
// A report is replaced in place (reporting again under its key), so records
// and extras are kept in copy-on-write blocks, as runs are. What a
// replaced report held is kept in earlier, by report number: a replacement
// received after its run's horizon is late, and the reward goes on using
// the value that stood at the horizon (see appendObserved). The zero
// reportTable is empty, and so is a nil one, which is what an agent that
// never had a report holds; a view has no index.
type reportTable struct {
	recs    cowChunked[reportRecord]
	extras  cowSparse[reportExtra]
	earlier cowSparse[[]reportVersion] // a replaced report's values before the standing one, oldest first
	names   names
	keys    map[reportKey]int32 // made at the first report; none in a view
	byRun   map[int32][]int32   // run number → its reports, first-made order; none in a view
}

type reportKey struct {
	run          int32
	scorer, turn uint32
}

// reportRecord is one standing report: 80 bytes, no pointers.
type reportRecord struct {
	id      ulid.ULID // zero: the id is in the extra
	value   float64   // when hasValue
	weight  float64
	created stamp // noTime: zero, or in the extra when reportFarCreated is set
	updated stamp // likewise, reportFarUpdated
	started uint64
	seq     uint64
	run     int32
	scorer  uint32
	turn    uint32
	kind    reportKind
	flags   reportFlags
}

type reportKind uint8

const (
	reportOtherKind reportKind = iota // the kind is in the extra
	reportExternalKind
	reportReviewKind
	reportChoiceKind
)

var reportKinds = [...]string{reportExternalKind: ReportExternal, reportReviewKind: ReportReview, reportChoiceKind: ReportChoice}

type reportFlags uint8

const (
	reportHasValue reportFlags = 1 << iota
	reportFarCreated
	reportFarUpdated
)

// reportVersion is a value a report held before a replacement: 40 bytes,
// no pointers.
type reportVersion struct {
	at     objective.Instant // its updated_at
	value  float64           // when valued
	seq    uint64
	valued bool
}

// reportExtra is what few reports carry.
type reportExtra struct {
	traceID, detail, shown, chosen, prompt string
	odd                                    *oddReport // nil but for what a record cannot hold
}

type oddReport struct {
	id, kind         string    // "" when the record holds it
	created, updated time.Time // when the record cannot hold them
}

// len is the number of reports.
func (t *reportTable) len() int {
	if t == nil {
		return 0
	}
	return t.recs.Len()
}

// find returns the number of the report of run number run under (scorer,
// turn).
func (t *reportTable) find(run int, scorer, turn string) (int, bool) {
	if t == nil {
		return -1, false
	}
	s, ok := t.names.find(scorer)
	if !ok {
		return -1, false
	}
	tu, ok := t.names.find(turn)
	if !ok {
		return -1, false
	}
	n, ok := t.keys[reportKey{int32(run), s, tu}]
	if !ok {
		return -1, false
	}
	return int(n), true
}

// set makes rep, of run number run, the report under its key: a new one,
// or in place of the one standing.
func (t *reportTable) set(rep Report, run int) {
	if t.keys == nil {
		t.keys, t.byRun = map[reportKey]int32{}, map[int32][]int32{}
	}
	k := reportKey{int32(run), t.names.intern(rep.Scorer), t.names.intern(rep.TurnID)}
	rec, x := reportRecord{run: k.run, scorer: k.scorer, turn: k.turn, weight: rep.Weight, started: rep.Started,
		seq: rep.Seq}, reportExtra{traceID: rep.TraceID, detail: rep.Detail, shown: rep.Shown, chosen: rep.Chosen,
		prompt: rep.Prompt}
	var odd oddReport
	isOdd := false
	if u, ok := recordID(id.Report, rep.ID); ok {
		rec.id = u
	} else {
		odd.id, isOdd = rep.ID, true
	}
	if rep.Value != nil {
		rec.value, rec.flags = *rep.Value, rec.flags|reportHasValue
	}
	for kind, name := range reportKinds {
		if name != "" && name == rep.Kind {
			rec.kind = reportKind(kind)
		}
	}
	if rec.kind == reportOtherKind {
		odd.kind, isOdd = rep.Kind, true
	}
	if s, ok := exactStamp(rep.CreatedAt); ok {
		rec.created = s
	} else {
		rec.created, odd.created, isOdd = noTime, rep.CreatedAt, true
		rec.flags |= reportFarCreated
	}
	if s, ok := exactStamp(rep.UpdatedAt); ok {
		rec.updated = s
	} else {
		rec.updated, odd.updated, isOdd = noTime, rep.UpdatedAt, true
		rec.flags |= reportFarUpdated
	}
	if isOdd {
		x.odd = &odd
	}
	n, standing := t.keys[k]
	if !standing {
		n = int32(t.len())
		t.recs.Append(rec)
		t.keys[k] = n
		t.byRun[k.run] = append(t.byRun[k.run], n)
	} else {
		cur := t.version(int(n))
		e := t.earlier.mut(int(n))
		*e = append(*e, cur)
		*t.recs.mut(int(n)) = rec
	}
	switch cur := t.extras.at(int(n)); {
	case x != (reportExtra{}):
		*t.extras.mut(int(n)) = x
	case cur != nil && *cur != (reportExtra{}):
		// A replacement without what the report had: its block goes
		// once none of its reports has any, as if never made.
		*t.extras.mut(int(n)) = x
		unsetSparse(&t.extras, int(n))
	}
}

// replacedOf reports whether a report of run number run was ever
// replaced.
func (t *reportTable) replacedOf(run int) bool {
	for _, n := range t.ofRun(run) {
		if len(t.earlierVersions(int(n))) > 0 {
			return true
		}
	}
	return false
}

// ofRun lists the reports of run number run in first-made order.
func (t *reportTable) ofRun(run int) []int32 {
	if t == nil {
		return nil
	}
	return t.byRun[int32(run)]
}

// record returns report n's record.
func (t *reportTable) record(n int) reportRecord { return *t.recs.At(n) }

// version is what report n holds now, as earlier keeps it once replaced.
func (t *reportTable) version(n int) reportVersion {
	rec := t.recs.At(n)
	at := rec.updated.instant()
	if rec.flags&reportFarUpdated != 0 {
		at = objective.InstantOf(t.extras.at(n).odd.updated)
	}
	return reportVersion{at: at, value: rec.value, seq: rec.seq, valued: rec.flags&reportHasValue != 0}
}

// earlierVersions returns what report n held before the standing value,
// oldest first.
func (t *reportTable) earlierVersions(n int) []reportVersion {
	if p := t.earlier.at(n); p != nil {
		return *p
	}
	return nil
}

// appendObserved appends report n as a reward read with deadline (a
// finished run's, see objective.Definition.Deadline; none when closes is
// false) uses it, as of event upTo: the value standing then, a signal of
// kind = scorer numbered by codes; and when that came after the deadline,
// which makes it late, also the last value the report held by the
// deadline, which the reward uses in its place. A report without a value
// is no signal.
func (t *reportTable) appendObserved(buf []objective.Observation, n int, codes kindCodes, upTo uint64,
	deadline objective.Instant, closes bool) []objective.Observation {
	cur, before := t.version(n), t.earlierVersions(n)
	if cur.seq > upTo {
		k := 0
		for k < len(before) && before[k].seq <= upTo {
			k++
		}
		if k == 0 {
			return buf // made after upTo
		}
		cur, before = before[k-1], before[:k-1]
	}
	kind := codes.of(t.recs.At(n).scorer)
	if cur.valued {
		buf = append(buf, cur.observation(kind))
	}
	if !closes || !objective.Late(cur.at, deadline) {
		return buf
	}
	for i := len(before) - 1; i >= 0; i-- {
		if v := before[i]; !objective.Late(v.at, deadline) {
			if v.valued {
				buf = append(buf, v.observation(kind))
			}
			break
		}
	}
	return buf
}

// as is rep as it was when it held v: what the event that set v set, but
// for what the report's later versions changed too (the trace, the
// detail), which no reward reads.
func (v reportVersion) as(rep Report) Report {
	rep.Value, rep.UpdatedAt, rep.Seq = nil, v.at.Time(), v.seq
	if v.valued {
		x := v.value
		rep.Value = &x
	}
	return rep
}

// replaced reports whether any report was ever replaced.
func (t *reportTable) replaced() bool {
	if t == nil {
		return false
	}
	for _, b := range t.earlier.blocks {
		for _, e := range b {
			if len(e) > 0 {
				return true
			}
		}
	}
	return false
}

func (v reportVersion) observation(kind int32) objective.Observation {
	return objective.Observation{Kind: kind, Value: v.value, Occurred: v.at, Received: v.at, Seq: v.seq}
}

// at returns report n; runs names its run.
func (t *reportTable) at(n int, runs *runTable) Report {
	rec := t.recs.At(n)
	rep := Report{RunID: runs.id(int(rec.run)), Kind: reportKinds[rec.kind], Scorer: t.names.at(rec.scorer),
		TurnID: t.names.at(rec.turn), Weight: rec.weight, CreatedAt: rec.created.exact(), UpdatedAt: rec.updated.exact(),
		Started: rec.started, Seq: rec.seq}
	if rec.flags&reportHasValue != 0 {
		v := rec.value
		rep.Value = &v
	}
	if !rec.id.IsZero() {
		rep.ID = id.Format(id.Report, rec.id)
	}
	if x := t.extras.at(n); x != nil {
		rep.TraceID, rep.Detail, rep.Shown, rep.Chosen, rep.Prompt = x.traceID, x.detail, x.shown, x.chosen, x.prompt
		if o := x.odd; o != nil {
			if rec.id.IsZero() {
				rep.ID = o.id
			}
			if rec.kind == reportOtherKind {
				rep.Kind = o.kind
			}
			if rec.flags&reportFarCreated != 0 {
				rep.CreatedAt = o.created
			}
			if rec.flags&reportFarUpdated != 0 {
				rep.UpdatedAt = o.updated
			}
		}
	}
	return rep
}

// view is an immutable copy: later reports and replacements never show in
// it.
func (t *reportTable) view() reportTable {
	if t == nil {
		return reportTable{}
	}
	return reportTable{recs: t.recs.view(), extras: t.extras.view(), earlier: t.earlier.view(), names: t.names.view()}
}
