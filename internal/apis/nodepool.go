package apis

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API groups, versions and kinds accepted by the loader.
const (
	Group             = "karpenter.sh"
	AWSGroup          = "karpenter.k8s.aws"
	V1                = "v1"
	V1Beta1           = "v1beta1"
	NodePoolKind      = "NodePool"
	EC2NodeClassKind  = "EC2NodeClass"
	NodeClaimKind     = "NodeClaim"
	NodePoolAPIV1     = Group + "/" + V1
	NodeClassAPIV1    = AWSGroup + "/" + V1
	NodePoolAPIBeta   = Group + "/" + V1Beta1
	NodeClassAPIBeta  = AWSGroup + "/" + V1Beta1
	DefaultNodesRatio = "10%"
)

// NodePool is karpenter.sh/v1 NodePool.
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodePoolSpec `json:"spec"`
}

// NodePoolSpec is the desired state of a NodePool.
type NodePoolSpec struct {
	// Template describes the NodeClaims this pool launches.
	Template NodeClaimTemplate `json:"template"`
	// Disruption controls how Karpenter may disrupt the pool's nodes.
	Disruption Disruption `json:"disruption"`
	// Limits caps the total resources of the pool's nodes ("cpu", "memory",
	// "nodes", any extended resource).
	Limits Limits `json:"limits,omitempty"`
	// Weight orders pools (higher first); 1..100, nil means unweighted.
	Weight *int32 `json:"weight,omitempty"`
	// Replicas makes the pool static: it keeps exactly this many nodes,
	// whatever the pods need (Karpenter alpha). Only limits.nodes and no
	// weight may be set with it; consolidation settings do not apply.
	Replicas *int64 `json:"replicas,omitempty"`
}

// Static reports whether the pool is static (spec.replicas set): it keeps
// its replica count of nodes, pending pods never open nodes in it, and
// consolidation leaves it alone (drift, expiry and interruption still
// replace its nodes).
func (np *NodePool) Static() bool { return np.Spec.Replicas != nil }

// Limits is the resource ceiling of a NodePool.
type Limits corev1.ResourceList

// NodeClaimTemplate is spec.template of a NodePool.
type NodeClaimTemplate struct {
	ObjectMeta TemplateObjectMeta    `json:"metadata,omitempty"`
	Spec       NodeClaimTemplateSpec `json:"spec"`
}

// TemplateObjectMeta is the subset of object metadata a template carries.
type TemplateObjectMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is spec.template.spec of a NodePool; it is the
// NodeClaimSpec minus resources.
type NodeClaimTemplateSpec struct {
	Requirements           []NodeSelectorRequirementWithMinValues `json:"requirements"`
	Taints                 []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                         `json:"startupTaints,omitempty"`
	NodeClassRef           *NodeClassReference                    `json:"nodeClassRef"`
	ExpireAfter            NillableDuration                       `json:"expireAfter,omitzero"`
	TerminationGracePeriod *metav1.Duration                       `json:"terminationGracePeriod,omitempty"`
}

// NodeSelectorRequirementWithMinValues is a node selector requirement that
// may also demand a minimum number of distinct values across the instance
// types a NodeClaim may launch as.
type NodeSelectorRequirementWithMinValues struct {
	Key       string                      `json:"key"`
	Operator  corev1.NodeSelectorOperator `json:"operator"`
	Values    []string                    `json:"values,omitempty"`
	MinValues *int                        `json:"minValues,omitempty"`
}

// Inclusive numeric operators of karpenter.sh/v1 (v1.14); Kubernetes node
// selectors have only Gt and Lt.
const (
	NodeSelectorOpGte corev1.NodeSelectorOperator = "Gte"
	NodeSelectorOpLte corev1.NodeSelectorOperator = "Lte"
)

// exclusiveOperators rewrites validated Gte/Lte requirements as the Gt/Lt
// they equal on integers (Gte n is Gt n-1, Lte n is Lt n+1), so everything
// downstream (solver, launch, drift) needs only the Kubernetes operators.
func (np *NodePool) exclusiveOperators() {
	for i, r := range np.Spec.Template.Spec.Requirements {
		if (r.Operator != NodeSelectorOpGte && r.Operator != NodeSelectorOpLte) || len(r.Values) != 1 {
			continue
		}
		n, err := strconv.ParseInt(r.Values[0], 10, 64)
		if err != nil {
			continue // reported by validation
		}
		if r.Operator == NodeSelectorOpGte {
			r.Operator, n = corev1.NodeSelectorOpGt, n-1
		} else {
			r.Operator, n = corev1.NodeSelectorOpLt, n+1
		}
		r.Values = []string{strconv.FormatInt(n, 10)}
		np.Spec.Template.Spec.Requirements[i] = r
	}
}

// NodeSelectorRequirement returns the plain Kubernetes requirement.
func (r NodeSelectorRequirementWithMinValues) NodeSelectorRequirement() corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: append([]string(nil), r.Values...)}
}

// NodeClassReference points a NodePool or NodeClaim at its node class.
type NodeClassReference struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

// ConsolidationPolicy says which nodes consolidation may act on.
type ConsolidationPolicy string

// Consolidation policies of karpenter.sh/v1 (WhenUnderutilized is v1beta1 only).
const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	// ConsolidationPolicyBalanced (Karpenter v1.14) consolidates
	// underutilized nodes only when the savings outweigh the disruption.
	ConsolidationPolicyBalanced              ConsolidationPolicy = "Balanced"
	consolidationPolicyWhenUnderutilizedBeta ConsolidationPolicy = "WhenUnderutilized"
)

// DisruptionReason names why a node is disrupted; budgets may be scoped to reasons.
type DisruptionReason string

// Disruption reasons a budget may name.
const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Disruption is spec.disruption of a NodePool.
type Disruption struct {
	// ConsolidateAfter is how long after the last pod event a node becomes
	// consolidatable; "Never" disables consolidation.
	ConsolidateAfter NillableDuration `json:"consolidateAfter,omitzero"`
	// ConsolidationPolicy is WhenEmpty or WhenEmptyOrUnderutilized.
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// Budgets limit how many nodes may be disrupted at once; the minimum of
	// the active budgets applies.
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget limits voluntary disruption. Nodes is "N" or "P%"; a Schedule (5
// field cron or @daily etc., UTC) with a Duration makes it active only in
// that window; Reasons scope it (empty = all reasons).
type Budget struct {
	Reasons  []DisruptionReason `json:"reasons,omitempty"`
	Nodes    string             `json:"nodes"`
	Schedule *string            `json:"schedule,omitempty"`
	Duration *metav1.Duration   `json:"duration,omitempty"`
}

// NodePoolList groups pools in the order they were loaded.
type NodePoolList []*NodePool
