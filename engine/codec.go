package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/plaudit/plaudit/engine/id"
	"github.com/plaudit/plaudit/engine/objective"
)

// The codec writes events and snapshots in a compact binary form: varints,
// length-prefixed strings, IEEE floats. It is hand-written rather than
// reflective because every acknowledged write passes through it. Checksums
// and framing belong to persist; this layer only has to reject garbage
// without panicking.

// ErrDecode is wrapped by every decoding failure.
var ErrDecode = errors.New("engine: cannot decode")

const (
	codecVersion = 1 // of events
	// Snapshot formats: 1 lacked the claims' sequence numbers; 2 has them;
	// 3 also has the values replaced reports held, and is written only
	// for an agent with a replaced report, so that a store of agents
	// without one stays readable by a binary of before.
	snapshotV1    = 1
	snapshotV2    = 2
	snapshotV3    = 3
	maxDecodeLen  = 1 << 26 // no string or collection is longer
	snapshotMagic = 'S'
)

// AppendEvent appends the encoding of ev to dst.
func AppendEvent(dst []byte, ev Event) []byte {
	w := writer(append(dst, codecVersion, byte(ev.eventType())))
	switch e := ev.(type) {
	case AgentCreated:
		w.agentInfo(e.Info)
	case RunCreated:
		w.run(e.Run)
	case RunFinished:
		w.str(e.RunID)
		w.boolean(e.Succeeded)
		w.time(e.FinishedAt)
	case ObjectClaimed:
		w.str(e.RunID)
		w.str(e.Claim.Object)
		w.time(e.Claim.CreatedAt)
	case TraceRegistered:
		w.str(e.RunID)
		w.trace(e.Trace)
	case SignalRecorded:
		w.signal(e.Signal)
	case ObjectivePut:
		w.objective(ObjectiveVersion(e))
	case VariationCreated:
		w.variation(e.Variation)
	case FeedbackRecorded:
		w.feedback(e.Feedback)
	case ReportRecorded:
		w.report(e.Report)
	}
	return w
}

// DecodeEvent decodes one event.
func DecodeEvent(b []byte) (ev Event, err error) {
	r := &reader{b: b}
	if v := r.byte(); v != codecVersion {
		return nil, fmt.Errorf("%w: event format %d", ErrDecode, v)
	}
	switch t := eventType(r.byte()); t {
	case evAgentCreated:
		ev = AgentCreated{Info: r.agentInfo()}
	case evRunCreated:
		ev = RunCreated{Run: r.run()}
	case evRunFinished:
		ev = RunFinished{RunID: r.str(), Succeeded: r.boolean(), FinishedAt: r.time()}
	case evObjectClaimed:
		ev = ObjectClaimed{RunID: r.str(), Claim: Claim{Object: r.str(), CreatedAt: r.time()}}
	case evTraceRegistered:
		ev = TraceRegistered{RunID: r.str(), Trace: r.trace()}
	case evSignalRecorded:
		ev = SignalRecorded{Signal: r.signal()}
	case evObjectivePut:
		ev = ObjectivePut(r.objective())
	case evVariationCreated:
		ev = VariationCreated{Variation: r.variation()}
	case evFeedbackRecorded:
		ev = FeedbackRecorded{Feedback: r.feedback()}
	case evReportRecorded:
		ev = ReportRecorded{Report: r.report()}
	default:
		return nil, fmt.Errorf("%w: event type %d", ErrDecode, t)
	}
	return ev, r.done()
}

// AppendState appends the encoding of a snapshot view to dst.
func AppendState(dst []byte, s State) []byte {
	w := writer(dst)
	encodeState(&w, s, nil)
	return w
}

// stateChunk is how many bytes of a snapshot WriteState buffers before it
// writes them out.
const stateChunk = 64 << 10

// WriteState writes the encoding of a snapshot view to out, as AppendState
// would append it, through a buffer of about stateChunk bytes: a snapshot
// is compressed as it is encoded, never held whole. It returns the bytes
// written.
func WriteState(out io.Writer, s State) (int64, error) {
	return writeState(out, s, stateChunk)
}

