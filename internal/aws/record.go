package aws

import (
	"maps"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// AnnotationLaunchTemplate names the launch template a NodeClaim's instance
// was launched from. The lifecycle's launch template garbage collection keeps
// every template a live claim names (DeleteUnusedLaunchTemplates).
const AnnotationLaunchTemplate = "nodewright.io/launch-template"

// AnnotationCapacityBlockEnd records when the capacity block a claim's
// instance runs in ends (RFC 3339): the lifecycle drains the node ahead of
// EC2's reclaim.
const AnnotationCapacityBlockEnd = "nodewright.io/capacity-block-end"

// Well-known labels Record sets from the launched instance.
const (
	LabelInstanceType = labelInstanceType
	LabelZone         = labelZone
	LabelZoneID       = "topology.k8s.aws/zone-id"
	LabelCapacityType = labelCapacityType
)

// Record writes what the launch decided into the NodeClaim: provider ID,
// instance and image IDs, the instance type / zone / capacity type labels the
// claim's requirements left open, the placement group labels, the launch
// template annotation and the Launched condition. The caller persists the claim.
func (i Instance) Record(claim *apis.NodeClaim, now metav1.Time) {
	claim.Status.ProviderID = i.ProviderID()
	claim.Status.InstanceID = i.ID
	claim.Status.ImageID = i.ImageID
	if claim.Labels == nil {
		claim.Labels = map[string]string{}
	}
	claim.Labels[LabelInstanceType] = i.Type
	claim.Labels[LabelZone] = i.Zone
	if i.ZoneID != "" {
		claim.Labels[LabelZoneID] = i.ZoneID
	}
	claim.Labels[LabelCapacityType] = i.CapacityType
	if i.LaunchTemplate != "" {
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[AnnotationLaunchTemplate] = i.LaunchTemplate
	}
	i.RecordReservation(claim)
	i.RecordPlacement(claim)
	claim.SetCondition(apis.ConditionLaunched, metav1.ConditionTrue, "Launched",
		"instance "+i.ID+" ("+i.Type+", "+i.Zone+", "+i.CapacityType+")", now)
}

// RecordReservation writes the labels of the capacity reservation the
// instance runs in and, for a capacity block with an end, that end
// (AnnotationCapacityBlockEnd). Nothing for an instance in none.
func (i Instance) RecordReservation(claim *apis.NodeClaim) {
	r := i.Reservation
	if r == nil || i.CapacityType != catalog.CapacityTypeReserved {
		return
	}
	if claim.Labels == nil {
		claim.Labels = map[string]string{}
	}
	maps.Copy(claim.Labels, catalog.ReservationLabels(*r))
	if r.ReservationType == catalog.ReservationTypeCapacityBlock && r.ReservationEnd != nil {
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		claim.Annotations[AnnotationCapacityBlockEnd] = r.ReservationEnd.UTC().Format(time.RFC3339)
	}
}

// RecordPlacement writes the labels of the placement group (and partition)
// the instance runs in, as Karpenter labels such nodes. Nothing for an
// instance in none.
func (i Instance) RecordPlacement(claim *apis.NodeClaim) {
	if i.PlacementGroupID == "" {
		return
	}
	if claim.Labels == nil {
		claim.Labels = map[string]string{}
	}
	claim.Labels[LabelPlacementGroupID] = i.PlacementGroupID
	if i.PlacementPartition > 0 {
		claim.Labels[LabelPlacementGroupPartition] = strconv.Itoa(int(i.PlacementPartition))
	}
}
