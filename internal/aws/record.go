package aws

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

// AnnotationLaunchTemplate names the launch template a NodeClaim's instance
// was launched from. The lifecycle's launch template garbage collection keeps
// every template a live claim names (DeleteUnusedLaunchTemplates).
const AnnotationLaunchTemplate = "nodewright.io/launch-template"

// Well-known labels Record sets from the launched instance.
const (
	LabelInstanceType = labelInstanceType
	LabelZone         = labelZone
	LabelZoneID       = "topology.k8s.aws/zone-id"
	LabelCapacityType = labelCapacityType
)

// Record writes what the launch decided into the NodeClaim: provider ID,
// instance and image IDs, the instance type / zone / capacity type labels the
// claim's requirements left open, the launch template annotation and the
// Launched condition. The caller persists the claim.
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
	claim.SetCondition(apis.ConditionLaunched, metav1.ConditionTrue, "Launched",
		"instance "+i.ID+" ("+i.Type+", "+i.Zone+", "+i.CapacityType+")", now)
}