// WriteTo writes the encoding of s to w (WriteState), so that a store
// takes a snapshot view as it is (persist.State).
func (s State) WriteTo(w io.Writer) (int64, error) { return WriteState(w, s) }

func writeState(out io.Writer, s State, chunk int) (int64, error) {
	w := make(writer, 0, chunk)
	var (
		n   int64
		err error
	)
	flush := func(w *writer) {
		if err == nil && len(*w) > 0 {
			var k int
			k, err = out.Write(*w)
			n += int64(k)
		}
		*w = (*w)[:0]
	}
	encodeState(&w, s, func(w *writer) {
		if len(*w) >= chunk {
			flush(w)
		}
	})
	flush(&w)
	return n, err
}

// encodeState encodes s into w, calling each, when not nil, after every
// record (run, signal, feedback, report, ...).
func encodeState(w *writer, s State, each func(*writer)) {
	if each == nil {
		each = func(*writer) {}
	}
	format := byte(snapshotV2)
	if s.Reports.replaced() {
		format = snapshotV3
	}
	*w = append(*w, format, snapshotMagic)
	w.uvarint(s.Seq)
	w.boolean(s.Created)
	w.agentInfo(s.Info)
	w.uvarint(uint64(s.Runs.len()))
	for r := range s.Runs.All() {
		w.run(r)
		for _, c := range r.Claims {
			w.uvarint(c.Seq)
		}
		each(w)
	}
	w.uvarint(uint64(s.Signals.Len()))
	for i := range s.Signals.Len() {
		w.signalAt(&s.Signals, i)
		each(w)
	}
	w.uvarint(uint64(len(s.Objectives)))
	for _, o := range s.Objectives {
		w.objective(o)
		each(w)
	}
	w.uvarint(uint64(len(s.Variations)))
	for _, v := range s.Variations {
		w.variation(v)
		each(w)
	}
	w.uvarint(uint64(s.Feedback.Len()))
	for i := range s.Feedback.Len() {
		w.feedbackAt(&s.Feedback, i, &s.Signals)
		each(w)
	}
	w.uvarint(uint64(s.Reports.len()))
	for n := range s.Reports.len() {
		if format == snapshotV3 {
			// What it held before, oldest first: a decoder sets each in
			// turn, as the log applied them.
			earlier := s.Reports.earlierVersions(n)
			w.uvarint(uint64(len(earlier)))
			for _, v := range earlier {
				w.boolean(v.valued)
				if v.valued {
					w.float(v.value)
				}
				w.time(v.at.Time())
				w.uvarint(v.seq)
			}
		}
		w.reportAt(&s.Reports, n, &s.Runs)
		each(w)
	}
}

