package engine

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/plaudit/plaudit/engine/id"
	"github.com/plaudit/plaudit/engine/objective"
)

// SignalLog holds an agent's signals in receipt order. Signals are most of
// a served agent's memory (it keeps every one and reads them back a run at
// a time), so each is a fixed-size record without pointers, which the
// collector never scans, and every string a record would repeat is kept
// once per agent:
//
//   - kinds, sessions and objects are interned in names and named by index;
//   - the run is its index in runIDs, the runs in creation order;
//   - the id is the 16 bytes of its ULID, written "sig_" + base 32 on read;
//   - times are Unix nanoseconds, as the codec writes them;
//   - a dedup key, usually unique to its signal, is kept once, in
//     dedupKeys by signal index, which the dedup index maps back into; a
//     bit of the record's run says whether it has one.
//
// Reads materialise a Signal, so a signal reads back exactly as it was
// recorded. What a record cannot hold goes to a side table: an id that is
// not "sig_" + a ULID as id.New writes it (oddIDs), a time outside Unix
// nanoseconds (farTimes). The engine makes neither, except an occurred_at
// after 2262, which a client may name.
//
// The rejected alternative is a struct of strings per signal, as Signal is:
// 160 bytes before its strings, with eight pointers (six strings, two
// times' locations) the collector scans on every cycle.
//
// What grows with the history is kept in blocks (chunked), so an append
// never copies it. The zero SignalLog is empty. A view (see view) is an
// immutable copy that reads the same blocks and has no indexes.
type SignalLog struct {
	recs      chunked[signalRecord]
	names     names
	runIDs    chunked[string]
	dedupKeys chunked[dedupKey] // ascending at
	oddIDs    []oddID           // ascending at
	farTimes  []time.Time

	// The indexes: the maps are made at the first signal; a view has none.
	runSignals    chunked[[]int32]   // run index → indexes into recs
	objectSignals map[uint32][]int32 // object name → indexes into recs
	dedup         map[string]int32   // dedup key → index into recs
}

// signalRecord is one stored signal: 64 bytes, no pointers.
type signalRecord struct {
	id       ulid.ULID // zero: the id is in oddIDs
	value    float64
	occurred stamp
	received stamp
	seq      uint64
	kind     uint32 // names
	session  uint32 // names; 0 for none
	object   uint32 // names; 0 for none
	run      uint32 // runIDs index + 1, 0 for none; and hasDedup
}

// hasDedup, in a record's run, says that the signal has a dedup key. Run
// numbers stay below it: an agent would need 2³¹ runs.
const hasDedup = 1 << 31

// runNumber is a record's run: runIDs index + 1, 0 for none.
func (r *signalRecord) runNumber() uint32 { return r.run &^ hasDedup }

// dedupKey is the dedup key of signal at.
type dedupKey struct {
	at  int32
	key string
}

type oddID struct {
	at int32
	id string
}

// A stamp is a time as Unix nanoseconds. Stamps below farStamps are not
// instants: noTime is the zero time, and noTime+1+i is farTimes[i].
type stamp int64

const (
	noTime    stamp = math.MinInt64
	farStamps stamp = noTime + 1<<32
)

// recordID returns the ULID a record keeps for an id: ok when the id is
// prefix and a ULID as id.New writes it, and not the zero ULID, which a
// record reads as "the id is in the side table".
func recordID(prefix, s string) (ulid.ULID, bool) {
	u, ok := id.Parse(prefix, s)
	return u, ok && !u.IsZero()
}

// exactStamp returns t as a stamp when the stamp reads back (exact) as t
// exactly, == and not only Equal, its location included: the zero time,
// or a UTC time within Unix nanoseconds.
func exactStamp(t time.Time) (stamp, bool) {
	if t == (time.Time{}) {
		return noTime, true
	}
	n := stamp(t.UnixNano())
	return n, n >= farStamps && time.Unix(0, int64(n)).UTC() == t
}

// exact is the time of a stamp that exactStamp made.
func (s stamp) exact() time.Time {
	if s == noTime {
		return time.Time{}
	}
	return time.Unix(0, int64(s)).UTC()
}

