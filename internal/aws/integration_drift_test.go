package aws_test

import (
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

// Karpenter's provider (cloudprovider/drift.go isCapacityReservationDrifted):
// a reserved instance whose reservation its class no longer selects, or
// that is no longer active, is drifted; one still selected is not.
func TestCapacityReservationDrift(t *testing.T) {
	e := newEnv(t, false)
	sim := e.sim.EC2()
	zones := zoneNames(nwaws.ZonalSubnets(e.subnets(t, nodeClass("al2023@latest"))))
	id := sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zones[0], Count: 2, Tags: map[string]string{"team": "ml"}})
	nc := mlReservationClass()
	launched, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("crd-1", in(apis.CapacityTypeLabelKey, apis.CapacityTypeReserved)),
		NodeClass: nc, InstanceTypes: e.reservedM5(t, nc)})
	if err != nil {
		t.Fatal(err)
	}
	inst := e.described(t, launched.ID)
	if inst.Reservation == nil || inst.Reservation.ReservationID != id {
		t.Fatalf("described reserved instance: %+v", inst)
	}
	if reason, err := e.p.Drift(e.ctx, nc, inst); err != nil || reason != "" {
		t.Fatalf("instance in a selected reservation drifted: %q %v", reason, err)
	}
	other := nodeClass("al2023@latest")
	other.Spec.CapacityReservationSelectorTerms = []apis.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "web"}}}
	if reason, err := e.p.Drift(e.ctx, other, inst); err != nil || reason != nwaws.DriftCapacityReservation {
		t.Errorf("reservation no longer selected: %q %v, want %s", reason, err, nwaws.DriftCapacityReservation)
	}
	if reason, err := e.p.Drift(e.ctx, nodeClass("al2023@latest"), inst); err != nil || reason != nwaws.DriftCapacityReservation {
		t.Errorf("class selecting no reservation: %q %v, want %s", reason, err, nwaws.DriftCapacityReservation)
	}
	// Instances outside reservations never drift for it.
	plain := e.described(t, e.launch(t, "crd-2", nodeClass("al2023@latest"), "c5.large").ID)
	if reason, err := e.p.Drift(e.ctx, nc, plain); err != nil || reason != "" {
		t.Errorf("on-demand instance: %q %v", reason, err)
	}
}

// An on-demand instance that EC2 put into an open reservation (launched,
// say, by another tool from a template without a reservation preference) is
// on-demand capacity, as in Karpenter's instance.capacityTypeFromInstance:
// reading it as reserved would drift it off a class that selects no
// reservation.
func TestOpenReservationInstanceIsOnDemand(t *testing.T) {
	e := newEnv(t, false)
	sim := e.sim.EC2()
	nc := nodeClass("al2023@latest")
	ref := e.described(t, e.launch(t, "open-ref", nc, "m5.large").ID)
	sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: ref.Zone, Count: 1, Open: true})
	id := e.launchWithoutPreference(t, ref)
	got, _, _ := sim.Instance(id)
	if sdkaws.ToString(got.CapacityReservationId) == "" {
		t.Fatal("the simulator did not put the open-preference instance into the open reservation")
	}
	inst := e.described(t, id)
	if inst.CapacityType != catalog.CapacityTypeOnDemand || inst.Reservation != nil {
		t.Errorf("instance in an open reservation read as %s %+v, want on-demand", inst.CapacityType, inst.Reservation)
	}
	if reason, err := e.p.Drift(e.ctx, nc, inst); err != nil || reason != "" {
		t.Errorf("open-reservation instance drifted: %q %v", reason, err)
	}
}

// Karpenter's provider (isPlacementGroupDrifted): the instance's placement
// group must be the one its class selects now, none for none.
func TestPlacementGroupDrift(t *testing.T) {
	e := newEnv(t, false)
	id, err := e.sim.EC2().AddPlacementGroup(ec2sim.PlacementGroup{Name: "low-latency", Strategy: "cluster"})
	if err != nil {
		t.Fatal(err)
	}
	grouped := nodeClass("al2023@latest")
	grouped.Spec.PlacementGroupSelector = &apis.PlacementGroupSelector{ID: sdkaws.String(id)}
	inGroup := e.described(t, e.launch(t, "pgd-1", grouped, "m5.large").ID)
	if inGroup.PlacementGroupID != id {
		t.Fatalf("launched outside the group: %+v", inGroup)
	}
	if reason, err := e.p.Drift(e.ctx, grouped, inGroup); err != nil || reason != "" {
		t.Fatalf("instance in its class's group drifted: %q %v", reason, err)
	}
	if reason, err := e.p.Drift(e.ctx, nodeClass("al2023@latest"), inGroup); err != nil || reason != nwaws.DriftPlacementGroup {
		t.Errorf("selector removed: %q %v, want %s", reason, err, nwaws.DriftPlacementGroup)
	}
	plain := e.described(t, e.launch(t, "pgd-2", nodeClass("al2023@latest"), "m5.large").ID)
	if reason, err := e.p.Drift(e.ctx, grouped, plain); err != nil || reason != nwaws.DriftPlacementGroup {
		t.Errorf("selector added: %q %v, want %s", reason, err, nwaws.DriftPlacementGroup)
	}
	// A selector that matches no group leaves the class not ready: an
	// error, never drift (a replacement could not launch).
	missing := nodeClass("al2023@latest")
	missing.Spec.PlacementGroupSelector = &apis.PlacementGroupSelector{Name: sdkaws.String("no-such-group")}
	if reason, err := e.p.Drift(e.ctx, missing, inGroup); err == nil || reason != "" {
		t.Errorf("unresolvable group: %q %v, want an error", reason, err)
	}
}

// described is the instance as DescribeInstances tells it (what drift reads).
func (e *env) described(t *testing.T, id string) nwaws.Instance {
	t.Helper()
	inst, err := e.p.GetInstance(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// launchWithoutPreference launches one on-demand m5.large like ref from a
// template that says nothing about reservations (EC2's default: open).
func (e *env) launchWithoutPreference(t *testing.T, ref nwaws.Instance) string {
	t.Helper()
	lt, err := e.clients.EC2.CreateLaunchTemplate(e.ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: sdkaws.String("other-tool"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: sdkaws.String(ref.ImageID)}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.clients.EC2.CreateFleet(e.ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: sdkaws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, SubnetId: sdkaws.String(ref.SubnetID)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: sdkaws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 1 {
		t.Fatalf("fleet launched %+v (errors %+v)", out.Instances, out.Errors)
	}
	return out.Instances[0].InstanceIds[0]
}