// DecodeState decodes a snapshot view.
func DecodeState(b []byte) (State, error) {
	r := &reader{b: b}
	format := r.byte()
	if (format < snapshotV1 || format > snapshotV3) || r.byte() != snapshotMagic {
		return State{}, fmt.Errorf("%w: not a snapshot", ErrDecode)
	}
	var s State
	s.Seq = r.uvarint()
	s.Created = r.boolean()
	s.Info = r.agentInfo()
	var runs []Run
	for n := r.count(); n > 0 && r.err == nil; n-- {
		run := r.run()
		if format >= snapshotV2 {
			for i := range run.Claims {
				run.Claims[i].Seq = r.uvarint()
			}
		}
		runs = append(runs, run)
	}
	if format == snapshotV1 {
		numberClaimsByTime(runs)
	}
	for _, run := range runs {
		s.Runs.add(run)
		s.Signals.addRun(run.ID)
	}
	runs = nil
	// A run's signals mostly come together: the last run found is tried first.
	var lastRunID []byte
	lastRun := -1
	for n := r.count(); n > 0 && r.err == nil; n-- {
		e := r.encodedSignal()
		if r.err != nil {
			break
		}
		run, ok := lastRun, lastRun >= 0 && bytes.Equal(e.runID, lastRunID)
		if !ok {
			if run, ok = e.runIn(&s.Runs); !ok {
				r.fail("signal %s of unknown run %s", e.id, e.runID)
				break
			}
			if run >= 0 {
				lastRunID, lastRun = e.runID, run
			}
		}
		s.Signals.addEncoded(&e, run)
	}
	s.Signals = s.Signals.view()
	for n := r.count(); n > 0 && r.err == nil; n-- {
		s.Objectives = append(s.Objectives, r.objective())
	}
	for n := r.count(); n > 0 && r.err == nil; n-- {
		s.Variations = append(s.Variations, r.variation())
	}
	for n := r.count(); n > 0 && r.err == nil; n-- {
		fb := r.feedback()
		run, _ := s.Runs.find(fb.RunID)
		s.Feedback.add(fb, run, &s.Signals)
	}
	s.Feedback = s.Feedback.view()
	var earlier []reportVersion
	for n := r.count(); n > 0 && r.err == nil; n-- {
		earlier = earlier[:0]
		if format == snapshotV3 {
			for k := r.count(); k > 0 && r.err == nil; k-- {
				var v reportVersion
				if v.valued = r.boolean(); v.valued {
					v.value = r.float()
				}
				v.at, v.seq = objective.InstantOf(r.time()), r.uvarint()
				earlier = append(earlier, v)
			}
		}
		rep := r.report()
		run, ok := s.Runs.find(rep.RunID)
		switch {
		case r.err != nil:
		case ok:
			for _, v := range earlier {
				s.Reports.set(v.as(rep), run)
			}
			s.Reports.set(rep, run)
		default:
			r.fail("report %s of unknown run %s", rep.ID, rep.RunID)
		}
	}
	s.Runs, s.Reports = s.Runs.view(), s.Reports.view()
	return s, r.done()
}

// numberClaimsByTime gives the claims of a format-1 snapshot, which did not
// keep their sequence numbers, an order: by claim time, ties in run order.
// It is the order format 1 restored, and at most off for claims made in the
// same instant.
func numberClaimsByTime(runs []Run) {
	var all []*Claim
	for i := range runs {
		for j := range runs[i].Claims {
			all = append(all, &runs[i].Claims[j])
		}
	}
	slices.SortStableFunc(all, func(x, y *Claim) int { return x.CreatedAt.Compare(y.CreatedAt) })
	for i, c := range all {
		c.Seq = uint64(i + 1)
	}
}

type writer []byte

func (w *writer) uvarint(v uint64) { *w = binary.AppendUvarint(*w, v) }
func (w *writer) varint(v int64)   { *w = binary.AppendVarint(*w, v) }
func (w *writer) str(s string)     { w.uvarint(uint64(len(s))); *w = append(*w, s...) }
func (w *writer) float(f float64)  { *w = binary.LittleEndian.AppendUint64(*w, math.Float64bits(f)) }

func (w *writer) boolean(b bool) {
	if b {
		*w = append(*w, 1)
	} else {
		*w = append(*w, 0)
	}
}

// time writes 0 for the zero time, else 1 and Unix nanoseconds.
func (w *writer) time(t time.Time) {
	if t.IsZero() {
		*w = append(*w, 0)
		return
	}
	*w = append(*w, 1)
	w.varint(t.UnixNano())
}

// ulid writes prefix + u's text as str writes id.Format(prefix, u), without
// making the string.
func (w *writer) ulid(prefix string, u ulid.ULID) {
	w.uvarint(uint64(len(prefix) + ulid.EncodedSize))
	*w = append(append(*w, prefix...), make([]byte, ulid.EncodedSize)...)
	_ = u.MarshalTextTo((*w)[len(*w)-ulid.EncodedSize:])
}

// stamp writes a signal record's time as time writes the time it stands
// for: far holds those outside Unix nanoseconds (SignalLog.time).
func (w *writer) stamp(s stamp, far []time.Time) {
	if s != noTime && s < farStamps {
		w.time(far[s-noTime-1])
		return
	}
	w.exact(s)
}

