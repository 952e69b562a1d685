package awssim

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
)

// The rules of ec2sim/tagrules.go, each against the source it names.

func tag(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }

// TestRuleFleetTagTypes (rule fleet-tag-types): CreateFleet API reference,
// TagSpecifications, and the EC2 user guide's "Tag a new EC2 Fleet".
func TestRuleFleetTagTypes(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "lt-tags", "")
	for _, rt := range []types.ResourceType{types.ResourceTypeNetworkInterface, types.ResourceTypeSpotInstancesRequest} {
		in := fleetInput(lt, types.DefaultTargetCapacityTypeSpot, override("m5.large", "us-west-2a"))
		in.TagSpecifications = append(in.TagSpecifications, types.TagSpecification{ResourceType: rt, Tags: []types.Tag{tag("a", "b")}})
		_, err := c.CreateFleet(ctx(t), in)
		if apiCode(err) != "InvalidParameterValue" || !strings.Contains(err.Error(), "'"+string(rt)+"' is not a valid taggable resource type") {
			t.Errorf("instant fleet tagging %s: %v, want InvalidParameterValue naming it", rt, err)
		}
	}
	in := fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))
	in.TagSpecifications = append(in.TagSpecifications, types.TagSpecification{ResourceType: types.ResourceTypeFleet, Tags: []types.Tag{tag("a", "b")}})
	if out, err := c.CreateFleet(ctx(t), in); err != nil || len(out.Instances) != 1 {
		t.Errorf("fleet, instance and volume tags: %v %+v", err, out)
	}
}

// TestRuleTemplateTagTypes (rule template-tag-types): LaunchTemplateTagSpecificationRequest takes
// instance, volume, network-interface and spot-instances-request; the
// template itself is tagged as launch-template only.
func TestRuleTemplateTagTypes(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	ami, _ := s.EC2().SSMParameter("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
	create := func(name string, data []types.LaunchTemplateTagSpecificationRequest, own types.ResourceType) error {
		_, err := c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami), TagSpecifications: data},
			TagSpecifications:  []types.TagSpecification{{ResourceType: own, Tags: []types.Tag{tag("a", "b")}}},
		})
		return err
	}
	all := []types.LaunchTemplateTagSpecificationRequest{}
	for _, rt := range []types.ResourceType{types.ResourceTypeInstance, types.ResourceTypeVolume, types.ResourceTypeNetworkInterface, types.ResourceTypeSpotInstancesRequest} {
		all = append(all, types.LaunchTemplateTagSpecificationRequest{ResourceType: rt, Tags: []types.Tag{tag("a", "b")}})
	}
	if err := create("tags-ok", all, types.ResourceTypeLaunchTemplate); err != nil {
		t.Errorf("template tagging what its launches create: %v", err)
	}
	bad := []types.LaunchTemplateTagSpecificationRequest{{ResourceType: types.ResourceTypeFleet, Tags: []types.Tag{tag("a", "b")}}}
	if err := create("tags-bad-data", bad, types.ResourceTypeLaunchTemplate); apiCode(err) != "InvalidParameterValue" {
		t.Errorf("template data tagging fleets: %v, want InvalidParameterValue", err)
	}
	if err := create("tags-bad-own", nil, types.ResourceTypeInstance); apiCode(err) != "InvalidParameterValue" {
		t.Errorf("template tagged as an instance: %v, want InvalidParameterValue", err)
	}
}

