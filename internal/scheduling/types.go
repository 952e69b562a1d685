package scheduling

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nodewright/nodewright/internal/catalog"
)

// Input is everything one solve looks at. The solver never mutates it.
type Input struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// Nodes are existing nodes and in-flight NodeClaims with the pods already
	// bound or nominated to them; they count for capacity, topology, host
	// ports, anti-affinity and NodePool limits.
	Nodes []*ExistingNode
	// NodePools are the templates new claims come from.
	NodePools []*NodePool
	// InstanceTypes lists, per NodePool name, the instance types that pool may
	// launch with allocatable already computed for its node class. Pools
	// missing from the map use DefaultInstanceTypes.
	InstanceTypes        map[string][]*InstanceType
	DefaultInstanceTypes []*InstanceType
	// DaemonSets add per-node overhead (and host ports) to every new node
	// whose instance type and NodePool they are compatible with.
	DaemonSets []*appsv1.DaemonSet
	// Volumes resolve pods' PVC topology.
	PersistentVolumes      []*corev1.PersistentVolume
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	StorageClasses         []*storagev1.StorageClass
	// Unavailable offerings (the ICE cache): never chosen.
	Unavailable map[OfferingKey]bool
	// Requests, when set, holds the pods' requests for a caller that
	// solves many times over one cluster (and made the nodes' digests
	// with it).
	Requests *RequestCache
	// Policy holds the controller's planning settings.
	Policy Policy
}

// Policy is Karpenter's two planning policies (v1.14.1
// pkg/operator/options: MIN_VALUES_POLICY, PREFERENCE_POLICY); the zero
// value is Karpenter's defaults, Strict and Respect.
type Policy struct {
	// MinValuesBestEffort makes a claim whose options cannot keep a
	// requirement's minValues with the values there are, the claim's
	// minValues lowered to match and MinValuesRelaxed set, where Strict
	// makes no claim.
	MinValuesBestEffort bool
	// IgnorePreferences plans as if pods had no preferred node affinity,
	// no preferred pod (anti-)affinity and no ScheduleAnyway spread.
	IgnorePreferences bool
}

// OfferingKey names one launchable (instance type, zone, capacity type[,
// reservation]): catalog.OfferingKey, the key of the ICE set everywhere.
type OfferingKey = catalog.OfferingKey

// NodePool is the solver's view of a karpenter.sh/v1 NodePool.
type NodePool struct {
	Name string
	// Weight orders pools, higher first; ties break by name.
	Weight int32
	// Requirements is the template's requirements (with minValues).
	Requirements Requirements
	// Labels are the template's labels; they become In requirements.
	Labels        map[string]string
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	// Limits caps the summed capacity of the pool's nodes (cpu, memory,
	// nodes, extended resources). Nil means unlimited.
	Limits corev1.ResourceList
	// NodeClass is the EC2NodeClass name (carried into claims).
	NodeClass string
}

// Offering is one (zone, capacity type) an instance type launches in.
type Offering struct {
	Zone         string
	ZoneID       string
	CapacityType string
	Price        float64
	Available    bool
	// ReservationID names the capacity reservation of a reserved
	// offering; ReservationCapacity is how many new claims it takes
	// (0: no limit, for offerings without a reservation).
	ReservationID       string
	ReservationCapacity int
	// ReservationType ("default" or "capacity-block") and Interruptible
	// describe the reservation, for requirements on their labels.
	ReservationType string
	Interruptible   bool
	// Partition is the partition of the class's partition placement group
	// a node of this offering lands in (1-based; 0 outside such a group).
	// EC2 picks it per launch, so each partition is its own offering, as
	// in Karpenter: requirements and topology spread can then select it.
	Partition int
}

// InstanceType is the solver's view of a catalog type for one NodePool.
type InstanceType struct {
	Name string
	// Labels are the type-level labels (arch, os, instance-type, family, ...).
	Labels map[string]string
	// Capacity is the hardware; Allocatable is what pods may use after
	// kube-reserved, system-reserved and eviction thresholds.
	Capacity    corev1.ResourceList
	Allocatable corev1.ResourceList
	Offerings   []Offering
}