// exact writes a stamp as time writes s.exact().
func (w *writer) exact(s stamp) {
	if s == noTime {
		*w = append(*w, 0)
		return
	}
	*w = append(*w, 1)
	w.varint(int64(s))
}

func (w *writer) labels(m map[string]string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.uvarint(uint64(len(keys)))
	for _, k := range keys {
		w.str(k)
		w.str(m[k])
	}
}

func (w *writer) agentInfo(i AgentInfo) {
	w.str(i.ID)
	w.str(i.Workspace)
	w.str(i.Name)
	w.str(i.ExternalID)
	w.labels(i.Labels)
	w.str(i.SelectionMode)
	w.time(i.CreatedAt)
}

func (w *writer) run(r Run) {
	w.str(r.ID)
	w.str(r.AgentID)
	w.str(r.Version)
	w.str(r.VariationID)
	w.str(r.SessionID)
	w.str(r.ExternalID)
	w.labels(r.Labels)
	w.str(r.ProfileID)
	w.time(r.CreatedAt)
	w.boolean(r.Finished)
	w.boolean(r.Succeeded)
	w.time(r.FinishedAt)
	w.uvarint(uint64(len(r.Claims)))
	for _, c := range r.Claims {
		w.str(c.Object)
		w.time(c.CreatedAt)
	}
	w.uvarint(uint64(len(r.Traces)))
	for _, t := range r.Traces {
		w.trace(t)
	}
}

func (w *writer) trace(t Trace) {
	w.str(t.TraceID)
	w.str(t.TurnID)
	w.time(t.CreatedAt)
}

// signalAt writes signal i of l as signal writes l.At(i), from its record:
// a snapshot writes every signal, and making each one's id had cost an
// allocation a signal and most of the encoding's time.
func (w *writer) signalAt(l *SignalLog, i int) {
	rec := l.recs.At(i)
	if rec.id.IsZero() {
		w.str(l.oddID(i))
	} else {
		w.ulid(id.Signal, rec.id)
	}
	w.str(l.names.at(rec.kind))
	w.float(rec.value)
	w.str(l.runOf(rec))
	w.str(l.names.at(rec.session))
	w.str(l.names.at(rec.object))
	w.str(l.dedupOf(i, rec))
	w.stamp(rec.occurred, l.farTimes)
	w.stamp(rec.received, l.farTimes)
	w.uvarint(rec.seq)
}

func (w *writer) signal(s Signal) {
	w.str(s.ID)
	w.str(s.Kind)
	w.float(s.Value)
	w.str(s.RunID)
	w.str(s.SessionID)
	w.str(s.Object)
	w.str(s.DedupKey)
	w.time(s.OccurredAt)
	w.time(s.ReceivedAt)
	w.uvarint(s.Seq)
}

func (w *writer) objective(o ObjectiveVersion) {
	w.uvarint(uint64(o.Version))
	w.str(string(o.Definition.AppendJSON(nil)))
	w.str(o.Note)
	w.time(o.CreatedAt)
}

func (w *writer) variation(v Variation) {
	w.str(v.ID)
	w.str(v.Name)
	w.str(v.Config)
	w.float(v.Alpha)
	w.float(v.Beta)
	w.uvarint(uint64(v.FeedbackCount))
	w.time(v.CreatedAt)
}

func (w *writer) feedback(fb Feedback) {
	w.str(fb.ID)
	w.feedbackBody(fb)
}

// feedbackAt writes record i of l as feedback writes l.at(i, runs),
// without making its id's string.
func (w *writer) feedbackAt(l *feedbackLog, i int, runs *SignalLog) {
	if rec := l.recs.At(i); rec.id.IsZero() {
		w.str(l.id(i))
	} else {
		w.ulid(id.Feedback, rec.id)
	}
	w.feedbackBody(l.entry(i, runs))
}

