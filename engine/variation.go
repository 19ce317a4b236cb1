package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/plaudit/plaudit/engine/field"
	"github.com/plaudit/plaudit/engine/id"
)

// FeedbackSignal is the kind of the signal every feedback appends to its run.
const FeedbackSignal = "feedback"

// Variation is one candidate configuration of an agent, with the Beta
// posterior that Thompson sampling draws from.
type Variation struct {
	ID            string
	Name          string
	Config        string // raw JSON object, "" when none
	Alpha, Beta   float64
	FeedbackCount int
	CreatedAt     time.Time
}

// Score is the posterior mean α/(α+β), the variation's believed quality.
func (v Variation) Score() float64 { return v.Alpha / (v.Alpha + v.Beta) }

// Feedback is one scored judgement of a run (seed 004). Records append;
// nothing is ever replaced.
type Feedback struct {
	ID          string
	RunID       string
	VariationID string   // the variation that ran the run, "" if none
	Score       *float64 // nil when omitted: a neutral update
	Comment     string
	ExternalID  string
	Labels      map[string]string
	ProfileID   string
	CreatedAt   time.Time
}

// CreateVariation adds a variation to the agent.
type CreateVariation struct {
	Name   string
	Config string // raw JSON object or ""
}

// RecordFeedback scores a run.
type RecordFeedback struct {
	RunID      string
	Score      *float64
	Comment    string
	ExternalID string
	Labels     map[string]string
	ProfileID  string
}

// VariationCreated adds a variation.
type VariationCreated struct{ Variation Variation }

// FeedbackRecorded appends a feedback record and updates the posterior of
// the run's variation.
type FeedbackRecorded struct{ Feedback Feedback }

func (VariationCreated) eventType() eventType { return evVariationCreated }
func (FeedbackRecorded) eventType() eventType { return evFeedbackRecorded }

const maxCommentLen = 10000

// The prior of every variation: Beta(1, 1), uniform.
const priorAlpha, priorBeta = 1.0, 1.0

// CreateVariation adds a variation with the uniform prior.
func (a *Agent) CreateVariation(c CreateVariation, now time.Time, rnd *rand.Rand) (Variation, []Event, error) {
	var varID string
	return execute(a, func() (evs []Event, err error) { varID, evs, err = a.createVariation(c, now.UTC(), rnd); return },
		func() Variation { return *a.variations[varID] })
}

// RecordFeedback appends a feedback record, moves the posterior of the
// run's variation and appends a feedback signal to the run.
func (a *Agent) RecordFeedback(c RecordFeedback, now time.Time, rnd *rand.Rand) (Feedback, []Event, error) {
	return execute(a, func() ([]Event, error) { return a.recordFeedback(c, now.UTC(), rnd) },
		func() Feedback { return a.feedback.at(a.feedback.Len()-1, &a.signals) })
}

func (a *Agent) createVariation(c CreateVariation, now time.Time, rnd *rand.Rand) (string, []Event, error) {
	if err := a.ready(); err != nil {
		return "", nil, err
	}
	if err := checkText("name", c.Name, true, maxNameLen); err != nil {
		return "", nil, err
	}
	v := Variation{ID: id.New(id.Variation, now, rnd), Name: c.Name, Config: c.Config, Alpha: priorAlpha, Beta: priorBeta, CreatedAt: now}
	return v.ID, []Event{VariationCreated{Variation: v}}, nil
}

func (a *Agent) recordFeedback(c RecordFeedback, now time.Time, rnd *rand.Rand) ([]Event, error) {
	r, err := a.run(c.RunID)
	if err != nil {
		return nil, err
	}
	value := 0.0
	if c.Score != nil {
		value = *c.Score
		if math.IsNaN(value) || value < -1 || value > 1 {
			return nil, field.Errorf("score", "must be between -1.0 and 1.0")
		}
	}
	if err := checkText("comment", c.Comment, false, maxCommentLen); err != nil {
		return nil, err
	}
	if err := checkText("external_id", c.ExternalID, false, maxIDLen); err != nil {
		return nil, err
	}
	if err := CheckLabels("labels", c.Labels); err != nil {
		return nil, err
	}
	fb := Feedback{ID: id.New(id.Feedback, now, rnd), RunID: r.ID, VariationID: r.VariationID, Score: c.Score,
		Comment: c.Comment, ExternalID: c.ExternalID, Labels: c.Labels, ProfileID: c.ProfileID, CreatedAt: now}
	sig := Signal{ID: id.New(id.Signal, now, rnd), Kind: FeedbackSignal, Value: value, RunID: r.ID,
		OccurredAt: now, ReceivedAt: now}
	return []Event{FeedbackRecorded{Feedback: fb}, SignalRecorded{Signal: sig}}, nil
}

