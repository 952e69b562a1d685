package apis

import (
	"strconv"
	"time"

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
	// MinValuesRelaxedAnnotKey marks a claim made with fewer values than a
	// minValues asked (Karpenter v1.14.1 NodeClaimMinValuesRelaxedAnnotationKey).
	MinValuesRelaxedAnnotKey = "karpenter.sh/nodeclaim-min-values-relaxed"
	DisruptedTaintKey        = "karpenter.sh/disrupted"
	UnregisteredTaintKey     = "karpenter.sh/unregistered"
	TerminationFinalizer     = "karpenter.sh/termination"
	// NodewrightPrefix starts nodewright's own labels, annotations and tags
	// (bookkeeping, not part of Karpenter's contract).
	NodewrightPrefix = "nodewright.io/"

	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"

	// Labels only nodes in a capacity reservation carry.
	CapacityReservationIDLabelKey            = "karpenter.k8s.aws/capacity-reservation-id"
	CapacityReservationTypeLabelKey          = "karpenter.k8s.aws/capacity-reservation-type"
	CapacityReservationInterruptibleLabelKey = "karpenter.k8s.aws/capacity-reservation-interruptible"

	// Labels of a node launched into its EC2NodeClass's placement group:
	// the group's id and, in a partition group, the partition (1-based).
	PlacementGroupIDLabelKey        = "karpenter.k8s.aws/placement-group-id"
	PlacementGroupPartitionLabelKey = "karpenter.k8s.aws/placement-group-partition"
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

// NextLaunchAttemptAnnotKey records the claim's first CreateFleet attempt
// not known to be settled (internal/aws LaunchRequest.FirstAttempt): the
// next launch of the claim starts with that attempt's client token.
const NextLaunchAttemptAnnotKey = NodewrightPrefix + "next-launch-attempt"

// NextLaunchAttempt is the recorded first unsettled launch attempt (0 when
// none is recorded or the value is not a count).
func (nc *NodeClaim) NextLaunchAttempt() int {
	n, err := strconv.Atoi(nc.Annotations[NextLaunchAttemptAnnotKey])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// SetNextLaunchAttempt records the first unsettled launch attempt.
func (nc *NodeClaim) SetNextLaunchAttempt(n int) {
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[NextLaunchAttemptAnnotKey] = strconv.Itoa(n)
}

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

// ConditionDisruptionReason records why a claim was marked for deletion
// (Karpenter v1's DisruptionReason condition): Status True, Reason one of
// the DeletionReason* values.
const ConditionDisruptionReason = "DisruptionReason"

// Reasons a NodeClaim is marked for deletion. The first three match
// Karpenter's disruption reasons (and budgets' DisruptionReason values).
const (
	DeletionReasonEmpty         = string(DisruptionReasonEmpty)
	DeletionReasonDrifted       = string(DisruptionReasonDrifted)
	DeletionReasonUnderutilized = string(DisruptionReasonUnderutilized)
	DeletionReasonExpired       = "Expired"
	DeletionReasonInterrupted   = "Interrupted"
	// DeletionReasonManual: a person asked (CLI).
	DeletionReasonManual = "Manual"
	// DeletionReasonOverprovisioned: a static NodePool has more nodes than
	// its spec.replicas (Karpenter's static deprovisioning).
	DeletionReasonOverprovisioned = "Overprovisioned"
)

// The deletion mark.
//
// A NodeClaim is marked for deletion by setting metadata.deletionTimestamp
// (the time of the decision) and the DisruptionReason condition, in one
// conditional write through store.MutateNodeClaim:
//
//	store.MutateNodeClaim(ctx, name, func(c *apis.NodeClaim) error {
//		c.MarkForDeletion(apis.DeletionReasonExpired, "expireAfter 720h elapsed", metav1.NewTime(now))
//		return nil
//	})
//
// The mark is never removed. The lifecycle function then runs the
// termination workflow (internal/termination) on the claim until it is
// tombstoned. The termination grace period counts from the deletion
// timestamp, so marking again must not move it: MarkForDeletion keeps the
// first mark and its reason.

// MarkForDeletion marks the claim for deletion with reason (a DeletionReason*
// value) at now. It reports whether the claim was not marked before; an
// existing mark (timestamp and reason) is kept.
func (nc *NodeClaim) MarkForDeletion(reason, message string, now metav1.Time) bool {
	if nc.DeletionTimestamp != nil {
		return false
	}
	t := now
	nc.DeletionTimestamp = &t
	nc.SetCondition(ConditionDisruptionReason, metav1.ConditionTrue, reason, message, now)
	return true
}

// Deleting reports whether the claim is marked for deletion.
func (nc *NodeClaim) Deleting() bool { return nc.DeletionTimestamp != nil }

// DeletionReason is the reason the claim was marked for deletion ("" when
// it is not marked or the mark carries no reason).
func (nc *NodeClaim) DeletionReason() string {
	if nc.DeletionTimestamp == nil {
		return ""
	}
	if c := nc.Condition(ConditionDisruptionReason); c != nil {
		return c.Reason
	}
	return ""
}

// TerminationDeadline is when the termination workflow stops waiting for
// evictions (pods are then deleted, do-not-disrupt and PDBs included):
// the deletion timestamp plus spec.terminationGracePeriod. ok is false when
// the claim is not marked or has no grace period (the drain then waits as
// long as it takes).
func (nc *NodeClaim) TerminationDeadline() (deadline time.Time, ok bool) {
	if nc.DeletionTimestamp == nil || nc.Spec.TerminationGracePeriod == nil {
		return time.Time{}, false
	}
	return nc.DeletionTimestamp.Add(nc.Spec.TerminationGracePeriod.Duration), true
}
