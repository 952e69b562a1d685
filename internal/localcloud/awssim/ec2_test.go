package awssim

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func discovery(cluster string) []types.Filter {
	return []types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{cluster}}}
}

// launchTemplate creates a template on the AL2023 x86 AMI and returns its name.
func launchTemplate(t *testing.T, s *Server, c *ec2.Client, name, userData string) string {
	t.Helper()
	ami, _ := s.EC2().SSMParameter("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
	sgs, err := c.DescribeSecurityGroups(ctx(t), &ec2.DescribeSecurityGroupsInput{Filters: discovery("test")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami), UserData: aws.String(userData),
			SecurityGroupIds: []string{*sgs.SecurityGroups[0].GroupId},
			TagSpecifications: []types.LaunchTemplateTagSpecificationRequest{{ResourceType: types.ResourceTypeVolume,
				Tags: []types.Tag{{Key: aws.String("lt-volume"), Value: aws.String("yes")}}}}},
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeLaunchTemplate,
			Tags: []types.Tag{{Key: aws.String("karpenter.k8s.aws/cluster"), Value: aws.String("test")}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func fleetInput(lt string, capType types.DefaultTargetCapacityType, overrides ...types.FleetLaunchTemplateOverridesRequest) *ec2.CreateFleetInput {
	return &ec2.CreateFleetInput{
		Type:                        types.FleetTypeInstant,
		LaunchTemplateConfigs:       []types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")}, Overrides: overrides}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: capType},
		SpotOptions:                 &types.SpotOptionsRequest{AllocationStrategy: types.SpotAllocationStrategyPriceCapacityOptimized},
		OnDemandOptions:             &types.OnDemandOptionsRequest{AllocationStrategy: types.FleetOnDemandAllocationStrategyLowestPrice},
		TagSpecifications: []types.TagSpecification{
			{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")}}},
			{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("karpenter.sh/nodepool"), Value: aws.String("default")}}},
		},
	}
}

func override(it, zone string) types.FleetLaunchTemplateOverridesRequest {
	return types.FleetLaunchTemplateOverridesRequest{InstanceType: types.InstanceType(it), AvailabilityZone: aws.String(zone)}
}

func TestCreateFleetChoosesCheapestAvailablePool(t *testing.T) {
	tests := []struct {
		name      string
		capType   types.DefaultTargetCapacityType
		exhaust   []ec2sim.Pool
		overrides []types.FleetLaunchTemplateOverridesRequest
		wantType  string
		wantZone  string
		wantErrs  []string
	}{
		{name: "on-demand lowest price", capType: types.DefaultTargetCapacityTypeOnDemand,
			overrides: []types.FleetLaunchTemplateOverridesRequest{override("m5.xlarge", "us-west-2a"), override("c5.large", "us-west-2b"), override("m5.large", "us-west-2a")},
			wantType:  "c5.large", wantZone: "us-west-2b"},
		{name: "on-demand skips exhausted pool and reports ICE", capType: types.DefaultTargetCapacityTypeOnDemand,
			exhaust:   []ec2sim.Pool{{InstanceType: "c5.large", Zone: "us-west-2b", CapacityType: "on-demand"}},
			overrides: []types.FleetLaunchTemplateOverridesRequest{override("m5.xlarge", "us-west-2a"), override("c5.large", "us-west-2b"), override("m5.large", "us-west-2a")},
			wantType:  "m5.large", wantZone: "us-west-2a", wantErrs: []string{"InsufficientInstanceCapacity"}},
		{name: "spot all exhausted", capType: types.DefaultTargetCapacityTypeSpot,
			exhaust:   []ec2sim.Pool{{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "spot"}},
			overrides: []types.FleetLaunchTemplateOverridesRequest{override("m5.large", "us-west-2a")},
			// the pool's error and the whole request's (rule unfulfillable-capacity)
			wantErrs: []string{"InsufficientInstanceCapacity", "UnfulfillableCapacity"}},
		{name: "not offered in zone", capType: types.DefaultTargetCapacityTypeOnDemand,
			overrides: []types.FleetLaunchTemplateOverridesRequest{override("g4dn.xlarge", "us-west-2c")},
			wantErrs:  []string{"Unsupported"}},
		{name: "unknown type", capType: types.DefaultTargetCapacityTypeOnDemand,
			overrides: []types.FleetLaunchTemplateOverridesRequest{override("x9.huge", "us-west-2a"), override("m5.large", "us-west-2c")},
			wantType:  "m5.large", wantZone: "us-west-2c", wantErrs: []string{"InvalidParameterValue"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, cfg := newTestServer(t, nil)
			c := ec2.NewFromConfig(cfg)
			lt := launchTemplate(t, s, c, "nodes", "")
			for _, p := range tc.exhaust {
				s.EC2().SetCapacity(p, 0)
			}
			out, err := c.CreateFleet(ctx(t), fleetInput(lt, tc.capType, tc.overrides...))
			if err != nil {
				t.Fatal(err)
			}
			var codes []string
			for _, e := range out.Errors {
				codes = append(codes, aws.ToString(e.ErrorCode))
			}
			if len(codes) != len(tc.wantErrs) || (len(codes) > 0 && codes[0] != tc.wantErrs[0]) {
				t.Fatalf("errors = %v, want %v", codes, tc.wantErrs)
			}
			if tc.wantType == "" {
				if len(out.Instances) != 0 {
					t.Fatalf("launched %v, want nothing", out.Instances)
				}
				return
			}
			if len(out.Instances) != 1 || string(out.Instances[0].InstanceType) != tc.wantType ||
				aws.ToString(out.Instances[0].LaunchTemplateAndOverrides.Overrides.AvailabilityZone) != tc.wantZone {
				t.Fatalf("instances = %+v, want %s in %s", out.Instances, tc.wantType, tc.wantZone)
			}
			if string(out.Instances[0].Lifecycle) != string(tc.capType) {
				t.Fatalf("lifecycle %s, want %s", out.Instances[0].Lifecycle, tc.capType)
			}
		})
	}
}

func TestCreateFleetSpotPicksCheapestSpotPrice(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "nodes", "")
	s.EC2().SetSpotPrice("m5.large", "us-west-2a", 0.05)
	s.EC2().SetSpotPrice("m5.large", "us-west-2b", 0.01)
	s.EC2().SetSpotPrice("c5.large", "us-west-2a", 0.03)
	out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeSpot,
		override("m5.large", "us-west-2a"), override("m5.large", "us-west-2b"), override("c5.large", "us-west-2a")))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 1 || aws.ToString(out.Instances[0].LaunchTemplateAndOverrides.Overrides.AvailabilityZone) != "us-west-2b" {
		t.Fatalf("got %+v", out.Instances)
	}
	inst, capType, _ := s.EC2().Instance(out.Instances[0].InstanceIds[0])
	if capType != "spot" || inst.InstanceLifecycle != types.InstanceLifecycleTypeSpot {
		t.Fatalf("capacity type %s lifecycle %s", capType, inst.InstanceLifecycle)
	}
}