// applyFeedback updates the posterior as seed 004 says: a positive score adds
// its magnitude to α, a negative one to β, zero or none adds 0.5 to both.
func (a *Agent) applyFeedback(fb Feedback) {
	run := -1
	if i, ok := a.runs.find(fb.RunID); ok {
		run = i // runs are numbered alike in the run table and the signal log
	}
	a.feedback.add(fb, run, &a.signals)
	v := a.variations[fb.VariationID]
	if v == nil {
		return
	}
	switch {
	case fb.Score == nil || *fb.Score == 0:
		v.Alpha += 0.5
		v.Beta += 0.5
	case *fb.Score > 0:
		v.Alpha += *fb.Score
	default:
		v.Beta += -*fb.Score
	}
	v.FeedbackCount++
}

// selectVariation picks the variation a new run uses: the pinned one, or
// one chosen by the agent's mode; "" when the agent has none.
func (a *Agent) selectVariation(pinned string, rnd *rand.Rand) (string, error) {
	if pinned != "" {
		if a.variations[pinned] == nil {
			return "", fmt.Errorf("variation %s: %w", pinned, ErrNotFound)
		}
		return pinned, nil
	}
	n := len(a.variationList)
	switch {
	case n == 0:
		return "", nil
	case a.info.SelectionMode == SelectionRandom:
		return a.variationList[rnd.IntN(n)].ID, nil
	}
	best, bestDraw := "", -1.0
	for _, v := range a.variationList {
		if d := SampleBeta(rnd, v.Alpha, v.Beta); d > bestDraw {
			best, bestDraw = v.ID, d
		}
	}
	return best, nil
}

// Variation returns a copy of one variation.
func (a *Agent) Variation(varID string) (Variation, error) {
	if v := a.variations[varID]; v != nil {
		return *v, nil
	}
	return Variation{}, fmt.Errorf("variation %s: %w", varID, ErrNotFound)
}

// Variations lists the agent's variations in creation order.
func (a *Agent) Variations() []Variation {
	out := make([]Variation, len(a.variationList))
	for i, v := range a.variationList {
		out[i] = *v
	}
	return out
}

// Sentiment filters of the feedback lists.
const (
	SentimentUnspecified = "FEEDBACK_SENTIMENT_UNSPECIFIED"
	SentimentPositive    = "FEEDBACK_SENTIMENT_POSITIVE"
	SentimentNegative    = "FEEDBACK_SENTIMENT_NEGATIVE"
)

// FeedbackFilter selects feedback records; zero fields match everything.
type FeedbackFilter struct {
	RunID         string
	VariationID   string
	Sentiment     string // positive: score > 0; negative: score < 0; 0.0 matches neither
	Query         string // case-insensitive substring of the comment
	CreatedAfter  time.Time
	CreatedBefore time.Time
	Labels        map[string]string // every pair must be carried
}

func (f FeedbackFilter) match(fb *Feedback) bool {
	if f.RunID != "" && fb.RunID != f.RunID {
		return false
	}
	if f.VariationID != "" && fb.VariationID != f.VariationID {
		return false
	}
	score := 0.0
	if fb.Score != nil {
		score = *fb.Score
	}
	if (f.Sentiment == SentimentPositive && score <= 0) || (f.Sentiment == SentimentNegative && score >= 0) {
		return false
	}
	if f.Query != "" && !strings.Contains(strings.ToLower(fb.Comment), strings.ToLower(f.Query)) {
		return false
	}
	if !f.CreatedAfter.IsZero() && !fb.CreatedAt.After(f.CreatedAfter) {
		return false
	}
	if !f.CreatedBefore.IsZero() && !fb.CreatedAt.Before(f.CreatedBefore) {
		return false
	}
	for k, v := range f.Labels {
		if got, ok := fb.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ListFeedback returns up to limit matching records, newest first, starting
// below position before (0 = from the newest). next is the position to pass
// for the following page, 0 when there is none. Positions count records in
// append order from 1, so a cursor stays valid as new feedback arrives.
func (a *Agent) ListFeedback(f FeedbackFilter, before, limit int) (items []Feedback, next int) {
	i := a.feedback.Len()
	if before > 0 && before-1 < i {
		i = before - 1
	}
	for i > 0 {
		i--
		fb := a.feedback.entry(i, &a.signals)
		if !f.match(&fb) {
			continue
		}
		if len(items) == limit {
			return items, i + 2
		}
		fb.ID = a.feedback.id(i)
		items = append(items, fb)
	}
	return items, 0
}
