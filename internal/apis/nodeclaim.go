package apis

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Well-known labels, annotations and taints nodewright puts on NodeClaims and
// Nodes, identical to Karpenter's so workloads move over unchanged.
const (
	NodePoolLabelKey      = "karpenter.sh/nodepool"
	NodeClassLabelKey     = "karpenter.k8s.aws/ec2nodeclass"
	CapacityTypeLabelKey  = "karpenter.sh/capacity-type"
	NodeRegisteredLabel   = "karpenter.sh/registered"
	NodeInitializedLabel  = "karpenter.sh/initialized"
	DoNotDisruptAnnotKey  = "karpenter.sh/do-not-disrupt"
	NodePoolHashAnnotKey  = "karpenter.sh/nodepool-hash"
	NodeClassHashAnnotKey = "karpenter.k8s.aws/ec2nodeclass-hash"
	DisruptedTaintKey     = "karpenter.sh/disrupted"
	UnregisteredTaintKey  = "karpenter.sh/unregistered"
	TerminationFinalizer  = "karpenter.sh/termination"

	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"
)

// NodeClaim condition types (status.conditions[].type).
const (
	ConditionLaunched       = "Launched"
	ConditionRegistered     = "Registered"
	ConditionInitialized    = "Initialized"
	ConditionDrifted        = "Drifted"
	ConditionConsolidatable = "Consolidatable"
	ConditionDisrupting     = "Disrupting"
)

// NodeClaim is the record nodewright keeps for each launched node. It has the
// shape of karpenter.sh/v1 NodeClaim but lives in DynamoDB, not in the cluster.
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              NodeClaimSpec   `json:"spec"`
	Status            NodeClaimStatus `json:"status,omitempty"`
	// NodePoolHash is NodePool.Hash() of the pool at launch time (drift).
	NodePoolHash string `json:"nodePoolHash,omitempty"`
	// NodeClassHash is EC2NodeClass.Hash() of the class at launch time (drift).
	NodeClassHash string `json:"nodeClassHash,omitempty"`
}

// NodeClaimSpec is what was asked for when the claim was created.
type NodeClaimSpec struct {
	Requirements           []NodeSelectorRequirementWithMinValues `json:"requirements"`
	Taints                 []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                         `json:"startupTaints,omitempty"`
	Resources              ResourceRequirements                   `json:"resources,omitempty"`
	NodeClassRef           *NodeClassReference                    `json:"nodeClassRef"`
	ExpireAfter            NillableDuration                       `json:"expireAfter,omitzero"`
	TerminationGracePeriod *metav1.Duration                       `json:"terminationGracePeriod,omitempty"`
}

// ResourceRequirements are the summed requests of the pods the claim was made for.
type ResourceRequirements struct {
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaimStatus is what happened to the claim.
type NodeClaimStatus struct {
	ProviderID       string              `json:"providerID,omitempty"`
	InstanceID       string              `json:"instanceID,omitempty"`
	NodeName         string              `json:"nodeName,omitempty"`
	ImageID          string              `json:"imageID,omitempty"`
	Capacity         corev1.ResourceList `json:"capacity,omitempty"`
	Allocatable      corev1.ResourceList `json:"allocatable,omitempty"`
	Conditions       []metav1.Condition  `json:"conditions,omitempty"`
	LastPodEventTime metav1.Time         `json:"lastPodEventTime,omitzero"`
}

// NodePoolName returns the karpenter.sh/nodepool label ("" when absent).
func (nc *NodeClaim) NodePoolName() string { return nc.Labels[NodePoolLabelKey] }

// SetCondition sets (or updates) a condition; LastTransitionTime changes only
// when the status changes, as meta.SetStatusCondition does.
func (nc *NodeClaim) SetCondition(condType string, status metav1.ConditionStatus, reason, message string, now metav1.Time) {
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message,
		LastTransitionTime: now, ObservedGeneration: nc.Generation,
	})
}

// ClearCondition removes a condition.
func (nc *NodeClaim) ClearCondition(condType string) {
	meta.RemoveStatusCondition(&nc.Status.Conditions, condType)
}

// Condition returns the condition of that type, or nil.
func (nc *NodeClaim) Condition(condType string) *metav1.Condition {
	return meta.FindStatusCondition(nc.Status.Conditions, condType)
}

// IsTrue reports whether the condition is present with status True.
func (nc *NodeClaim) IsTrue(condType string) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, condType)
}
