package scheduling

import (
	"math"
	"strconv"
)

// A new node carries a value for every custom (not well-known) key its
// claim's requirements name, as Karpenter's NodeClaimTemplate.ToNodeClaim
// labels it with resolveCustomLabelsFromRequirements: Requirement.Any() of
// each requirement whose key is not in WellKnownLabels or RestrictedLabels
// (sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go,
// pkg/scheduling/requirement.go). The claim's requirements are the pool's
// narrowed by every pod placed on it, so the value satisfies all of them.
// Well-known keys are left to the instance type and offering.

// pick returns a value r admits, as Karpenter's Requirement.Any() does: for
// In, one of its values; for NotIn, Exists, Gt and Lt, an integer within
// the bounds. Any() takes an arbitrary In value and a random integer; pick
// takes the smallest, so the same solve labels the same, and it skips the
// NotIn values Any() could (rarely) draw. DoesNotExist admits no value.
func (r *Requirement) pick() (string, bool) {
	if !r.complement {
		if len(r.values) == 0 {
			return "", false
		}
		return r.values[0], true // sorted: the smallest
	}
	lo := int64(0)
	if r.hasGt && r.gt == math.MaxInt64 {
		return "", false
	}
	if r.hasGt {
		lo = max(lo, r.gt+1)
	}
	// At most len(r.values) candidates are excluded, so this ends.
	for n := lo; !r.hasLt || n < r.lt; n++ {
		if v := strconv.FormatInt(n, 10); !containsSorted(r.values, v) {
			return v, true
		}
	}
	return "", false
}

// customLabels are the values a claim with requirements reqs labels its
// node with for the custom keys that no single value already decides.
func customLabels(reqs Requirements, labels map[string]string) {
	for i := range reqs {
		r := &reqs[i]
		if r.Key == LabelHostname || IsWellKnownLabel(r.Key) {
			continue
		}
		if _, ok := labels[r.Key]; ok {
			continue
		}
		if v, ok := r.pick(); ok {
			labels[r.Key] = v
		}
	}
}