func TestCreateFleetIdempotentAndTags(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "nodes", "")
	in := fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))
	in.ClientToken = aws.String("claim-abc")
	a, err := c.CreateFleet(ctx(t), in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateFleet(ctx(t), in)
	if err != nil {
		t.Fatal(err)
	}
	if *a.FleetId != *b.FleetId || a.Instances[0].InstanceIds[0] != b.Instances[0].InstanceIds[0] || len(s.EC2().Instances()) != 1 {
		t.Fatalf("ClientToken not idempotent: %v vs %v", a.Instances, b.Instances)
	}
	in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(2)
	if _, err := c.CreateFleet(ctx(t), in); apiCode(err) != "IdempotentParameterMismatch" {
		t.Fatalf("reused token with other parameters: %v", err)
	}
	inst, _, _ := s.EC2().Instance(a.Instances[0].InstanceIds[0])
	if tagValue(inst.Tags, "karpenter.sh/nodepool") != "default" || tagValue(inst.Tags, "aws:ec2:fleet-id") != *a.FleetId {
		t.Fatalf("instance tags %v", inst.Tags)
	}
	vol := s.EC2().ResourceTags(*inst.BlockDeviceMappings[0].Ebs.VolumeId)
	if tagValue(vol, "karpenter.sh/nodepool") != "default" || tagValue(vol, "lt-volume") != "yes" {
		t.Fatalf("volume tags %v", vol)
	}
	// Missing launch template is a per-config error, not a call failure.
	bad := fleetInput("missing", types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))
	out, err := c.CreateFleet(ctx(t), bad)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Errors) < 1 || aws.ToString(out.Errors[0].ErrorCode) != "InvalidLaunchTemplateName.NotFoundException" {
		t.Fatalf("errors %+v", out.Errors)
	}
}

func tagValue(tags []types.Tag, k string) string {
	for _, t := range tags {
		if aws.ToString(t.Key) == k {
			return aws.ToString(t.Value)
		}
	}
	return ""
}

