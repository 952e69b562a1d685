package cloudtest

import (
	"context"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// FleetAPI is the EC2 calls RawInstance.Launch makes (*ec2.Client).
type FleetAPI interface {
	CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, o ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, o ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
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
	id := out.Instances[0].InstanceIds[0]
	awaitVisible(ctx, t, api, id)
	return id
}

// awaitVisible waits until DescribeInstances shows a launched instance
// (simulator rule launch-consistency), as it would long before a test's
// next step in a real account, where booting takes far longer.
func awaitVisible(ctx context.Context, t testing.TB, api FleetAPI, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("raw instance %s never visible: %v", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
