package judge

import (
	"math/bits"
	"regexp"
	"regexp/syntax"
	"strings"
)

type instructsPattern struct {
	name  string
	keys  []string       // every match holds one of these words
	re    *regexp.Regexp // the pattern
	at    *regexp.Regexp // the pattern anchored at the start of its input
	first []string       // the words a match can start with; nil: any word
}

// pattern expands template's parts and compiles it. keys is a space
// separated list of words of which every match holds one (a test checks
// them against a plain search).
func pattern(name, keys, template string) instructsPattern {
	// Parts name other parts ({IMP} uses {ASK}): replace until none is left.
	for {
		expanded := instructsParts.Replace(template)
		if expanded == template {
			break
		}
		template = expanded
	}
	return instructsPattern{
		name:  name,
		keys:  strings.Fields(keys),
		re:    regexp.MustCompile(template),
		at:    regexp.MustCompile(`^(?:` + template + `)`),
		first: firstWords(template),
	}
}

// instructsSpan is the most words a match may span; TestInstructsMatch
// checks instructsMatch against a plain search of the whole text.
const instructsSpan = 48

// instructsMatch returns the name of the first pattern, in list order,
// that matches the normalized answer, or "". Rather than running each
// regexp over the whole text, which costs about 100 ns a byte a pattern, it
// tries each pattern anchored at the words a match of it can start with,
// on the next instructsSpan words: most attempts fail within a word.
func instructsMatch(answer string) string {
	text := normalizeAnswer(answer)
	n := len(instructsPatterns)
	starts := make([]int, 0, len(text)/4) // starts[i] is the offset of word i
	at := make([][]int32, n)              // where to try each pattern
	keys := make([][]int32, n)            // where each pattern's keys are
	for i := 0; i < len(text); {
		j := strings.IndexByte(text[i:], ' ')
		if j < 0 {
			j = len(text) - i
		}
		w, word := int32(len(starts)), text[i:i+j]
		for m := instructsFirst[word] | instructsAny; m != 0; m &= m - 1 {
			p := bits.TrailingZeros64(m)
			at[p] = append(at[p], w)
		}
		for m := instructsKeys[word]; m != 0; m &= m - 1 {
			p := bits.TrailingZeros64(m)
			keys[p] = append(keys[p], w)
		}
		starts = append(starts, i)
		i += j + 1
	}
	starts = append(starts, len(text)+1)
	for p, words := range at {
		k := keys[p]
		for _, w := range words {
			for len(k) > 0 && k[0] < w {
				k = k[1:]
			}
			if len(k) == 0 {
				break
			}
			if k[0] >= w+instructsSpan {
				continue // no key within reach
			}
			end := starts[min(int(w)+instructsSpan, len(starts)-1)] - 1
			if instructsPatterns[p].at.MatchString(text[starts[w]:end]) {
				return instructsPatterns[p].name
			}
		}
	}
	return ""
}

// instructsFirst maps a word to the bit set of the patterns a match of
// which can start with it, and instructsKeys to the set of those it keys;
// instructsAny is the set of patterns that can start anywhere.
var instructsFirst, instructsKeys, instructsAny = func() (first, keys map[string]uint64, any uint64) {
	if len(instructsPatterns) > 64 {
		panic("judge: more than 64 instructs patterns")
	}
	first, keys = map[string]uint64{}, map[string]uint64{}
	for i, p := range instructsPatterns {
		if p.first == nil {
			any |= 1 << i
		}
		for _, w := range p.first {
			first[w] |= 1 << i
		}
		for _, w := range p.keys {
			keys[w] |= 1 << i
		}
	}
	return first, keys, any
}()

// firstWords returns the words a match of expr can start with, or nil
// when they cannot be listed (a character class before the first space,
// too many of them, or a match that can end inside its first word).
func firstWords(expr string) []string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	prefixes, ok := walkPrefixes(re.Simplify(), []prefix{{}})
	if !ok {
		return nil
	}
	var words []string
	seen := map[string]bool{}
	for _, p := range prefixes {
		if !p.done {
			return nil
		}
		if !seen[p.s] {
			seen[p.s] = true
			words = append(words, p.s)
		}
	}
	return words
}

// prefix is the start of a match up to its first space; done once the
// space is reached.
type prefix struct {
	s    string
	done bool
}

// walkPrefixes returns the prefixes in extended by a match of re.
func walkPrefixes(re *syntax.Regexp, in []prefix) ([]prefix, bool) {
	if len(in) > 2000 {
		return nil, false
	}
	open := false
	for _, p := range in {
		open = open || !p.done
	}
	if !open {
		return in, true
	}
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpBeginText, syntax.OpWordBoundary:
		return in, true
	case syntax.OpCapture:
		return walkPrefixes(re.Sub[0], in)
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return nil, false
		}
		out := make([]prefix, 0, len(in))
		for _, p := range in {
			if !p.done {
				lit := string(re.Rune)
				if i := strings.IndexByte(lit, ' '); i >= 0 {
					p = prefix{p.s + lit[:i], true}
				} else {
					p.s += lit
				}
			}
			out = append(out, p)
		}
		return out, true
	case syntax.OpCharClass: // a few letters, as in p(?:lease|l[sz])
		var out []prefix
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i+1]-re.Rune[i] > 16 {
				return nil, false
			}
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				o, _ := walkPrefixes(&syntax.Regexp{Op: syntax.OpLiteral, Rune: []rune{r}}, in)
				out = append(out, o...)
			}
		}
		return dedupe(out), true
	case syntax.OpConcat:
		var ok bool
		for _, sub := range re.Sub {
			if in, ok = walkPrefixes(sub, in); !ok {
				return nil, false
			}
		}
		return in, true
	case syntax.OpAlternate:
		var out []prefix
		for _, sub := range re.Sub {
			o, ok := walkPrefixes(sub, in)
			if !ok {
				return nil, false
			}
			out = append(out, o...)
		}
		return dedupe(out), true
	case syntax.OpQuest:
		o, ok := walkPrefixes(re.Sub[0], in)
		return dedupe(append(o, in...)), ok
	case syntax.OpRepeat, syntax.OpStar, syntax.OpPlus:
		// Simplify has turned x{n,m} into x's and x?'s; what is left is x*
		// and x+, whose repeats have to reach a space within a few rounds.
		out, cur := []prefix(nil), in
		if re.Op == syntax.OpStar {
			out = in
		}
		for round := 0; round < 4; round++ {
			next, ok := walkPrefixes(re.Sub[0], cur)
			if !ok {
				return nil, false
			}
			out = dedupe(append(out, next...))
			cur = next[:0:0]
			for _, p := range next {
				if !p.done {
					cur = append(cur, p)
				}
			}
			if len(cur) == 0 {
				return out, true
			}
		}
		return nil, false
	}
	return nil, false // a character class, any character, an end
}

func dedupe(ps []prefix) []prefix {
	seen := make(map[prefix]bool, len(ps))
	out := ps[:0]
	for _, p := range ps {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
