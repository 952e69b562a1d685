package ec2sim

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// Which resource types a call may tag on create. Each rule names its
// source; FIDELITY.md lists them with the tests that show them.

// instantFleetTaggable are the types CreateFleet's TagSpecifications take
// for an instant fleet. Source: the CreateFleet API reference,
// TagSpecifications ("If the fleet type is instant, specify a resource type
// of fleet to tag the fleet or instance to tag the instances at launch"),
// and the EC2 user guide's "Tag a new EC2 Fleet", which adds volume for
// instant fleets. Network interfaces and spot requests are not among them
// (aws/karpenter-provider-aws #4550: the fleet cannot pass those tags down).
var instantFleetTaggable = map[types.ResourceType]bool{
	types.ResourceTypeFleet: true, types.ResourceTypeInstance: true, types.ResourceTypeVolume: true,
}

// templateTaggable are the types a launch template's data may tag for its
// launches. Source: the API reference of LaunchTemplateTagSpecificationRequest
// (ResourceType: instance | volume | network-interface |
// spot-instances-request; elastic-gpu is no longer offered).
var templateTaggable = map[types.ResourceType]bool{
	types.ResourceTypeInstance: true, types.ResourceTypeVolume: true,
	types.ResourceTypeNetworkInterface: true, types.ResourceTypeSpotInstancesRequest: true,
}

// notTaggable is EC2's answer to a tag specification of a type the call
// cannot tag (the message as RunInstances gives it: aws/aws-cli #2865,
// ansible/ansible #53680).
func notTaggable(rt types.ResourceType) error {
	return protocol.Errorf("InvalidParameterValue", "'%s' is not a valid taggable resource type for this operation.", rt)
}

// checkFleetTagTypes refuses an instant fleet's tag specifications of
// types it cannot tag.
func (c *Cloud) checkFleetTagTypes(in *ec2.CreateFleetInput) error {
	if !c.cfg.Rules.On(fidelity.FleetTagTypes) {
		return nil
	}
	for _, s := range in.TagSpecifications {
		if !instantFleetTaggable[s.ResourceType] {
			return notTaggable(s.ResourceType)
		}
	}
	return nil
}

// checkTemplateTagTypes refuses launch template data that tags a type no
// launch can tag.
func (c *Cloud) checkTemplateTagTypes(data *types.RequestLaunchTemplateData) error {
	if !c.cfg.Rules.On(fidelity.TemplateTagTypes) {
		return nil
	}
	for _, s := range data.TagSpecifications {
		if !templateTaggable[s.ResourceType] {
			return notTaggable(s.ResourceType)
		}
	}
	return nil
}

// spotTagsOnOtherLaunch is the per-override error of a launch that is not
// spot from a template tagging spot requests: EC2 fails it. Source:
// aws/karpenter-provider-aws #5850 (CreateFleet's errors for 70 minutes,
// lifecycle on-demand, InvalidParameterValue with this message).
func (c *Cloud) spotTagsOnOtherLaunch(cd *candidate, life types.InstanceLifecycle) (string, string) {
	if life == types.InstanceLifecycleSpot || !c.cfg.Rules.On(fidelity.SpotTagsOnDemand) {
		return "", ""
	}
	for _, s := range cd.lt.data.TagSpecifications {
		if s.ResourceType == types.ResourceTypeSpotInstancesRequest {
			return "InvalidParameterValue", "You cannot specify tags for Spot instances requests if there are no Spot instances requests being created by the request."
		}
	}
	return "", ""
}

// templateTagSpecs are a template's tag specifications in the form a
// request's take, for authorization.
func templateTagSpecs(data types.RequestLaunchTemplateData) []types.TagSpecification {
	out := make([]types.TagSpecification, 0, len(data.TagSpecifications))
	for _, s := range data.TagSpecifications {
		out = append(out, types.TagSpecification{ResourceType: s.ResourceType, Tags: s.Tags})
	}
	return out
}

// isSpotFleet says whether a fleet request launches spot capacity.
func isSpotFleet(in *ec2.CreateFleetInput) bool {
	spec := in.TargetCapacitySpecification
	if spec == nil {
		return false
	}
	return spec.DefaultTargetCapacityType == types.DefaultTargetCapacityTypeSpot || aws.ToInt32(spec.SpotTargetCapacity) > 0
}