// TestRuleSpotTagsOnDemand (rule spot-tags-on-demand): aws/karpenter-provider-aws
// #5850, the per-override error of an on-demand launch whose template tags
// spot requests; the same template launches spot.
func TestRuleSpotTagsOnDemand(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	ami, _ := s.EC2().SSMParameter("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
	if _, err := c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("spot-tagged"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami), TagSpecifications: []types.LaunchTemplateTagSpecificationRequest{
			{ResourceType: types.ResourceTypeSpotInstancesRequest, Tags: []types.Tag{tag("a", "b")}}}},
	}); err != nil {
		t.Fatal(err)
	}
	out, err := c.CreateFleet(ctx(t), fleetInput("spot-tagged", types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a")))
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InvalidParameterValue" ||
		out.Errors[0].Lifecycle != types.InstanceLifecycleOnDemand ||
		!strings.Contains(aws.ToString(out.Errors[0].ErrorMessage), "You cannot specify tags for Spot instances requests") {
		t.Errorf("on-demand launch from a spot-tagged template: %+v", out)
	}
	out, err = c.CreateFleet(ctx(t), fleetInput("spot-tagged", types.DefaultTargetCapacityTypeSpot, override("m5.large", "us-west-2a")))
	if err != nil || len(out.Instances) != 1 {
		t.Errorf("spot launch from the same template: %v %+v", err, out)
	}
}

// TestRuleTemplateRequestTags (rule template-request-tags): IAM authorizes the network
// interface (and spot request) a fleet's launch creates against the
// request tags its launch template gives them; the fleet's own tags do not
// reach them (aws/karpenter-provider-aws #4550, PR #4911: Karpenter's
// templates tag both, its policy requires the tags on both).
func TestRuleTemplateRequestTags(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	admin := ec2.NewFromConfig(cfg)
	policy, err := iam.ParsePolicyJSON("launch", []byte(`{"Version":"2012-10-17","Statement":[
		{"Sid":"Tagged","Effect":"Allow","Action":["ec2:CreateFleet","ec2:RunInstances","ec2:CreateTags"],
		 "Resource":["arn:aws:ec2:*:*:fleet/*","arn:aws:ec2:*:*:instance/*","arn:aws:ec2:*:*:volume/*","arn:aws:ec2:*:*:network-interface/*","arn:aws:ec2:*:*:spot-instances-request/*"],
		 "Condition":{"StringEquals":{"aws:RequestTag/owner":"me"}}},
		{"Sid":"Uses","Effect":"Allow","Action":["ec2:CreateFleet","ec2:RunInstances"],
		 "Resource":["arn:aws:ec2:*::image/*","arn:aws:ec2:*:*:subnet/*","arn:aws:ec2:*:*:security-group/*","arn:aws:ec2:*:*:launch-template/*"]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s.AddRole("AKIDLAUNCHER", "secret", "arn:aws:sts::"+s.Options().AccountID+":assumed-role/launcher/test",
		Role{ARN: "arn:aws:iam::" + s.Options().AccountID + ":role/launcher", Policies: []*iam.Policy{policy}})
	roleCfg := cfg.Copy()
	roleCfg.Credentials = credentials.NewStaticCredentialsProvider("AKIDLAUNCHER", "secret", "")
	c := ec2.NewFromConfig(roleCfg)
	ami, _ := s.EC2().SSMParameter("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
	owned := []types.Tag{tag("owner", "me")}
	template := func(name string, data []types.LaunchTemplateTagSpecificationRequest) string {
		if _, err := admin.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
			LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami), TagSpecifications: data}}); err != nil {
			t.Fatal(err)
		}
		return name
	}
	fleet := func(lt string, ct types.DefaultTargetCapacityType) error {
		in := fleetInput(lt, ct, override("m5.large", "us-west-2a"))
		in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeFleet, Tags: owned},
			{ResourceType: types.ResourceTypeInstance, Tags: owned}, {ResourceType: types.ResourceTypeVolume, Tags: owned}}
		_, err := c.CreateFleet(ctx(t), in)
		return err
	}
	untagged := template("untagged", nil)
	if err := fleet(untagged, types.DefaultTargetCapacityTypeOnDemand); apiCode(err) != "UnauthorizedOperation" || !strings.Contains(err.Error(), "network-interface") {
		t.Errorf("launch whose template leaves its interfaces untagged: %v, want UnauthorizedOperation on the network interface", err)
	}
	eni := template("eni", []types.LaunchTemplateTagSpecificationRequest{{ResourceType: types.ResourceTypeNetworkInterface, Tags: owned}})
	if err := fleet(eni, types.DefaultTargetCapacityTypeOnDemand); err != nil {
		t.Errorf("on-demand launch whose template tags its interfaces: %v", err)
	}
	if err := fleet(eni, types.DefaultTargetCapacityTypeSpot); apiCode(err) != "UnauthorizedOperation" || !strings.Contains(err.Error(), "spot-instances-request") {
		t.Errorf("spot launch whose template leaves its spot request untagged: %v, want UnauthorizedOperation on the spot request", err)
	}
	spot := template("spot", []types.LaunchTemplateTagSpecificationRequest{{ResourceType: types.ResourceTypeNetworkInterface, Tags: owned},
		{ResourceType: types.ResourceTypeSpotInstancesRequest, Tags: owned}})
	if err := fleet(spot, types.DefaultTargetCapacityTypeSpot); err != nil {
		t.Errorf("spot launch whose template tags its interfaces and spot request: %v", err)
	}
}