// instant is exact's time as the evaluator compares it.
func (s stamp) instant() objective.Instant {
	if s == noTime {
		return objective.InstantOf(time.Time{})
	}
	return objective.UnixNano(int64(s))
}

// addRun makes the next run known: runs are numbered in creation order.
func (l *SignalLog) addRun(runID string) {
	l.runIDs.Append(runID)
	l.runSignals.Append(nil)
}

// add appends s. run is the number of s.RunID (see addRun), or -1 when s
// has no run; the caller resolves it, as it knows the runs by id already.
func (l *SignalLog) add(s Signal, run int) {
	if (run < 0) != (s.RunID == "") || run >= 0 && *l.runIDs.At(run) != s.RunID {
		panic(fmt.Sprintf("engine: signal %s of run %s numbered %d", s.ID, s.RunID, run))
	}
	rec := signalRecord{value: s.Value, seq: s.Seq, kind: l.names.intern(s.Kind), session: l.names.intern(s.SessionID),
		object: l.names.intern(s.Object), occurred: l.stamp(s.OccurredAt), received: l.stamp(s.ReceivedAt)}
	odd := ""
	if u, ok := recordID(id.Signal, s.ID); ok {
		rec.id = u
	} else {
		odd = s.ID
	}
	l.push(rec, run, odd, s.DedupKey)
}

// addEncoded adds the signal e encodes as add adds it: a name the log
// holds is not made a string again, nor an id that is a ULID.
func (l *SignalLog) addEncoded(e *encodedSignal, run int) {
	rec := signalRecord{value: e.value, seq: e.seq, kind: l.names.internBytes(e.kind), session: l.names.internBytes(e.session),
		object: l.names.internBytes(e.object), occurred: l.stamp(e.occurred), received: l.stamp(e.received)}
	odd := ""
	if u, ok := recordID(id.Signal, string(e.id)); ok {
		rec.id = u
	} else {
		odd = string(e.id)
	}
	l.push(rec, run, odd, string(e.dedupKey))
}

// push appends rec, whose names, times and id its caller has set (a zero id: the
// id is odd), as a signal of run number run (-1: none) with dedup key dedup.
func (l *SignalLog) push(rec signalRecord, run int, odd, dedup string) {
	l.init()
	i := int32(l.recs.Len())
	if run >= 0 {
		if run >= hasDedup-1 {
			panic(fmt.Sprintf("engine: signal of run number %d", run))
		}
		rec.run = uint32(run) + 1
	}
	if rec.id.IsZero() {
		l.oddIDs = append(l.oddIDs, oddID{i, odd})
	}
	if dedup != "" {
		rec.run |= hasDedup
		l.dedupKeys.Append(dedupKey{i, dedup})
	}
	l.recs.Append(rec)
	l.index(i, &rec)
	if dedup != "" {
		l.dedup[dedup] = i
	}
}

// index adds record i to the indexes by run and object.
func (l *SignalLog) index(i int32, rec *signalRecord) {
	if run := rec.runNumber(); run != 0 {
		idx := l.runSignals.At(int(run - 1))
		*idx = append(*idx, i)
	}
	if rec.object != 0 {
		l.objectSignals[rec.object] = append(l.objectSignals[rec.object], i)
	}
}

// adopt returns a log holding v's signals as a log that added them one by
// one holds them: it shares v's blocks, which its appends copy before they
// change one (see view), and builds the indexes from the records as add
// does. A restore takes a snapshot's signals so, not one Signal at a time.
func adopt(v SignalLog) SignalLog {
	l := v.view()
	l.names.reindex()
	for range l.runIDs.Len() {
		l.runSignals.Append(nil)
	}
	if l.recs.Len() > 0 {
		l.init()
	}
	for i := range l.recs.Len() {
		l.index(int32(i), l.recs.At(i))
	}
	for _, d := range l.dedupKeys.Values {
		l.dedup[d.key] = d.at
	}
	return l
}

func (l *SignalLog) init() {
	if l.objectSignals != nil {
		return
	}
	l.objectSignals = map[uint32][]int32{}
	l.dedup = map[string]int32{}
}

func (l *SignalLog) stamp(t time.Time) stamp {
	if t.IsZero() {
		return noTime
	}
	if n := stamp(t.UnixNano()); n >= farStamps && time.Unix(0, int64(n)).Equal(t) {
		return n
	}
	l.farTimes = append(l.farTimes, t)
	return noTime + stamp(len(l.farTimes))
}

