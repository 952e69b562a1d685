package aws_test

import (
	"errors"
	"maps"
	"slices"
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

func TestCapacityReservationSelection(t *testing.T) {
	e := newEnv(t, false)
	sim := e.sim.EC2()
	zones := zoneNames(nwaws.ZonalSubnets(e.subnets(t, nodeClass("al2023@latest"))))
	tagged := sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zones[0], Count: 2, Tags: map[string]string{"team": "ml"}})
	shared := sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.xlarge", Zone: zones[1], Count: 1, OwnerID: "222233334444"})
	ended := sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zones[1], Count: 1, Tags: map[string]string{"team": "ml"}})
	if err := sim.EndCapacityReservation(ended, "cancelled"); err != nil {
		t.Fatal(err)
	}
	nc := nodeClass("al2023@latest")
	nc.Spec.CapacityReservationSelectorTerms = []apis.CapacityReservationSelectorTerm{
		{Tags: map[string]string{"team": "ml"}}, {OwnerID: "222233334444"}, {ID: "cr-0123456789abcdef0"}}
	rs, err := e.p.CapacityReservations(e.ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	// Active ones only; an id that does not exist selects nothing.
	if len(rs) != 2 || rs[0].ID > rs[1].ID {
		t.Fatalf("reservations %+v", rs)
	}
	byID := map[string]catalog.Reservation{rs[0].ID: rs[0], rs[1].ID: rs[1]}
	if r := byID[tagged]; r.InstanceType != "m5.large" || r.Zone != zones[0] || r.Available != 2 || r.Type != catalog.ReservationTypeDefault {
		t.Errorf("tagged reservation %+v", r)
	}
	if r := byID[shared]; r.OwnerID != "222233334444" {
		t.Errorf("shared reservation %+v", r)
	}
}

// A reserved claim launches into its reservation through a template that
// targets it and carries its labels; once the reservation is full the
// offering goes into the ICE set and a claim that allows on-demand falls
// back to it, from a template that stays out of open reservations.
func TestReservedLaunchAndFallback(t *testing.T) {
	e := newEnv(t, false)
	sim := e.sim.EC2()
	zones := zoneNames(nwaws.ZonalSubnets(e.subnets(t, nodeClass("al2023@latest"))))
	id := sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zones[0], Count: 1, Tags: map[string]string{"team": "ml"}})
	nc := mlReservationClass()
	types := e.reservedM5(t, nc)
	reserved := in(apis.CapacityTypeLabelKey, apis.CapacityTypeReserved)

	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("odcr-1", reserved), NodeClass: nc, InstanceTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	if inst.CapacityType != catalog.CapacityTypeReserved || inst.Reservation == nil || inst.Reservation.ReservationID != id || inst.Zone != zones[0] {
		t.Fatalf("reserved launch: %+v", inst)
	}
	if got, _, _ := sim.Instance(inst.ID); sdkaws.ToString(got.CapacityReservationId) != id {
		t.Fatalf("instance not in reservation %s", id)
	}
	// The planner's view is a pass old: the reservation looks free but is full.
	_, err = e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("odcr-2", reserved), NodeClass: nc, InstanceTypes: types})
	if !errors.Is(err, nwaws.ErrInsufficientCapacity) || !e.p.ICE().IsUnavailable(nwaws.OfferingKey{InstanceType: "m5.large", Zone: zones[0], CapacityType: catalog.CapacityTypeReserved, ReservationID: id}) {
		t.Fatalf("full reservation: %v", err)
	}
	inst, err = e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("odcr-3", in(apis.CapacityTypeLabelKey, "reserved", "on-demand")),
		NodeClass: nc, InstanceTypes: e.reservedM5(t, nc)})
	if err != nil || inst.CapacityType != catalog.CapacityTypeOnDemand || inst.Reservation != nil {
		t.Fatalf("fallback to on-demand: %v %+v", err, inst)
	}
	if got, _, _ := sim.Instance(inst.ID); got.CapacityReservationId != nil {
		t.Errorf("the on-demand instance joined reservation %s", sdkaws.ToString(got.CapacityReservationId))
	}
}

// A claim that requires a reservation by id (a NodePool's or a pod's
// karpenter.k8s.aws/capacity-reservation-id) launches into that one, not
// into the first zone's; one that requires no reservation launches
// on-demand though reservations are free.
func TestReservationLabelRequirementsPickTheLaunch(t *testing.T) {
	e := newEnv(t, false)
	sim := e.sim.EC2()
	zones := zoneNames(nwaws.ZonalSubnets(e.subnets(t, nodeClass("al2023@latest"))))
	tags := map[string]string{"team": "ml"}
	sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zones[0], Count: 2, Tags: tags})
	second := sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zones[1], Count: 2, Tags: tags})
	nc := mlReservationClass()
	types := e.reservedM5(t, nc)
	byID := newClaim("by-id", in(apis.CapacityTypeLabelKey, "reserved", "on-demand"), in(apis.CapacityReservationIDLabelKey, second))
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: byID, NodeClass: nc, InstanceTypes: types})
	if err != nil || inst.Reservation == nil || inst.Reservation.ReservationID != second || inst.Zone != zones[1] {
		t.Fatalf("launch requiring %s: %v %+v", second, err, inst)
	}
	none := newClaim("none", in(apis.CapacityTypeLabelKey, "reserved", "on-demand"),
		apis.NodeSelectorRequirementWithMinValues{Key: apis.CapacityReservationIDLabelKey, Operator: corev1.NodeSelectorOpDoesNotExist})
	inst, err = e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: none, NodeClass: nc, InstanceTypes: types})
	if err != nil || inst.CapacityType != catalog.CapacityTypeOnDemand || inst.Reservation != nil {
		t.Fatalf("launch requiring no reservation: %v %+v", err, inst)
	}
}

