// Package wildcard matches the * and ? patterns AWS uses in EC2 filters,
// IAM Resource elements and StringLike conditions: * matches any run of
// characters (none included, '/' and ':' included) and ? exactly one,
// anchored at both ends. One implementation for the provider's image
// filters and the local cloud's IAM evaluation and identity mappings.
package wildcard

// Match reports whether s matches pattern.
func Match(pattern, s string) bool { return match(pattern, s, false) }

// MatchFold is Match with ASCII letters compared case-insensitively, as IAM
// compares action names ("ec2:createfleet" matches "EC2:Create*"). It
// allocates nothing: lower-casing both sides for every pattern of every
// statement was most of the local cloud's IAM evaluation of a launch.
func MatchFold(pattern, s string) bool { return match(pattern, s, true) }

func match(pattern, s string, fold bool) bool {
	// Iterative matching that backtracks to the last star only: linear in
	// practice and never exponential, whatever the pattern.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || same(pattern[p], s[i], fold)):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// same compares two bytes, ASCII letters regardless of case when fold.
func same(a, b byte, fold bool) bool {
	if a == b {
		return true
	}
	return fold && lower(a) == lower(b)
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
