package console

import (
	"fmt"
	"time"
)

// The run page explains a reward in the objective's own terms: what each
// term added, and for each signal whether it counted and, if not, why.
// The rules are the evaluator's (engine/objective.Evaluate), read from the
// canonical definition the service answers; the console decides nothing
// the reward read does not already reflect.

// contribution is a term's part in a scored reward: weight·scaled over the
// sum of the positive weights that had a value, in reward units (times
// hi − lo). ok is false when the term had no value.
func contribution(terms []termJSON, i int, bounds [2]float64) (points float64, ok bool) {
	t := terms[i]
	if t.Scaled == nil {
		return 0, false
	}
	den := 0.0
	for _, o := range terms {
		if o.Scaled != nil && o.Weight > 0 {
			den += o.Weight
		}
	}
	if den <= 0 {
		return 0, true
	}
	return t.Weight * *t.Scaled / den * (bounds[1] - bounds[0]), true
}

// Signal verdicts.
const (
	verdictUsed    = "used"
	verdictLate    = "late"
	verdictOutside = "outside window"
	verdictUnread  = "not read"
)

// verdict is what became of one signal in a reward, and why.
type verdict struct {
	Verdict string
	Why     string
}

// explain says what became of a signal of kind received at received and
// occurring at occurred, for a run finished at finished (nil: unfinished)
// under def.
func explain(def definitionJSON, finished *time.Time, kind string, occurred, received time.Time) verdict {
	if finished != nil {
		deadline := finished.Add(seconds(def.HorizonS))
		if received.After(deadline) {
			return verdict{verdictLate, fmt.Sprintf("received %s after the horizon closed (finished_at + %s = %s): counted as late, never used",
				human(received.Sub(deadline)), human(seconds(def.HorizonS)), deadline.UTC().Format(time.DateTime))}
		}
	}
	var reads, outside []string
	for _, t := range def.Terms {
		if t.Signal != kind {
			continue
		}
		if t.WithinS != nil && finished != nil {
			cutoff := finished.Add(seconds(*t.WithinS))
			if occurred.After(cutoff) {
				outside = append(outside, fmt.Sprintf("occurred %s after its term's window (finished_at + %s)",
					human(occurred.Sub(cutoff)), human(seconds(*t.WithinS))))
				continue
			}
		}
		reads = append(reads, fmt.Sprintf("term %s (%s, weight %s)", t.Signal, t.Agg, num(t.Weight)))
	}
	for _, g := range def.Guards {
		if g.Signal == kind {
			reads = append(reads, fmt.Sprintf("guard %s %s %s", g.Signal, g.Op, num(g.Value)))
		}
	}
	switch {
	case len(reads) > 0:
		why := "read by " + join(reads)
		if finished == nil {
			why += "; the run is unfinished, so no window applies yet"
		}
		return verdict{verdictUsed, why}
	case len(outside) > 0:
		return verdict{verdictOutside, join(outside)}
	}
	return verdict{verdictUnread, "no term or guard of this objective version reads kind " + kind}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// human writes a duration as people say it: 2d 3h, 5m, 12s.
func human(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= 24*time.Hour:
		days, rest := d/(24*time.Hour), d%(24*time.Hour)
		if h := rest / time.Hour; h > 0 {
			return fmt.Sprintf("%dd %dh", days, h)
		}
		return fmt.Sprintf("%dd", days)
	case d >= time.Hour:
		if m := (d % time.Hour) / time.Minute; m > 0 {
			return fmt.Sprintf("%dh %dm", d/time.Hour, m)
		}
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return fmt.Sprintf("%ds", d/time.Second)
}

func join(parts []string) string {
	out := ""
	for i, p := range parts {
		switch {
		case i == 0:
		case i == len(parts)-1:
			out += " and "
		default:
			out += ", "
		}
		out += p
	}
	return out
}
