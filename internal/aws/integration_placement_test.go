package aws_test

import (
	"errors"
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

// A class selecting a partition group by name launches into it: the
// template names the group and a partition, the instance runs there, and
// the claim carries Karpenter's placement group labels. A claim that
// allows some partitions names the lowest; one that allows all leaves the
// choice to EC2 (the emptiest) and learns it.
func TestLaunchIntoPartitionPlacementGroup(t *testing.T) {
	e := newEnv(t, false)
	sim := e.sim.EC2()
	id, err := sim.AddPlacementGroup(ec2sim.PlacementGroup{Name: "training", Strategy: "partition", PartitionCount: 3})
	if err != nil {
		t.Fatal(err)
	}
	nc := nodeClass("al2023@latest")
	nc.Spec.PlacementGroupSelector = &apis.PlacementGroupSelector{Name: sdkaws.String("training")}
	pg, err := e.p.PlacementGroup(e.ctx, nc)
	if err != nil || pg.ID != id || pg.Strategy != nwaws.PlacementPartition || pg.PartitionCount != 3 {
		t.Fatalf("resolved %+v %v", pg, err)
	}
	for _, c := range []struct {
		claim   string
		allowed []string // nil: any partition
		want    int32
	}{{"pg-a", nil, 1}, {"pg-b", []string{"1", "3"}, 1}, {"pg-c", nil, 2}} {
		claim := newClaim(c.claim)
		if c.allowed != nil {
			claim.Spec.Requirements = append(claim.Spec.Requirements, in(nwaws.LabelPlacementGroupPartition, c.allowed...))
		}
		inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large")})
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := sim.Instance(inst.ID)
		p := got.Placement
		if sdkaws.ToString(p.GroupId) != id || sdkaws.ToString(p.GroupName) != "training" || sdkaws.ToInt32(p.PartitionNumber) != inst.PlacementPartition {
			t.Fatalf("%s: instance placement %+v, launched %+v", c.claim, p, inst)
		}
		if inst.PlacementPartition != c.want {
			t.Errorf("%s: partition %d, want %d", c.claim, inst.PlacementPartition, c.want)
		}
		inst.Record(claim, metav1.Now())
		if claim.Labels[nwaws.LabelPlacementGroupID] != id || claim.Labels[nwaws.LabelPlacementGroupPartition] == "" {
			t.Errorf("%s: claim labels %v", c.claim, claim.Labels)
		}
		described, err := e.p.GetInstance(e.ctx, inst.ID)
		if err != nil || described.PlacementGroupID != id || described.PlacementPartition != inst.PlacementPartition {
			t.Errorf("%s: described %+v %v", c.claim, described, err)
		}
	}
}

// A cluster group stays in one zone: once it has an instance, launches go
// to that zone even when the claim would take a cheaper one elsewhere. A
// selector that matches no group leaves the class not ready.
func TestClusterPlacementGroupKeepsOneZone(t *testing.T) {
	e := newEnv(t, false)
	sim := e.sim.EC2()
	id, err := sim.AddPlacementGroup(ec2sim.PlacementGroup{Name: "low-latency", Strategy: "cluster"})
	if err != nil {
		t.Fatal(err)
	}
	nc := nodeClass("al2023@latest")
	nc.Spec.PlacementGroupSelector = &apis.PlacementGroupSelector{ID: sdkaws.String(id)}
	zones := zoneNames(nwaws.ZonalSubnets(e.subnets(t, nc)))
	last := zones[len(zones)-1]
	first, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("cl-1", in(apis.CapacityTypeLabelKey, "on-demand"), in("topology.kubernetes.io/zone", last)),
		NodeClass: nc, InstanceTypes: e.types("m5.large")})
	if err != nil || first.Zone != last || first.PlacementGroupID != id {
		t.Fatalf("first launch %+v %v", first, err)
	}
	for _, name := range []string{"cl-2", "cl-3"} {
		inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim(name, in(apis.CapacityTypeLabelKey, "on-demand")),
			NodeClass: nc, InstanceTypes: e.types("m5.large", "c5.large")})
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := sim.Instance(inst.ID)
		if inst.Zone != last || sdkaws.ToString(got.Placement.GroupId) != id || got.Placement.PartitionNumber != nil {
			t.Errorf("%s: zone %s (want %s), placement %+v", name, inst.Zone, last, got.Placement)
		}
		// nodewright asks for that zone only, rather than leave EC2 to
		// refuse the others.
		fleets := e.sim.Calls("ec2", "CreateFleet")
		if _, zs := fleetOverrides(fleets[len(fleets)-1]); len(zs) != 1 || zs[0] != last {
			t.Errorf("%s: fleet overrides in zones %v, want only %s", name, zs, last)
		}
	}

	missing := nodeClass("al2023@latest")
	missing.Spec.PlacementGroupSelector = &apis.PlacementGroupSelector{Name: sdkaws.String("no-such-group")}
	if _, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("cl-4"), NodeClass: missing, InstanceTypes: e.types("m5.large")}); !errors.Is(err, nwaws.ErrNodeClassNotReady) {
		t.Errorf("launch with an unknown group: %v, want ErrNodeClassNotReady", err)
	}
}
