// Package token checks the names Plaudit puts into NATS subjects and
// JetStream keys (node ids, agent ids, cluster names).
package token

// Valid reports whether s is a non-empty run of ASCII letters, digits,
// '-' and '_': a single subject token with no wildcard, separator or
// space, valid in a key as well.
func Valid(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