func TestInstanceLifecycleAndDescribe(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "nodes", "")
	before, err := c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{Filters: []types.Filter{{Name: aws.String("availability-zone"), Values: []string{"us-west-2a"}}, discovery("test")[0]}})
	if err != nil || len(before.Subnets) != 1 {
		t.Fatalf("subnets %v %v", before, err)
	}
	in := fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))
	in.TargetCapacitySpecification.TotalTargetCapacity = aws.Int32(7)
	out, err := c.CreateFleet(ctx(t), in)
	if err != nil || len(out.Instances[0].InstanceIds) != 7 {
		t.Fatalf("fleet %v %v", out, err)
	}
	after, _ := c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{SubnetIds: []string{*before.Subnets[0].SubnetId}})
	if *before.Subnets[0].AvailableIpAddressCount-*after.Subnets[0].AvailableIpAddressCount != 7 {
		t.Fatalf("available IPs %d -> %d", *before.Subnets[0].AvailableIpAddressCount, *after.Subnets[0].AvailableIpAddressCount)
	}
	// Pagination with a tag filter.
	var ids []string
	p := ec2.NewDescribeInstancesPaginator(c, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(5),
		Filters: []types.Filter{{Name: aws.String("tag:karpenter.sh/nodepool"), Values: []string{"default"}}, {Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}}})
	pages := allPages[*ec2.DescribeInstancesOutput, ec2.Options](t, p)
	for _, pg := range pages {
		for _, r := range pg.Reservations {
			for _, i := range r.Instances {
				ids = append(ids, *i.InstanceId)
			}
		}
	}
	if len(ids) != 7 || len(pages) != 2 {
		t.Fatalf("described %d instances in %d pages", len(ids), len(pages))
	}
	eventually(t, "running", func() bool {
		d, err := c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: ids[:1]})
		return err == nil && d.Reservations[0].Instances[0].State.Name == types.InstanceStateNameRunning
	})
	term, err := c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: ids[:1]})
	if err != nil || term.TerminatingInstances[0].CurrentState.Name != types.InstanceStateNameShuttingDown {
		t.Fatalf("terminate %+v %v", term, err)
	}
	eventually(t, "terminated", func() bool {
		d, err := c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"terminated"}}}})
		return err == nil && len(d.Reservations) == 1
	})
	_, err = c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0000000000000dead"}})
	if apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Fatalf("err %v", err)
	}
	_, err = c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("bogus"), Values: []string{"x"}}}})
	if apiCode(err) != "InvalidParameterValue" {
		t.Fatalf("err %v", err)
	}
	if _, err := c.CreateTags(ctx(t), &ec2.CreateTagsInput{Resources: ids[1:2], Tags: []types.Tag{{Key: aws.String("karpenter.sh/nodeclaim"), Value: aws.String("nc-1")}}}); err != nil {
		t.Fatal(err)
	}
	d, _ := c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("tag-key"), Values: []string{"karpenter.sh/nodeclaim"}}}})
	if len(d.Reservations) != 1 || *d.Reservations[0].Instances[0].InstanceId != ids[1] {
		t.Fatalf("tag-key filter: %+v", d.Reservations)
	}
}

// placedTemplate creates a template whose instances go into group id.
func placedTemplate(t *testing.T, s *Server, c *ec2.Client, name, id string) string {
	t.Helper()
	return templateWith(t, s, c, name, func(d *types.RequestLaunchTemplateData) {
		d.Placement = &types.LaunchTemplatePlacementRequest{GroupId: aws.String(id)}
	})
}

func addGroup(t *testing.T, s *Server, g ec2sim.PlacementGroup) string {
	t.Helper()
	id, err := s.EC2().AddPlacementGroup(g)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// launchInto launches one instance from lt in zone and returns it, or the
// fleet's error code.
func launchInto(t *testing.T, s *Server, c *ec2.Client, lt, zone string) (types.Instance, string) {
	t.Helper()
	out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", zone)))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) == 0 {
		return types.Instance{}, aws.ToString(out.Errors[0].ErrorCode)
	}
	inst, _, _ := s.EC2().Instance(out.Instances[0].InstanceIds[0])
	return inst, ""
}

// A type whose PlacementGroupInfo lacks a group's strategy is refused in
// that group, as EC2 refuses it; a strategy it lists takes it.
func TestPlacementGroupRefusesAnUnsupportedType(t *testing.T) {
	s, cfg := newTestServer(t, func(o *Options) {
		info := o.Catalog.Types["m5.large"]
		info.PlacementGroupInfo = &types.PlacementGroupInfo{SupportedStrategies: []types.PlacementGroupStrategy{"partition", "spread"}}
		o.Catalog.Types["m5.large"] = info
	})
	c := ec2.NewFromConfig(cfg)
	cluster := placedTemplate(t, s, c, "cluster", addGroup(t, s, ec2sim.PlacementGroup{Name: "c", Strategy: "cluster"}))
	if _, code := launchInto(t, s, c, cluster, "us-west-2a"); code != "InvalidParameterCombination" {
		t.Errorf("m5.large into a cluster group: %q, want InvalidParameterCombination", code)
	}
	spread := placedTemplate(t, s, c, "spread", addGroup(t, s, ec2sim.PlacementGroup{Name: "s", Strategy: "spread"}))
	if _, code := launchInto(t, s, c, spread, "us-west-2a"); code != "" {
		t.Errorf("m5.large into a spread group: %s", code)
	}
}

