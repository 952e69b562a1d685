package scheduling

import "github.com/nodewright/nodewright/internal/apis"

// NormalizedKey returns the stable key a beta label key stands for
// (beta.kubernetes.io/arch -> kubernetes.io/arch, ...), or key. As Karpenter
// (NormalizedLabels, sigs.k8s.io/karpenter v1.14.1 pkg/apis/v1/labels.go,
// applied in pkg/scheduling/requirement.go NewRequirementWithFlexibility),
// the solver reads a requirement on a beta twin, a NodePool's or a pod's,
// as one on its stable key, so it narrows the instance types and offerings.
func NormalizedKey(key string) string { return apis.NormalizedLabelKey(key) }
