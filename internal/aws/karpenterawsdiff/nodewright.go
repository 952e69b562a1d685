package karpenterawsdiff

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
)

// Requests are the launch requests one provider made for one claim.
type Requests struct {
	Templates []*ec2.CreateLaunchTemplateInput
	Fleet     *ec2.CreateFleetInput
}

// errUnused answers calls a launch does not make.
var errUnused = errors.New("not part of a launch")

// nwEC2 is the EC2 API nodewright's provider sees: the world's discovery
// answers, every template missing, every fleet launching its first
// override; it records the launch requests.
type nwEC2 struct {
	w  *world
	mu sync.Mutex
	Requests
}

func (e *nwEC2) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	return &ec2.DescribeSubnetsOutput{Subnets: e.w.describeSubnets(in)}, nil
}

func (e *nwEC2) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	return &ec2.DescribeSecurityGroupsOutput{SecurityGroups: describeSecurityGroups(in)}, nil
}

func (e *nwEC2) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	return &ec2.DescribeImagesOutput{Images: e.w.describeImages(in)}, nil
}

func (e *nwEC2) DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	return &ec2.DescribeLaunchTemplatesOutput{}, nil
}

func (e *nwEC2) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.Templates = append(e.Templates, in)
	id := fmt.Sprintf("lt-%017d", len(e.Templates))
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{LaunchTemplateId: &id, LaunchTemplateName: in.LaunchTemplateName}}, nil
}

func (e *nwEC2) DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	return nil, errUnused
}

func (e *nwEC2) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.Fleet != nil {
		return nil, errors.New("a second CreateFleet for one claim")
	}
	e.Fleet = in
	return firstOverrideLaunched(in), nil
}

// firstOverrideLaunched is a fleet that launched its first override.
func firstOverrideLaunched(in *ec2.CreateFleetInput) *ec2.CreateFleetOutput {
	cfg := in.LaunchTemplateConfigs[0]
	ov := cfg.Overrides[0]
	lifecycle := ec2types.InstanceLifecycleOnDemand
	if in.TargetCapacitySpecification.DefaultTargetCapacityType == ec2types.DefaultTargetCapacityTypeSpot {
		lifecycle = ec2types.InstanceLifecycleSpot
	}
	return &ec2.CreateFleetOutput{FleetId: sdkaws.String("fleet-00000000000000001"), Instances: []ec2types.CreateFleetInstance{{
		InstanceIds: []string{"i-00000000000000001"}, InstanceType: ov.InstanceType, Lifecycle: lifecycle,
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecification{LaunchTemplateName: cfg.LaunchTemplateSpecification.LaunchTemplateName},
			Overrides: &ec2types.FleetLaunchTemplateOverrides{
				InstanceType: ov.InstanceType, SubnetId: ov.SubnetId, AvailabilityZone: ov.AvailabilityZone, ImageId: ov.ImageId,
			},
		},
	}}}
}

func (e *nwEC2) DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return &ec2.DescribeInstancesOutput{}, nil
}

func (e *nwEC2) TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	return nil, errUnused
}

func (e *nwEC2) DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	return nil, errUnused
}

func (e *nwEC2) DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	return nil, errUnused
}

func (e *nwEC2) DescribeAvailabilityZones(context.Context, *ec2.DescribeAvailabilityZonesInput, ...func(*ec2.Options)) (*ec2.DescribeAvailabilityZonesOutput, error) {
	return nil, errUnused
}

func (e *nwEC2) DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	return nil, errUnused
}

func (e *nwEC2) DescribeCapacityReservations(_ context.Context, in *ec2.DescribeCapacityReservationsInput, _ ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error) {
	return &ec2.DescribeCapacityReservationsOutput{CapacityReservations: e.w.describeCapacityReservations(in)}, nil
}

func (e *nwEC2) DescribePlacementGroups(context.Context, *ec2.DescribePlacementGroupsInput, ...func(*ec2.Options)) (*ec2.DescribePlacementGroupsOutput, error) {
	return &ec2.DescribePlacementGroupsOutput{}, nil
}

// DescribeInstanceStatus: the world's instances never fail a check (the
// launch requests are what is compared).
func (e *nwEC2) DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	return &ec2.DescribeInstanceStatusOutput{}, nil
}

// discovery is what nodewright's provider finds for a class in the world:
// Karpenter's class status is filled from it, so both launch from the same
// subnets and security groups.
type discovery struct {
	Subnets        []nwaws.Subnet
	SecurityGroups []nwaws.SecurityGroup
	Profile        string
}

// newNodewright is nodewright's provider over the world.
func newNodewright(w *world) (*nwaws.Provider, *nwEC2, error) {
	api := &nwEC2{w: w}
	p, err := nwaws.New(nwaws.Options{
		ClusterName: clusterName, Region: region, Owner: owner, Logger: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return worldNow },
	}, nwaws.Clients{EC2: api, SSM: ssmAPI{w}, EKS: eksAPI{w}}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("nodewright provider: %w", err)
	}
	return p, api, nil
}

func discover(ctx context.Context, w *world, nc *apis.EC2NodeClass) (discovery, error) {
	p, _, err := newNodewright(w)
	if err != nil {
		return discovery{}, err
	}
	var d discovery
	if d.Subnets, err = p.Subnets(ctx, nc); err != nil {
		return discovery{}, fmt.Errorf("subnets: %w", err)
	}
	if d.SecurityGroups, err = p.SecurityGroups(ctx, nc); err != nil {
		return discovery{}, fmt.Errorf("security groups: %w", err)
	}
	d.Profile = nwaws.InstanceProfileName(clusterName, nc.Spec.Role)
	if nc.Spec.InstanceProfile != nil && *nc.Spec.InstanceProfile != "" {
		d.Profile = *nc.Spec.InstanceProfile
	}
	return d, nil
}

// nodewrightLaunch launches the claim with nodewright's provider and
// returns its requests.
func nodewrightLaunch(ctx context.Context, w *world, nc *apis.EC2NodeClass, claim *apis.NodeClaim, types []string) (Requests, error) {
	p, api, err := newNodewright(w)
	if err != nil {
		return Requests{}, err
	}
	cat := w.cat
	if len(nc.Spec.CapacityReservationSelectorTerms) > 0 {
		cat = p.WithReservations(ctx, cat, []*apis.EC2NodeClass{nc})
	}
	cat = cat.ForNodeClass(nc.Name)
	var its []*catalog.InstanceType
	for _, t := range types {
		it, ok := cat.Get(t)
		if !ok {
			return Requests{}, fmt.Errorf("catalog has no %s", t)
		}
		its = append(its, it)
	}
	if _, err := p.Launch(ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: its, New: true}); err != nil {
		return api.Requests, fmt.Errorf("nodewright launch: %w", err)
	}
	return api.Requests, nil
}
