// Package safety holds the randomized safety run: every function of
// nodewright (provisioner, lifecycle, interruption, disruption) driven on
// the local cloud through a few hundred steps of pod churn, spot reclaims,
// duplicate and lost messages and injected API errors, with nodewright's
// safety rules checked after every step. It has no code of its own; see
// safety_test.go (NODEWRIGHT_SAFETY_STEPS / NODEWRIGHT_SAFETY_SEED for a
// longer or different run). trouble_test.go is the day of realistic
// trouble: the functions as Lambda runs them (internal/localrun) under
// AWS's faults, with two more rules and two liveness rules (make trouble).
package safety
