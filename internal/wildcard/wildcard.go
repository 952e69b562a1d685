// Package wildcard matches the * and ? patterns AWS uses in EC2 filters,
// IAM Resource elements and StringLike conditions: * matches any run of
// characters (none included, '/' and ':' included) and ? exactly one,
// anchored at both ends. One implementation for the provider's image
// filters and the local cloud's IAM evaluation and identity mappings.
package wildcard

// Match reports whether s matches pattern.
func Match(pattern, s string) bool {
	// Iterative matching that backtracks to the last star only: linear in
	// practice and never exponential, whatever the pattern.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
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
