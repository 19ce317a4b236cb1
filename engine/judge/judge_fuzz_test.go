package judge

import (
	"errors"
	"testing"

	"github.com/plaudit/plaudit/engine/field"
)

// FuzzParse checks that Parse never panics and fails only with field
// errors, that whatever it accepts survives a trip through AppendJSON with
// its version unchanged, and that scoring its prompt as an answer does not
// panic either.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sampleTask))
	f.Add([]byte(rubric211))
	f.Add([]byte(`{"id": "t", "rubric": {"criteria": [{"id": "a", "check": {"type": "regex", "value": "(a+)+$"}}]}}`))
	f.Add([]byte(`{"id": "t", "rubric": {"criteria": [{"id": "a", "check": {"type": "json_valid", "judge": "j"}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := Parse(data, "task")
		if err != nil {
			var fe *field.Error
			if !errors.As(err, &fe) || !errors.Is(err, field.ErrInvalid) {
				t.Fatalf("%q: error %v is not a *field.Error", data, err)
			}
			return
		}
		text := task.AppendJSON(nil)
		again, err := Parse(text, "task")
		if err != nil {
			t.Fatalf("%q: canonical form %s does not parse: %v", data, text, err)
		}
		if string(again.AppendJSON(nil)) != string(text) || again.Version() != task.Version() {
			t.Fatalf("%q: canonical form %s parses to %s", data, text, again.AppendJSON(nil))
		}
		outcomes, judges := task.Prepare(task.Prompt)
		for _, i := range judges {
			outcomes[i] = Unscorable
		}
		s, flags := Score(task, task.Prompt, outcomes)
		if len(flags) > 0 && s != (Scores{}) || s.Reward < 0 || s.Reward > s.Partial || s.Partial > 1 {
			t.Fatalf("%q: scores %+v flags %v", data, s, flags)
		}
	})
}

// FuzzInstructsJudge checks that the fast matcher finds what a plain search
// of the whole normalized text finds.
func FuzzInstructsJudge(f *testing.F) {
	for _, tt := range instructsAttacks {
		f.Add(tt.answer)
	}
	for _, a := range instructsNearMisses {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		if got, want := instructsMatch(answer), searchAll(answer); got != want {
			t.Fatalf("%q (normalized %q): instructsMatch %q, search %q", answer, normalizeAnswer(answer), got, want)
		}
	})
}
