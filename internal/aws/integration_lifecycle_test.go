package aws_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

func TestTerminateOnlyOwnedInstances(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	inst := e.launch(t, "term-1", nc, "c5.large")
	// Someone else's instance: launched from the same template, without our tags.
	subnets, _ := e.p.Subnets(e.ctx, nc)
	foreign := cloudtest.RawInstance{LaunchTemplate: inst.LaunchTemplate, InstanceType: "c5.large", SubnetID: subnets[0].ID,
		CapacityType: ec2types.DefaultTargetCapacityType(inst.CapacityType),
		Tags:         []ec2types.Tag{{Key: sdkaws.String("Name"), Value: sdkaws.String("not-ours")}}}.Launch(e.ctx, t, e.clients.EC2)

	err := e.p.Terminate(e.ctx, foreign, inst.ID, "i-0000000000doesnotexist")
	if !errors.Is(err, nwaws.ErrNotOwned) || !strings.Contains(err.Error(), foreign) {
		t.Fatalf("want ErrNotOwned naming %s, got %v", foreign, err)
	}
	f, err := e.p.GetInstance(e.ctx, foreign)
	if err != nil || (f.State != "pending" && f.State != "running") {
		t.Errorf("foreign instance touched: %v %+v", err, f)
	}
	own, err := e.p.GetInstance(e.ctx, inst.ID)
	if err != nil || (own.State != "shutting-down" && own.State != "terminated") {
		t.Errorf("own instance not terminating: %v %+v", err, own)
	}
	if got := e.sim.Calls("ec2", "TerminateInstances"); len(got) != 1 || got[0].Params["InstanceId.1"] != inst.ID || got[0].Params["InstanceId.2"] != "" {
		t.Errorf("TerminateInstances calls %+v", got)
	}
	// Terminating again is a no-op success.
	if err := e.p.Terminate(e.ctx, inst.ID); err != nil {
		t.Errorf("second terminate: %v", err)
	}
	listed, _ := e.p.ListClusterInstances(e.ctx)
	for _, i := range listed {
		if i.ID == foreign {
			t.Errorf("foreign instance listed as the cluster's")
		}
	}
}

func TestLaunchTemplateGarbageCollection(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	a := e.launch(t, "gc-1", nc, "c5.large")
	nc2 := nodeClass("al2023@latest")
	nc2.Spec.Tags = map[string]string{"team": "search"}
	nc2.Spec.DetailedMonitoring = sdkaws.Bool(true)
	nc2.Spec.AssociatePublicIPAddress = sdkaws.Bool(false)
	size := resource.MustParse("100Gi")
	nc2.Spec.BlockDeviceMappings = []*apis.BlockDeviceMapping{{DeviceName: sdkaws.String("/dev/xvda"), RootVolume: true,
		EBS: &apis.BlockDevice{VolumeSize: &size, VolumeType: sdkaws.String("io2"), IOPS: sdkaws.Int64(4000)}}}
	b := e.launch(t, "gc-2", nc2, "c5.large")
	created := e.sim.Calls("ec2", "CreateLaunchTemplate")
	lt := created[len(created)-1].Params
	if lt["LaunchTemplateData.Monitoring.Enabled"] != "true" || lt["LaunchTemplateData.NetworkInterface.1.AssociatePublicIpAddress"] != "false" ||
		lt["LaunchTemplateData.NetworkInterface.1.SecurityGroupId.1"] == "" || lt["LaunchTemplateData.SecurityGroupId.1"] != "" ||
		lt["LaunchTemplateData.BlockDeviceMapping.1.Ebs.VolumeSize"] != "100" || lt["LaunchTemplateData.BlockDeviceMapping.1.Ebs.Iops"] != "4000" {
		t.Errorf("EC2NodeClass settings not in the launch template: %v", lt)
	}
	if a.LaunchTemplate == b.LaunchTemplate {
		t.Fatal("different EC2NodeClass specs share a launch template")
	}
	// A template someone else made, even tagged for this cluster, is never ours to delete.
	if _, err := e.clients.EC2.CreateLaunchTemplate(e.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: sdkaws.String("team-made-template"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: sdkaws.String(a.ImageID)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags: []ec2types.Tag{{Key: sdkaws.String(nwaws.TagClusterName), Value: sdkaws.String(testCluster)}}}},
	}); err != nil {
		t.Fatal(err)
	}
	lts, err := e.p.LaunchTemplates(e.ctx)
	if err != nil || len(lts) != 2 {
		t.Fatalf("launch templates %v %+v", err, lts)
	}
	// Young templates are kept even when unused.
	if del, err := e.p.DeleteUnusedLaunchTemplates(e.ctx, func(string) bool { return false }, time.Hour); err != nil || len(del) != 0 {
		t.Errorf("young templates deleted: %v %v", err, del)
	}
	e.clock.Advance(2 * time.Hour)
	del, err := e.p.DeleteUnusedLaunchTemplates(e.ctx, func(n string) bool { return n == a.LaunchTemplate }, time.Hour)
	if err != nil || len(del) != 1 || del[0] != b.LaunchTemplate {
		t.Fatalf("deleted %v %v", del, err)
	}
	if out, err := e.clients.EC2.DescribeLaunchTemplates(e.ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"team-made-template"}}); err != nil || len(out.LaunchTemplates) != 1 {
		t.Errorf("foreign launch template touched: %v", err)
	}
	// Launching the deleted shape again recreates its template.
	if _, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("gc-3"), NodeClass: nc2, InstanceTypes: e.types("c5.large")}); err != nil {
		t.Fatalf("launch after GC: %v", err)
	}
	if lts, _ := e.p.LaunchTemplates(e.ctx); len(lts) != 2 {
		t.Errorf("template not recreated: %+v", lts)
	}
}