// ExistingNode is a node (or in-flight NodeClaim) already in the cluster.
type ExistingNode struct {
	Name   string
	Labels map[string]string
	Taints []corev1.Taint
	// StartupTaints are ignored while the node is not initialized.
	StartupTaints []corev1.Taint
	Allocatable   corev1.ResourceList
	// Capacity counts toward NodePool limits (defaults to Allocatable).
	Capacity corev1.ResourceList
	// Pods already bound or nominated here.
	Pods []*corev1.Pod
	// VolumeLimits is how many volumes each CSI driver may attach here
	// (its CSINode's allocatable counts); nil for no limits, as for an
	// in-flight claim whose CSINode does not exist yet.
	VolumeLimits map[string]int
	// Digest, when set, must be DigestNode of this node as it is: a caller
	// that solves many times over one cluster (a disruption pass's
	// simulations) digests each node once instead of once per solve.
	Digest *NodeDigest
	// Initialized is false for in-flight claims and nodes still coming up:
	// their ephemeral and startup taints are ignored, and DaemonSet pods not
	// yet running are reserved for.
	Initialized bool
	// InFlight marks a launched NodeClaim with no Node yet.
	InFlight bool
	// MarkedForDeletion nodes take no new pods.
	MarkedForDeletion bool
}

// Plan is the solver's answer.
type Plan struct {
	NodeClaims    []*NodeClaimPlan `json:"nodeClaims"`
	ExistingNodes []*NodePlacement `json:"existingNodes"`
	Unschedulable []*Unschedulable `json:"unschedulable"`
	CostPerHour   float64          `json:"costPerHour"`
	// LowerBoundPerHour is what the cheapest fractional cover of the new
	// claims' pods would cost (see lowerbound.go): no plan placing them on
	// new nodes costs less.
	LowerBoundPerHour float64 `json:"lowerBoundPerHour"`
	// ExpectedCostPerHour sums the claims' expected launch prices.
	ExpectedCostPerHour float64 `json:"expectedCostPerHour"`
	// SkippedNodePools are the NodePools the solve left out, with why (as
	// Karpenter skips a NodePool whose requirements filter out all
	// instance types, and provisions from the others).
	SkippedNodePools []SkippedNodePool `json:"skippedNodePools,omitempty"`
}

// SkippedNodePool is a NodePool no claim can come from, with the reason.
type SkippedNodePool struct {
	NodePool string `json:"nodePool"`
	Reason   string `json:"reason"`
}

// CostOverLowerBound is CostPerHour / LowerBoundPerHour, 1 for a plan
// with nothing to buy.
func (p *Plan) CostOverLowerBound() float64 {
	if p.LowerBoundPerHour <= 0 {
		return 1
	}
	return p.CostPerHour / p.LowerBoundPerHour
}

// ClaimSummary is what a planned claim is: its name, pool and class, and
// the offering it buys. simulate's output embeds it as it is.
type ClaimSummary struct {
	Name         string  `json:"name"`
	NodePool     string  `json:"nodePool"`
	NodeClass    string  `json:"nodeClass,omitempty"`
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	Zone         string  `json:"zone"`
	PricePerHour float64 `json:"pricePerHour"`
	// ExpectedPricePerHour is what the claim is expected to launch at:
	// PricePerHour for on-demand, more for spot (see launchPrice).
	ExpectedPricePerHour float64 `json:"expectedPricePerHour"`
}

// NodeClaimPlan is one new node to launch.
type NodeClaimPlan struct {
	ClaimSummary `json:",inline"`
	// InstanceTypeOptions are the types CreateFleet may launch, cheapest
	// first, at most 60.
	InstanceTypeOptions []string                         `json:"instanceTypeOptions"`
	Requirements        []corev1.NodeSelectorRequirement `json:"requirements"`
	MinValues           map[string]int                   `json:"minValues,omitempty"`
	// MinValuesRelaxed says a minValues is lower than the NodePool's
	// (Policy.MinValuesBestEffort); the claim carries Karpenter's
	// karpenter.sh/nodeclaim-min-values-relaxed annotation.
	MinValuesRelaxed bool                                     `json:"minValuesRelaxed,omitempty"`
	Labels           map[string]string                        `json:"labels"`
	Taints           []corev1.Taint                           `json:"taints"`
	StartupTaints    []corev1.Taint                           `json:"startupTaints,omitempty"`
	Allocatable      corev1.ResourceList                      `json:"allocatable"`
	Requests         corev1.ResourceList                      `json:"requests"`
	Pods             []string                                 `json:"pods"`
	PodRefs          []*corev1.Pod                            `json:"-"`
	OfferingPrices   map[string]map[string]map[string]float64 `json:"-"`
}

// NodePlacement lists pending pods placed on an existing or in-flight node.
type NodePlacement struct {
	Name    string        `json:"name"`
	Pods    []string      `json:"pods"`
	PodRefs []*corev1.Pod `json:"-"`
}

// Unschedulable is a pod the plan cannot place, with a reason for people.
type Unschedulable struct {
	Pod    string      `json:"pod"`
	Reason string      `json:"reason"`
	PodRef *corev1.Pod `json:"-"`
}
