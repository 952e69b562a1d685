package cloudtest

import (
	"context"
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// FleetAPI is the EC2 call RawInstance.Launch makes (*ec2.Client).
type FleetAPI interface {
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, o ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
}

// RawInstance is one instance launched straight through
// CreateFleet, outside nodewright's launch path: another stack's or another
// tool's instance, or one that carries nodewright's tags without any claim
// having launched it, for the tests that check nodewright tells them apart.
type RawInstance struct {
	LaunchTemplate string
	InstanceType   ec2types.InstanceType
	// Zone or SubnetID places it (one of them).
	Zone, SubnetID string
	Tags           []ec2types.Tag
	// CapacityType is the launch's (on-demand when empty). A launch from a
	// template that tags spot requests must be spot: EC2 fails any other.
	CapacityType ec2types.DefaultTargetCapacityType
}

// Launch launches r and returns its instance id, failing t when EC2 does
// not start one.
func (r RawInstance) Launch(ctx context.Context, t testing.TB, api FleetAPI) string {
	t.Helper()
	override := ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: r.InstanceType}
	if r.Zone != "" {
		override.AvailabilityZone = sdkaws.String(r.Zone)
	}
	if r.SubnetID != "" {
		override.SubnetId = sdkaws.String(r.SubnetID)
	}
	capacityType := r.CapacityType
	if capacityType == "" {
		capacityType = ec2types.DefaultTargetCapacityTypeOnDemand
	}
	out, err := api.CreateFleet(ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: sdkaws.String(r.LaunchTemplate), Version: sdkaws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{override},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: sdkaws.Int32(1), DefaultTargetCapacityType: capacityType},
		TagSpecifications:           []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: r.Tags}},
	})
	if err != nil || len(out.Instances) == 0 || len(out.Instances[0].InstanceIds) == 0 {
		t.Fatalf("raw CreateFleet of %s from %s: %v %+v", r.InstanceType, r.LaunchTemplate, err, out)
	}
	return out.Instances[0].InstanceIds[0]
}
