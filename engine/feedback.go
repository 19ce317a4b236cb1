package engine

import (
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/plaudit/plaudit/engine/id"
)

// feedbackLog holds an agent's feedback records in append order, as the
// signal log holds signals: a fixed-size record without pointers each, and
// the strings a record would repeat kept once:
//
//   - the run is its number in the signal log (runs in creation order);
//   - the variation and the profile are interned in names;
//   - the id is the 16 bytes of its ULID, written "fb_" + base 32 on read;
//   - the time is Unix nanoseconds.
//
// A comment, an external id or labels go to a side table (extras), and so
// does what a record cannot hold: an id that is not "fb_" + a ULID, a run
// the agent does not know, a time outside Unix nanoseconds.
//
// The rejected alternative is a Feedback per record: 136 bytes, its id a
// string of its own, its score a pointer, seven pointers in all that the
// collector scans on every cycle.
type feedbackLog struct {
	recs   chunked[feedbackRecord]
	extras chunked[feedbackExtra]
	names  names
}

// feedbackRecord is one stored feedback record: 56 bytes, no pointers.
type feedbackRecord struct {
	id        ulid.ULID // zero: the id is in the extra
	score     float64   // when scored
	created   stamp     // noTime: the time is in the extra
	run       uint32    // the signal log's run number + 1; 0: the run id is in the extra
	variation uint32    // names
	profile   uint32    // names
	extra     uint32    // extras index + 1; 0 for none
	scored    bool      // a score was given (else none: a neutral update)
}

// feedbackExtra is what few records carry.
type feedbackExtra struct {
	comment, externalID string
	labels              map[string]string
	odd                 *oddFeedback // nil but for what a record cannot hold
}

type oddFeedback struct {
	id, runID string // "" when the record holds it
	created   time.Time
}

// add appends fb. run is the number of fb.RunID in runs (the signal log),
// or -1 when the agent has no such run.
func (l *feedbackLog) add(fb Feedback, run int, runs *SignalLog) {
	if run >= 0 && *runs.runIDs.At(run) != fb.RunID {
		panic(fmt.Sprintf("engine: feedback %s of run %s numbered %d", fb.ID, fb.RunID, run))
	}
	rec := feedbackRecord{variation: l.names.intern(fb.VariationID), profile: l.names.intern(fb.ProfileID),
		scored: fb.Score != nil}
	if fb.Score != nil {
		rec.score = *fb.Score
	}
	var odd oddFeedback
	isOdd := false
	if u, ok := recordID(id.Feedback, fb.ID); ok {
		rec.id = u
	} else {
		odd.id, isOdd = fb.ID, true
	}
	if run >= 0 {
		rec.run = uint32(run) + 1
	} else {
		odd.runID, isOdd = fb.RunID, true
	}
	// == on purpose: the time must read back exactly, its location included.
	if n := stamp(fb.CreatedAt.UnixNano()); n >= farStamps && time.Unix(0, int64(n)).UTC() == fb.CreatedAt {
		rec.created = n
	} else {
		rec.created, odd.created, isOdd = noTime, fb.CreatedAt, true
	}
	x := feedbackExtra{comment: fb.Comment, externalID: fb.ExternalID, labels: fb.Labels}
	if isOdd {
		x.odd = &odd
	}
	if x.comment != "" || x.externalID != "" || x.labels != nil || x.odd != nil {
		l.extras.Append(x)
		rec.extra = uint32(l.extras.Len())
	}
	l.recs.Append(rec)
}

// Len is the number of records.
func (l *feedbackLog) Len() int { return l.recs.Len() }

// at returns record i, in append order; runs is the signal log its run
// numbers are of.
func (l *feedbackLog) at(i int, runs *SignalLog) Feedback {
	fb := l.entry(i, runs)
	fb.ID = l.id(i)
	return fb
}

// entry is at but for the id, which alone costs an allocation to write.
func (l *feedbackLog) entry(i int, runs *SignalLog) Feedback {
	rec := l.recs.At(i)
	fb := Feedback{VariationID: l.names.at(rec.variation), ProfileID: l.names.at(rec.profile)}
	if rec.scored {
		score := rec.score
		fb.Score = &score
	}
	if rec.run != 0 {
		fb.RunID = *runs.runIDs.At(int(rec.run) - 1)
	}
	if rec.created != noTime {
		fb.CreatedAt = time.Unix(0, int64(rec.created)).UTC()
	}
	if rec.extra != 0 {
		x := l.extras.At(int(rec.extra) - 1)
		fb.Comment, fb.ExternalID, fb.Labels = x.comment, x.externalID, x.labels
		if x.odd != nil {
			if rec.run == 0 {
				fb.RunID = x.odd.runID
			}
			if rec.created == noTime {
				fb.CreatedAt = x.odd.created
			}
		}
	}
	return fb
}

// id returns the id of record i.
func (l *feedbackLog) id(i int) string {
	rec := l.recs.At(i)
	if rec.id.IsZero() { // an odd id: the extra holds it
		return l.extras.At(int(rec.extra) - 1).odd.id
	}
	return id.Format(id.Feedback, rec.id)
}

// ofRun reports whether record i is of the run runID, whose number is run
// (-1 when the agent has no such run).
func (l *feedbackLog) ofRun(i, run int, runID string) bool {
	rec := l.recs.At(i)
	if rec.run == 0 {
		return l.extras.At(int(rec.extra)-1).odd.runID == runID
	}
	return int(rec.run) == run+1
}

// view is an immutable copy, as SignalLog's: later appends do not show.
func (l *feedbackLog) view() feedbackLog {
	return feedbackLog{recs: l.recs.view(), extras: l.extras.view(), names: l.names.view()}
}