// feedbackBody writes what feedback writes after the id.
func (w *writer) feedbackBody(fb Feedback) {
	w.str(fb.RunID)
	w.str(fb.VariationID)
	w.boolean(fb.Score != nil)
	if fb.Score != nil {
		w.float(*fb.Score)
	}
	w.str(fb.Comment)
	w.str(fb.ExternalID)
	w.labels(fb.Labels)
	w.str(fb.ProfileID)
	w.time(fb.CreatedAt)
}

// reportAt writes report n of t as report writes t.at(n, runs), from its
// record, for the reason signalAt does (an id and a value's allocations).
func (w *writer) reportAt(t *reportTable, n int, runs *runTable) {
	rec := t.recs.At(n)
	var (
		x   reportExtra
		odd oddReport
	)
	if p := t.extras.at(n); p != nil {
		x = *p
		if x.odd != nil {
			odd = *x.odd
		}
	}
	if rec.id.IsZero() {
		w.str(odd.id)
	} else {
		w.ulid(id.Report, rec.id)
	}
	kind := reportKinds[rec.kind]
	if rec.kind == reportOtherKind && x.odd != nil {
		kind = odd.kind
	}
	for _, s := range []string{runs.id(int(rec.run)), kind, t.names.at(rec.scorer), t.names.at(rec.turn), x.traceID} {
		w.str(s)
	}
	hasValue := rec.flags&reportHasValue != 0
	w.boolean(hasValue)
	if hasValue {
		w.float(rec.value)
	}
	w.float(rec.weight)
	for _, s := range []string{x.detail, x.shown, x.chosen, x.prompt} {
		w.str(s)
	}
	if rec.flags&reportFarCreated != 0 {
		w.time(odd.created)
	} else {
		w.exact(rec.created)
	}
	if rec.flags&reportFarUpdated != 0 {
		w.time(odd.updated)
	} else {
		w.exact(rec.updated)
	}
	w.uvarint(rec.started)
	w.uvarint(rec.seq)
}

func (w *writer) report(p Report) {
	for _, s := range []string{p.ID, p.RunID, p.Kind, p.Scorer, p.TurnID, p.TraceID} {
		w.str(s)
	}
	w.boolean(p.Value != nil)
	if p.Value != nil {
		w.float(*p.Value)
	}
	w.float(p.Weight)
	for _, s := range []string{p.Detail, p.Shown, p.Chosen, p.Prompt} {
		w.str(s)
	}
	w.time(p.CreatedAt)
	w.time(p.UpdatedAt)
	w.uvarint(p.Started)
	w.uvarint(p.Seq)
}

// reader decodes; the first failure sticks in err and later reads return zeros.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: "+format, append([]any{ErrDecode}, args...)...)
	}
	r.b = nil
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail("%d trailing bytes", len(r.b))
	}
	return r.err
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail("short input")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) count() int {
	n := r.uvarint()
	if n > maxDecodeLen || n > uint64(len(r.b)) {
		r.fail("length %d out of range", n)
		return 0
	}
	return int(n)
}

func (r *reader) str() string { return string(r.bytes()) }

// bytes is str without the copy: they are the input's.
func (r *reader) bytes() []byte {
	n := r.count()
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

func (r *reader) float() float64 {
	if len(r.b) < 8 {
		r.fail("short float")
		return 0
	}
	f := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	if math.IsNaN(f) || math.IsInf(f, 0) {
		r.fail("non-finite number") // the engine never stores one
		return 0
	}
	return f
}

func (r *reader) boolean() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bad bool")
	return false
}

func (r *reader) time() time.Time {
	switch r.byte() {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(0, r.varint()).UTC()
	}
	r.fail("bad time")
	return time.Time{}
}

func (r *reader) labels() map[string]string {
	n := r.count()
	if n == 0 {
		return nil
	}
	m := make(map[string]string, min(n, 64))
	for ; n > 0 && r.err == nil; n-- {
		k := r.str()
		m[k] = r.str()
	}
	return m
}

func (r *reader) agentInfo() AgentInfo {
	return AgentInfo{ID: r.str(), Workspace: r.str(), Name: r.str(), ExternalID: r.str(),
		Labels: r.labels(), SelectionMode: r.str(), CreatedAt: r.time()}
}