func (l *SignalLog) time(s stamp) time.Time {
	switch {
	case s == noTime:
		return time.Time{}
	case s < farStamps:
		return l.farTimes[s-noTime-1]
	}
	return time.Unix(0, int64(s)).UTC()
}

// Len is the number of signals.
func (l *SignalLog) Len() int { return l.recs.Len() }

// At returns signal i, in receipt order.
func (l *SignalLog) At(i int) Signal {
	rec := l.recs.At(i)
	s := Signal{Kind: l.names.at(rec.kind), Value: rec.value, SessionID: l.names.at(rec.session), Object: l.names.at(rec.object),
		OccurredAt: l.time(rec.occurred), ReceivedAt: l.time(rec.received), Seq: rec.seq}
	if rec.id.IsZero() {
		s.ID = l.oddID(i)
	} else {
		s.ID = id.Format(id.Signal, rec.id)
	}
	s.RunID, s.DedupKey = l.runOf(rec), l.dedupOf(i, rec)
	return s
}

// oddID is the id of signal i when its record holds none.
func (l *SignalLog) oddID(i int) string {
	k, _ := slices.BinarySearchFunc(l.oddIDs, int32(i), func(o oddID, at int32) int { return int(o.at - at) })
	return l.oddIDs[k].id
}

// runOf is the id of the run a record was sent to by id ("" for none).
func (l *SignalLog) runOf(rec *signalRecord) string {
	run := rec.runNumber()
	if run == 0 {
		return ""
	}
	return *l.runIDs.At(int(run) - 1)
}

// dedupOf is the dedup key of signal i, whose record is rec ("" for none).
func (l *SignalLog) dedupOf(i int, rec *signalRecord) string {
	if rec.run&hasDedup == 0 {
		return ""
	}
	k := sort.Search(l.dedupKeys.Len(), func(k int) bool { return l.dedupKeys.At(k).at >= int32(i) })
	return l.dedupKeys.At(k).key
}

// All yields every signal in receipt order.
func (l *SignalLog) All() iter.Seq[Signal] {
	return func(yield func(Signal) bool) {
		for i := range l.recs.Len() {
			if !yield(l.At(i)) {
				return
			}
		}
	}
}

// view is an immutable copy: its slices are capped prefixes of append-only
// slices, so later appends never show, and it has no indexes.
func (l *SignalLog) view() SignalLog {
	return SignalLog{recs: l.recs.view(), names: l.names.view(), runIDs: l.runIDs.view(),
		dedupKeys: l.dedupKeys.view(), oddIDs: capped(l.oddIDs), farTimes: capped(l.farTimes)}
}

func capped[S ~[]E, E any](s S) S { return s[:len(s):len(s)] }

// byDedupKey finds the signal recorded under a dedup key.
func (l *SignalLog) byDedupKey(key string) (int, bool) {
	i, ok := l.dedup[key]
	return int(i), ok
}

// ofRun lists the signals sent to run number run by id or session.
func (l *SignalLog) ofRun(run int) []int32 { return *l.runSignals.At(run) }

// ofObject lists the signals sent to an object.
func (l *SignalLog) ofObject(object string) []int32 {
	if n, ok := l.names.find(object); ok && n != 0 {
		return l.objectSignals[n]
	}
	return nil
}

// appendObserved appends the signals at idx as the evaluator reads them,
// their kinds numbered by codes (see names.codes).
func (l *SignalLog) appendObserved(buf []objective.Observation, idx []int32, codes kindCodes) []objective.Observation {
	for _, i := range idx {
		rec := l.recs.At(int(i))
		buf = append(buf, objective.Observation{Kind: codes.of(rec.kind), Value: rec.value,
			Occurred: l.instant(rec.occurred), Received: l.instant(rec.received), Seq: rec.seq})
	}
	return buf
}

// instant is the time of a stamp as the evaluator compares it.
func (l *SignalLog) instant(s stamp) objective.Instant {
	if s < farStamps { // the zero time, or one in farTimes
		return objective.InstantOf(l.time(s))
	}
	return objective.UnixNano(int64(s))
}
