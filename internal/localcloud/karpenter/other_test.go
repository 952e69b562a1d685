package karpenter_test

import (
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

// karpenterAWSInstance launches, as the account's administrator, an
// instance and a launch template tagged exactly as Karpenter's AWS
// provider tags its own (its NodeClaim, NodePool, EC2NodeClass and the
// cluster tags): what a cluster migrating from Karpenter still runs.
func karpenterAWSInstance(t *testing.T, e *cloudtest.Env) (instance, template string) {
	t.Helper()
	admin := ec2.NewFromConfig(e.AWS)
	ami := "/aws/service/eks/optimized-ami/" + e.Cloud.AWS.Options().KubernetesVersion + "/amazon-linux-2023/x86_64/standard/recommended/image_id"
	param, err := ssm.NewFromConfig(e.AWS).GetParameter(e.Ctx, &ssm.GetParameterInput{Name: &ami})
	if err != nil {
		t.Fatal(err)
	}
	cluster := e.Cloud.ClusterName
	tags := []ec2types.Tag{}
	for k, v := range map[string]string{"karpenter.sh/nodeclaim": "default-x7k2p", "karpenter.sh/nodepool": "default",
		"karpenter.k8s.aws/ec2nodeclass": "default", "kubernetes.io/cluster/" + cluster: "owned",
		"eks:eks-cluster-name": cluster, "karpenter.k8s.aws/cluster": cluster} {
		tags = append(tags, ec2types.Tag{Key: sdkaws.String(k), Value: sdkaws.String(v)})
	}
	template = "karpenter.k8s.aws/12345678901234567890"
	if _, err := admin.CreateLaunchTemplate(e.Ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: &template,
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: param.Parameter.Value},
		TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}}}); err != nil {
		t.Fatal(err)
	}
	in := &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}}}
	in.TargetCapacitySpecification = &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: sdkaws.Int32(1),
		DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand}
	in.LaunchTemplateConfigs = append(in.LaunchTemplateConfigs, ec2types.FleetLaunchTemplateConfigRequest{
		LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: &template, Version: sdkaws.String("$Latest")},
		Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", AvailabilityZone: sdkaws.String(e.Cloud.Region + "a")}},
	})
	out, err := admin.CreateFleet(e.Ctx, in)
	if err != nil || len(out.Instances) == 0 || len(out.Instances[0].InstanceIds) == 0 {
		t.Fatalf("the Karpenter-tagged instance: %v", err)
	}
	return out.Instances[0].InstanceIds[0], template
}
