package lifecycle_test

import (
	"fmt"
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
)

// placedEnv is an env whose pool "placed" (on-demand m5.large) has a class
// that selects a new partition group of the given partitions by name; it
// returns the group's name and id.
func placedEnv(t *testing.T, prefix string, partitions int) (*env, string, string) {
	pool := apistest.Pool{Name: "placed", Requirements: []apistest.Req{
		apistest.In(apis.CapacityTypeLabelKey, apis.CapacityTypeOnDemand),
		apistest.In("node.kubernetes.io/instance-type", "m5.large"),
	}}
	e := newEnv(t, withConfig(pool.YAML()))
	name := fmt.Sprintf("%s-%d", prefix, e.id) // the package's tests share one region
	id, err := e.cloud.AWS.EC2().AddPlacementGroup(ec2sim.PlacementGroup{Name: name, Strategy: "partition", PartitionCount: partitions})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.NodeClass("default").Spec.PlacementGroupSelector = &apis.PlacementGroupSelector{Name: sdkaws.String(name)}
	return e, name, id
}

// placementGroupSelector end to end, under the stack's IAM policy: a class
// that selects a partition placement group by name launches its nodes
// into it (the instances' placement names the group and a partition, one
// node per partition) and its claims and Nodes carry Karpenter's placement-group-id and
// placement-group-partition labels.
func TestNodesLaunchIntoThePlacementGroup(t *testing.T) {
	e, name, id := placedEnv(t, "training", 2)
	sim := e.cloud.AWS.EC2()

	h := e.handler(e.deps())
	prov := e.provisioner(nil)
	e.deployOnePerNode("placed", "placed", 2)
	e.provision(prov, 2)
	claims := e.claimsByCapacityType()[apis.CapacityTypeOnDemand]
	if len(claims) != 2 {
		t.Fatalf("claims %v", claims)
	}
	partitions := map[string]bool{}
	for _, cl := range claims {
		inst, _, ok := sim.Instance(cl.Status.InstanceID)
		if !ok || sdkaws.ToString(inst.Placement.GroupName) != name || sdkaws.ToString(inst.Placement.GroupId) != id {
			t.Fatalf("claim %s's instance placement %+v", cl.Name, inst.Placement)
		}
		partition := fmt.Sprint(sdkaws.ToInt32(inst.Placement.PartitionNumber))
		partitions[partition] = true
		if cl.Labels[nwaws.LabelPlacementGroupID] != id || cl.Labels[nwaws.LabelPlacementGroupPartition] != partition || partition == "0" {
			t.Errorf("claim %s labels %v, instance partition %s", cl.Name, cl.Labels, partition)
		}
	}
	if len(partitions) != 2 {
		t.Errorf("the two nodes share a partition: %v", partitions)
	}
	e.pump(h, "two registered nodes in the group, one per partition", func() bool {
		return e.nodesWith(nwaws.LabelPlacementGroupID, id) == 2 &&
			e.nodesWith(nwaws.LabelPlacementGroupPartition, "1") == 1 && e.nodesWith(nwaws.LabelPlacementGroupPartition, "2") == 1
	})
}

// A pod that selects a partition of its class's partition group gets a
// node in that partition: the planner offers the group's partitions (the
// provider's ForNodeClasses catalog), the claim requires the pod's, and
// the launch names it to EC2 instead of letting EC2 pick the emptiest.
func TestAPodSelectsItsPartition(t *testing.T) {
	e, _, id := placedEnv(t, "select", 3)
	sim := e.cloud.AWS.EC2()

	h := e.handler(e.deps())
	prov := e.provisioner(provisioning.ForNodeClasses(provisioning.ProviderCatalog(e.p, nil, e.cloud.Region, nil), e.p, e.cfg))
	cloudtest.Workload{Name: "pinned", Replicas: 1, CPU: "1500m", Memory: "1Gi",
		NodeSelector: map[string]string{apis.NodePoolLabelKey: "placed", apis.PlacementGroupPartitionLabelKey: "3"},
		GraceSeconds: new(int64(0)), NoServiceAccountToken: true}.Deploy(e.ctx, e.t, e.cs, e.ns)
	e.awaitPending("app=pinned", 1)
	e.provision(prov, 1)
	claims := e.claimsByCapacityType()[apis.CapacityTypeOnDemand]
	if len(claims) != 1 {
		t.Fatalf("claims %v", claims)
	}
	inst, _, ok := sim.Instance(claims[0].Status.InstanceID)
	if !ok || sdkaws.ToString(inst.Placement.GroupId) != id || sdkaws.ToInt32(inst.Placement.PartitionNumber) != 3 {
		t.Fatalf("instance placement %+v, want partition 3 of %s", inst.Placement, id)
	}
	e.pump(h, "the node registered in partition 3", func() bool {
		return e.nodesWith(nwaws.LabelPlacementGroupPartition, "3") == 1
	})
}
