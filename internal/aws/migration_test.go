package aws_test

import (
	"errors"
	"strings"
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

// TestKarpenterInstancesAreNotOurs: during a migration Karpenter's instances
// carry the same cluster, nodepool and nodeclaim tags as nodewright's, but not
// TagManagedBy. Garbage collection must not list them, Terminate must refuse
// them, and Launch must not adopt one whose claim name collides; and
// Karpenter's own instance listing must not include nodewright's.
func TestKarpenterInstancesAreNotOurs(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	ours := e.launch(t, "default-ours1", nc, "c5.large")
	if got, _ := e.p.GetInstance(e.ctx, ours.ID); got.Tags[nwaws.TagManagedBy] != nwaws.ManagedBy {
		t.Fatalf("our instance's tags %v lack %s=%s", got.Tags, nwaws.TagManagedBy, nwaws.ManagedBy)
	}
	// Karpenter's instance for its own claim "default-karp1", with its own
	// launch template, tagged as Karpenter tags.
	subnets, _ := e.p.Subnets(e.ctx, nc)
	lt := "karpenter.k8s.aws/123456"
	ltOut, err := e.clients.EC2.CreateLaunchTemplate(e.ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: sdkaws.String(lt),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: sdkaws.String(ours.ImageID)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
			{Key: sdkaws.String("kubernetes.io/cluster/" + testCluster), Value: sdkaws.String("owned")},
			{Key: sdkaws.String(nwaws.TagClusterName), Value: sdkaws.String(testCluster)},
			{Key: sdkaws.String(nwaws.TagNodeClass), Value: sdkaws.String("default")},
		}}}})
	if err != nil || ltOut.LaunchTemplate == nil {
		t.Fatalf("karpenter launch template: %v", err)
	}
	karpTags := []ec2types.Tag{
		{Key: sdkaws.String("kubernetes.io/cluster/" + testCluster), Value: sdkaws.String("owned")},
		{Key: sdkaws.String(nwaws.TagEKSClusterName), Value: sdkaws.String(testCluster)},
		{Key: sdkaws.String(nwaws.TagNodePool), Value: sdkaws.String("default")},
		{Key: sdkaws.String(nwaws.TagNodeClaim), Value: sdkaws.String("default-karp1")},
		{Key: sdkaws.String("karpenter.k8s.aws/ec2nodeclass"), Value: sdkaws.String("default")},
	}
	karp := cloudtest.RawInstance{LaunchTemplate: lt, InstanceType: "c5.large", SubnetID: subnets[0].ID, Tags: karpTags}.Launch(e.ctx, t, e.clients.EC2)

	listed, err := e.p.ListClusterInstances(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range listed {
		ids = append(ids, i.ID)
	}
	if len(ids) != 1 || ids[0] != ours.ID {
		t.Errorf("ListClusterInstances = %v, want only ours (%s), not Karpenter's %s", ids, ours.ID, karp)
	}

	err = e.p.Terminate(e.ctx, karp)
	if !errors.Is(err, nwaws.ErrNotOwned) || !strings.Contains(err.Error(), nwaws.TagManagedBy) {
		t.Fatalf("terminating Karpenter's instance: want ErrNotOwned naming %s, got %v", nwaws.TagManagedBy, err)
	}
	if got, err := e.p.GetInstance(e.ctx, karp); err != nil || (got.State != "pending" && got.State != "running") {
		t.Errorf("Karpenter's instance touched: %v %+v", err, got)
	}
	if n := len(e.sim.Calls("ec2", "TerminateInstances")); n != 0 {
		t.Errorf("%d TerminateInstances calls, want none", n)
	}

	// The other way round: Karpenter's instance garbage collector lists by
	// tag-key karpenter.sh/nodepool, tag-key karpenter.k8s.aws/ec2nodeclass and
	// eks:eks-cluster-name=<cluster>, and terminates what has no NodeClaim
	// object. nodewright's instances must not match that listing.
	kout, err := e.clients.EC2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: sdkaws.String("tag-key"), Values: []string{"karpenter.sh/nodepool"}},
		{Name: sdkaws.String("tag-key"), Values: []string{"karpenter.k8s.aws/ec2nodeclass"}},
		{Name: sdkaws.String("tag:eks:eks-cluster-name"), Values: []string{testCluster}},
		{Name: sdkaws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var karpSees []string
	for _, r := range kout.Reservations {
		for _, i := range r.Instances {
			karpSees = append(karpSees, *i.InstanceId)
		}
	}
	if len(karpSees) != 1 || karpSees[0] != karp {
		t.Errorf("Karpenter's garbage collector would list %v, want only its own %s", karpSees, karp)
	}

	// A nodewright claim named like Karpenter's launches its own instance.
	mine := e.launch(t, "default-karp1", nc, "c5.large")
	if mine.ID == karp {
		t.Errorf("Launch adopted Karpenter's instance %s", karp)
	}

	// Template GC sees only nodewright's templates.
	lts, err := e.p.LaunchTemplates(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lts {
		if l.Name == lt || !strings.HasPrefix(l.Name, "nodewright/") {
			t.Errorf("LaunchTemplates lists %s", l.Name)
		}
	}
	if len(lts) == 0 {
		t.Error("LaunchTemplates lists none of ours")
	}
}