func TestDrift(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	launched := e.launch(t, "drift-1", nc, "c5.large")
	inst, err := e.p.GetInstance(e.ctx, launched.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(inst.SecurityGroupIDs) != 2 || inst.SubnetID == "" {
		t.Fatalf("described instance lacks network facts: %+v", inst)
	}
	if reason, err := e.p.Drift(e.ctx, nc, inst); err != nil || reason != "" {
		t.Fatalf("fresh instance drifted: %q %v", reason, err)
	}
	// Security groups: select only one of the two.
	sgs := nodeClass("al2023@latest")
	sgs.Spec.SecurityGroupSelectorTerms = []apis.SecurityGroupSelectorTerm{{Name: "demo-node"}}
	if reason, err := e.p.Drift(e.ctx, sgs, inst); err != nil || reason != nwaws.DriftSecurityGroup {
		t.Errorf("security group drift: %q %v", reason, err)
	}
	// Subnets: select a different zone's subnet only.
	subnets, _ := e.p.Subnets(e.ctx, nc)
	other := nodeClass("al2023@latest")
	for _, s := range subnets {
		if s.ID != inst.SubnetID {
			other.Spec.SubnetSelectorTerms = []apis.SubnetSelectorTerm{{ID: s.ID}}
			break
		}
	}
	if reason, err := e.p.Drift(e.ctx, other, inst); err != nil || reason != nwaws.DriftSubnet {
		t.Errorf("subnet drift: %q %v", reason, err)
	}
	// AMI: a new release moves al2023@latest.
	if _, err := e.sim.EC2().PublishAMI(ec2sim.FamilyAL2023); err != nil {
		t.Fatal(err)
	}
	e.p.InvalidateDiscovery()
	if reason, err := e.p.Drift(e.ctx, nc, inst); err != nil || reason != nwaws.DriftAMI {
		t.Errorf("AMI drift: %q %v", reason, err)
	}
	// A class that resolves to nothing is an error, not drift.
	broken := nodeClass("al2023@latest")
	broken.Spec.SubnetSelectorTerms = []apis.SubnetSelectorTerm{{Tags: map[string]string{"nope": "nope"}}}
	if _, err := e.p.Drift(e.ctx, broken, inst); !errors.Is(err, nwaws.ErrNodeClassNotReady) {
		t.Errorf("unresolvable class: %v", err)
	}
}