// A full reservation is kept out of launches on its own: the type's other
// reservation in the same zone still takes the next claim, before anything
// falls back to on-demand.
func TestFullReservationLeavesItsNeighbourUsable(t *testing.T) {
	e := newEnv(t, false)
	sim := e.sim.EC2()
	zones := zoneNames(nwaws.ZonalSubnets(e.subnets(t, nodeClass("al2023@latest"))))
	tags := map[string]string{"team": "ml"}
	a := sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zones[0], Count: 1, Tags: tags})
	b := sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zones[0], Count: 1, Tags: tags})
	nc := mlReservationClass()
	// Both claims plan from one view, in which both reservations are free.
	types := e.reservedM5(t, nc)
	var err error
	reserved := in(apis.CapacityTypeLabelKey, apis.CapacityTypeReserved)
	used := map[string]bool{}
	for _, name := range []string{"first", "second"} {
		var inst nwaws.Instance
		for range 2 { // a launch that met the full reservation is retried, as the provisioner does
			if inst, err = e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim(name, reserved), NodeClass: nc, InstanceTypes: types}); err == nil {
				break
			}
		}
		if err != nil || inst.Reservation == nil {
			t.Fatalf("claim %s: %v %+v", name, err, inst)
		}
		used[inst.Reservation.ReservationID] = true
	}
	if !used[a] || !used[b] {
		t.Fatalf("reservations used %v, want both %s and %s", used, a, b)
	}
	full := nwaws.OfferingKey{InstanceType: "m5.large", Zone: zones[0], CapacityType: catalog.CapacityTypeReserved}
	if e.p.ICE().IsUnavailable(full) {
		t.Error("one full reservation marked the type's every reservation in the zone unavailable")
	}
}

// mlReservationClass selects the reservations tagged team=ml.
// A launch re-run after a crash adopts the claim's instance; the claim
// then carries the same reservation labels a fresh launch gives it,
// interruptible included (EC2's instance description does not say).
func TestAdoptedInstanceKeepsItsReservationLabels(t *testing.T) {
	e := newEnv(t, false)
	sim := e.sim.EC2()
	zones := zoneNames(nwaws.ZonalSubnets(e.subnets(t, nodeClass("al2023@latest"))))
	id := sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zones[0], Count: 1, Interruptible: true,
		Tags: map[string]string{"team": "ml"}})
	nc := mlReservationClass()
	req := nwaws.LaunchRequest{NodeClaim: newClaim("adopt-1", in(apis.CapacityTypeLabelKey, apis.CapacityTypeReserved)), NodeClass: nc,
		InstanceTypes: e.reservedM5(t, nc)}
	labels := func(inst nwaws.Instance) map[string]string {
		cl := req.NodeClaim.DeepCopy()
		inst.RecordReservation(cl)
		return cl.Labels
	}
	fresh, err := e.p.Launch(e.ctx, req)
	if err != nil || fresh.Reservation == nil || fresh.Reservation.ReservationID != id {
		t.Fatalf("reserved launch: %v %+v", err, fresh)
	}
	adopted, err := e.p.Launch(e.ctx, req)
	if err != nil || adopted.ID != fresh.ID {
		t.Fatalf("re-run launch: %v, instance %s, want %s adopted", err, adopted.ID, fresh.ID)
	}
	if got, want := labels(adopted), labels(fresh); !maps.Equal(got, want) || want[apis.CapacityReservationInterruptibleLabelKey] != "true" {
		t.Errorf("adopted claim labels %v, a fresh launch's %v", got, want)
	}
}

func mlReservationClass() *apis.EC2NodeClass {
	nc := nodeClass("al2023@latest")
	nc.Spec.CapacityReservationSelectorTerms = []apis.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}
	return nc
}

// reservedM5 is m5.large as nc sees it now: with an offering per
// reservation it selects.
func (e *env) reservedM5(t *testing.T, nc *apis.EC2NodeClass) []*catalog.InstanceType {
	t.Helper()
	cat, err := e.p.Catalog(e.ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	it, _ := e.p.WithReservations(e.ctx, cat, []*apis.EC2NodeClass{nc}).ForNodeClass("default").Get("m5.large")
	return []*catalog.InstanceType{it}
}

func zoneNames(zonal map[string]nwaws.Subnet) []string {
	out := make([]string, 0, len(zonal))
	for z := range zonal {
		out = append(out, z)
	}
	slices.Sort(out)
	return out
}