func TestDescribePlacementGroups(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	part := addGroup(t, s, ec2sim.PlacementGroup{Name: "training", Strategy: "partition", PartitionCount: 3, Tags: map[string]string{"team": "ml"}})
	addGroup(t, s, ec2sim.PlacementGroup{Name: "spread", Strategy: "spread"})
	byName, err := c.DescribePlacementGroups(ctx(t), &ec2.DescribePlacementGroupsInput{GroupNames: []string{"training"},
		Filters: []types.Filter{{Name: aws.String("state"), Values: []string{"available"}}}})
	if err != nil || len(byName.PlacementGroups) != 1 {
		t.Fatalf("by name: %+v %v", byName, err)
	}
	g := byName.PlacementGroups[0]
	if aws.ToString(g.GroupId) != part || g.Strategy != types.PlacementStrategyPartition || aws.ToInt32(g.PartitionCount) != 3 || len(g.Tags) != 1 {
		t.Errorf("group %+v", g)
	}
	byStrategy, err := c.DescribePlacementGroups(ctx(t), &ec2.DescribePlacementGroupsInput{Filters: []types.Filter{
		{Name: aws.String("strategy"), Values: []string{"spread"}}}})
	if err != nil || len(byStrategy.PlacementGroups) != 1 || byStrategy.PlacementGroups[0].SpreadLevel != types.SpreadLevelRack {
		t.Errorf("by strategy: %+v %v", byStrategy, err)
	}
	if _, err := c.DescribePlacementGroups(ctx(t), &ec2.DescribePlacementGroupsInput{GroupNames: []string{"nope"}}); apiCode(err) != "InvalidPlacementGroup.Unknown" {
		t.Errorf("unknown name: %v", err)
	}
}

// Instances record their group and partition; a launch that names no
// partition goes to the emptiest. A cluster group stays in the zone of its
// first instance; a spread group takes seven instances per zone.
func TestPlacementGroupLaunches(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	part := placedTemplate(t, s, c, "part", addGroup(t, s, ec2sim.PlacementGroup{Name: "p", Strategy: "partition", PartitionCount: 2}))
	var partitions []int32
	for range 3 {
		inst, code := launchInto(t, s, c, part, "us-west-2a")
		if code != "" || aws.ToString(inst.Placement.GroupName) != "p" {
			t.Fatalf("partition launch: %s %+v", code, inst.Placement)
		}
		partitions = append(partitions, aws.ToInt32(inst.Placement.PartitionNumber))
	}
	if got := fmt.Sprint(partitions); got != "[1 2 1]" {
		t.Errorf("partitions %s, want [1 2 1] (the emptiest, then the lowest)", got)
	}

	cluster := placedTemplate(t, s, c, "cluster", addGroup(t, s, ec2sim.PlacementGroup{Name: "c", Strategy: "cluster"}))
	if _, code := launchInto(t, s, c, cluster, "us-west-2b"); code != "" {
		t.Fatalf("first cluster launch: %s", code)
	}
	if _, code := launchInto(t, s, c, cluster, "us-west-2a"); code != "InvalidParameterCombination" {
		t.Errorf("cluster launch in another zone: %q", code)
	}
	if _, code := launchInto(t, s, c, cluster, "us-west-2b"); code != "" {
		t.Errorf("cluster launch in its zone: %s", code)
	}

	spread := placedTemplate(t, s, c, "spread", addGroup(t, s, ec2sim.PlacementGroup{Name: "s", Strategy: "spread"}))
	for i := range 7 {
		if _, code := launchInto(t, s, c, spread, "us-west-2a"); code != "" {
			t.Fatalf("spread launch %d: %s", i, code)
		}
	}
	if _, code := launchInto(t, s, c, spread, "us-west-2a"); code != "InsufficientInstanceCapacity" {
		t.Errorf("eighth spread launch in one zone: %q", code)
	}
	if _, code := launchInto(t, s, c, spread, "us-west-2b"); code != "" {
		t.Errorf("spread launch in another zone: %s", code)
	}
}