func (r *reader) run() Run {
	run := Run{ID: r.str(), AgentID: r.str(), Version: r.str(), VariationID: r.str(), SessionID: r.str(),
		ExternalID: r.str(), Labels: r.labels(), ProfileID: r.str(), CreatedAt: r.time(), Finished: r.boolean(),
		Succeeded: r.boolean(), FinishedAt: r.time()}
	for n := r.count(); n > 0 && r.err == nil; n-- {
		run.Claims = append(run.Claims, Claim{Object: r.str(), CreatedAt: r.time()})
	}
	for n := r.count(); n > 0 && r.err == nil; n-- {
		run.Traces = append(run.Traces, r.trace())
	}
	return run
}

func (r *reader) trace() Trace {
	return Trace{TraceID: r.str(), TurnID: r.str(), CreatedAt: r.time()}
}

func (r *reader) signal() Signal {
	return Signal{ID: r.str(), Kind: r.str(), Value: r.float(), RunID: r.str(), SessionID: r.str(),
		Object: r.str(), DedupKey: r.str(), OccurredAt: r.time(), ReceivedAt: r.time(), Seq: r.uvarint()}
}

// encodedSignal is a signal's encoding read in place: its strings are the
// input's bytes. A restore and a replay add it to the log as it is
// (SignalLog.addEncoded), making strings only of what the log does not
// hold yet; making every signal's six strings had been most of a restore.
type encodedSignal struct {
	id, kind, runID, session, object, dedupKey []byte
	value                                      float64
	occurred, received                         time.Time
	seq                                        uint64
}

// runIn returns the number of e's run among runs, -1 for a signal without
// one; false for a run runs does not hold.
func (e *encodedSignal) runIn(runs *runTable) (int, bool) {
	if len(e.runID) == 0 {
		return -1, true
	}
	return runs.find(string(e.runID))
}

// encodedSignal reads what signal reads, in place.
func (r *reader) encodedSignal() (e encodedSignal) {
	e.id, e.kind, e.value = r.bytes(), r.bytes(), r.float()
	e.runID, e.session, e.object, e.dedupKey = r.bytes(), r.bytes(), r.bytes(), r.bytes()
	e.occurred, e.received, e.seq = r.time(), r.time(), r.uvarint()
	return e
}

func (r *reader) objective() ObjectiveVersion {
	o := ObjectiveVersion{Version: int(r.uvarint())}
	def := r.str()
	o.Note = r.str()
	o.CreatedAt = r.time()
	if r.err != nil {
		return o
	}
	d, err := objective.Parse([]byte(def), "definition")
	if err != nil {
		r.fail("objective version %d: %v", o.Version, err)
		return o
	}
	o.Definition = d
	return o
}

func (r *reader) variation() Variation {
	return Variation{ID: r.str(), Name: r.str(), Config: r.str(), Alpha: r.float(), Beta: r.float(),
		FeedbackCount: int(r.uvarint()), CreatedAt: r.time()}
}

func (r *reader) feedback() Feedback {
	fb := Feedback{ID: r.str(), RunID: r.str(), VariationID: r.str()}
	if r.boolean() {
		score := r.float()
		fb.Score = &score
	}
	fb.Comment, fb.ExternalID, fb.Labels, fb.ProfileID, fb.CreatedAt = r.str(), r.str(), r.labels(), r.str(), r.time()
	return fb
}

func (r *reader) report() Report {
	p := Report{ID: r.str(), RunID: r.str(), Kind: r.str(), Scorer: r.str(), TurnID: r.str(), TraceID: r.str()}
	if r.boolean() {
		v := r.float()
		p.Value = &v
	}
	p.Weight = r.float()
	p.Detail, p.Shown, p.Chosen, p.Prompt = r.str(), r.str(), r.str(), r.str()
	p.CreatedAt, p.UpdatedAt = r.time(), r.time()
	p.Started, p.Seq = r.uvarint(), r.uvarint()
	return p
}
