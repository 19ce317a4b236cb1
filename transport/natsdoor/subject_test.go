package natsdoor

import (
	"strings"
	"testing"
)

// TestSubjectTokens agrees with strings.Split on five tokens and refuses
// every other count.
func TestSubjectTokens(t *testing.T) {
	for _, s := range []string{
		"plaudit.v1.default.agt_1.select", "plaudit.v1.default.agt_1", "plaudit.v1.default.agt_1.select.x",
		"", "....", ".....", "a.b.c.d.e", "plaudit.v1..agt.select",
	} {
		tok, ok := subjectTokens(s)
		want := strings.Split(s, ".")
		if ok != (len(want) == 5) {
			t.Fatalf("subjectTokens(%q) ok = %v, want %v", s, ok, len(want) == 5)
		}
		if ok && [5]string(want) != tok {
			t.Fatalf("subjectTokens(%q) = %q, want %q", s, tok, want)
		}
	}
}
