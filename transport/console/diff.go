package console

import "strings"

// diffLine is one line of a line diff: Op is ' ' (in both), '-' (only in
// the old text) or '+' (only in the new).
type diffLine struct {
	Op   byte
	Text string
}

// lineDiff diffs two texts line by line along a longest common
// subsequence. Objective definitions are tens of lines, so the quadratic
// table is cheap.
func lineDiff(a, b string) []diffLine {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	n, m := len(x), len(y)
	// lcs[i][j] is the LCS length of x[i:] and y[j:].
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out []diffLine
	i, j := 0, 0
	for i < n && j < m {
		switch {
		case x[i] == y[j]:
			out = append(out, diffLine{' ', x[i]})
			i++
			j++
		case lcs[i+1][j] >= lcs[i][j+1]:
			out = append(out, diffLine{'-', x[i]})
			i++
		default:
			out = append(out, diffLine{'+', y[j]})
			j++
		}
	}
	for ; i < n; i++ {
		out = append(out, diffLine{'-', x[i]})
	}
	for ; j < m; j++ {
		out = append(out, diffLine{'+', y[j]})
	}
	return out
}
