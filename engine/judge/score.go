package judge

import (
	"math"
	"strings"
	"unicode/utf8"

	"github.com/plaudit/plaudit/internal/jsonw"
)

// Outcome is what became of one criterion for one answer.
type Outcome uint8

// The outcomes. The zero Outcome is Pending.
const (
	Pending    Outcome = iota // a model-judge criterion not answered yet
	Met                       // the answer meets the criterion
	NotMet                    // the answer does not meet it
	Unscorable                // the judge could not score it, after its retries
)

// The flags, in the order Score lists them. Each explains a reward of 0.
const (
	FlagEmptyAnswer    = "empty_answer"    // the answer is empty or only whitespace
	FlagOverLength     = "over_length"     // the answer is longer than the task's soft_cap_chars
	FlagInstructsJudge = "instructs_judge" // the answer addresses the scorer (see InstructsJudge)
	FlagUnscorable     = "unscorable"      // a criterion stayed unscorable
)

// Scores are the four scores of a reward, each from 0 to 1.
type Scores struct {
	Reward   float64 // MustPass · Partial
	Partial  float64 // Σ weights of met criteria / Σ weights
	MustPass float64 // 1 when every must criterion is met, else 0
	AllPass  float64 // 1 when every criterion is met, else 0
}

// AppendJSON appends s as {"reward", "partial", "must_pass", "all_pass"}.
func (s Scores) AppendJSON(dst []byte) []byte {
	dst = append(dst, '{')
	dst = jsonw.Key(dst, "reward")
	dst = jsonw.Float(dst, s.Reward)
	dst = jsonw.Key(dst, "partial")
	dst = jsonw.Float(dst, s.Partial)
	dst = jsonw.Key(dst, "must_pass")
	dst = jsonw.Float(dst, s.MustPass)
	dst = jsonw.Key(dst, "all_pass")
	dst = jsonw.Float(dst, s.AllPass)
	return append(dst, '}')
}

// Prepare is the first half of scoring an answer: it evaluates t's built-in
// criteria and says which need a model judge. outcomes has one entry per
// criterion, in rubric order: Met or NotMet for a built-in, Pending for a
// model judge; judges holds the indexes of the Pending ones, which the
// caller sends to their judges and replaces with Met, NotMet or Unscorable
// before calling Score.
//
// When AnswerFlags is not empty the reward is 0 whatever the judges say, so
// a caller may skip them and call Score with the criteria still Pending.
func (t Task) Prepare(answer string) (outcomes []Outcome, judges []int) {
	outcomes = make([]Outcome, len(t.Criteria))
	for i, c := range t.Criteria {
		switch {
		case c.Check.IsJudge():
			judges = append(judges, i)
		case c.Check.Eval(answer):
			outcomes[i] = Met
		default:
			outcomes[i] = NotMet
		}
	}
	return outcomes, judges
}

// AnswerFlags returns the flags the answer earns on its own, before any
// judge is asked: empty_answer, over_length, instructs_judge, in that order.
func (t Task) AnswerFlags(answer string) []string {
	var flags []string
	if strings.TrimSpace(answer) == "" {
		flags = append(flags, FlagEmptyAnswer)
	}
	if t.SoftCapChars > 0 && utf8.RuneCountInString(answer) > t.SoftCapChars {
		flags = append(flags, FlagOverLength)
	}
	if InstructsJudge(answer) {
		flags = append(flags, FlagInstructsJudge)
	}
	return flags
}

// Score computes the scores and flags of answer to t given the outcome of
// each criterion, in rubric order (from Prepare, with the judges' answers
// filled in). Flags are AnswerFlags, then unscorable when a criterion is
// Unscorable; any flag zeroes all four scores. When an answer flag is set,
// Pending criteria are not looked at (the judges need not be asked);
// otherwise a Pending or missing outcome counts as Unscorable, so a reward
// is never computed over an unanswered criterion. Flags is nil when none
// is set. t is as Parse returns it: at least one criterion, weights > 0.
func Score(t Task, answer string, outcomes []Outcome) (Scores, []string) {
	flags := t.AnswerFlags(answer)
	unscorable := false
	for i := range t.Criteria {
		o := Pending
		if i < len(outcomes) {
			o = outcomes[i]
		}
		if o == Unscorable || (o == Pending && len(flags) == 0) {
			unscorable = true
		}
	}
	if unscorable {
		flags = append(flags, FlagUnscorable)
	}
	if len(flags) > 0 || len(t.Criteria) == 0 {
		return Scores{}, flags
	}
	// Weights are scaled by the largest so that the sums stay finite (100
	// weights near the float64 maximum would overflow). Summing the met
	// weights in the same order as all of them keeps met ≤ total, and
	// met == total when every criterion is met.
	var top float64
	for _, c := range t.Criteria {
		top = math.Max(top, c.Weight)
	}
	var met, total float64
	mustPass, allPass := 1.0, 1.0
	for i, c := range t.Criteria {
		w := c.Weight / top
		total += w
		if outcomes[i] == Met {
			met += w
			continue
		}
		allPass = 0
		if c.Must {
			mustPass = 0
		}
	}
	partial := met / total
	return Scores{Reward: mustPass * partial, Partial: partial, MustPass: mustPass, AllPass: allPass}, nil
}
