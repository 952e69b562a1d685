package scheduling_test

import (
	"testing"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// reservedTypes: m.large has a reservation of n in zone-a (near-zero
// price); every type is on-demand in zone-a and zone-b.
func reservedTypes(n int) []*scheduling.InstanceType {
	return []*scheduling.InstanceType{
		mkType("m.large", 2, 8, 30, "amd64", 0.10, od("zone-a", 0.10), od("zone-b", 0.10),
			scheduling.Offering{Zone: "zone-a", CapacityType: scheduling.CapacityTypeReserved, Price: 0.10 / 1e7, Available: true,
				ReservationID: "cr-1", ReservationCapacity: n}),
		mkType("c.large", 2, 4, 30, "amd64", 0.08, od("zone-a", 0.08), od("zone-b", 0.08)),
	}
}

func reservedPool(cts ...string) *scheduling.NodePool {
	p := &scheduling.NodePool{Name: "default"}
	p.Requirements = p.Requirements.Add(req(scheduling.LabelCapacityType, in, cts...))
	return p
}

func TestReservationsAreUsedFirstUpToTheirCount(t *testing.T) {
	// Three pods that each fill a node: two go into the reservation of
	// two, the third falls back to the cheapest on-demand type.
	in := &scheduling.Input{Pods: pods(3, podOpts{cpu: "1500m", mem: "1Gi"}),
		NodePools: []*scheduling.NodePool{reservedPool(scheduling.CapacityTypeReserved, "on-demand")}, DefaultInstanceTypes: reservedTypes(2)}
	expect(t, mustSolve(t, in),
		"m.large/zone-a/reserved:default/p0", "m.large/zone-a/reserved:default/p1", "c.large/zone-a/on-demand:default/p2")
}

func TestReservationsOnlyWhenThePoolAllowsReserved(t *testing.T) {
	in := &scheduling.Input{Pods: pods(1, podOpts{cpu: "1500m", mem: "1Gi"}),
		NodePools: []*scheduling.NodePool{reservedPool("on-demand")}, DefaultInstanceTypes: reservedTypes(2)}
	expect(t, mustSolve(t, in), "c.large/zone-a/on-demand:default/p0")
}

func TestFullOrUnavailableReservationFallsBack(t *testing.T) {
	pool := reservedPool(scheduling.CapacityTypeReserved, "on-demand")
	in := &scheduling.Input{Pods: pods(1, podOpts{cpu: "1500m", mem: "1Gi"}), NodePools: []*scheduling.NodePool{pool},
		DefaultInstanceTypes: reservedTypes(2),
		Unavailable:          map[scheduling.OfferingKey]bool{{InstanceType: "m.large", Zone: "zone-a", CapacityType: scheduling.CapacityTypeReserved}: true}}
	expect(t, mustSolve(t, in), "c.large/zone-a/on-demand:default/p0")

	// A pool that allows only reserved capacity leaves pods past the
	// reservation's count pending.
	in = &scheduling.Input{Pods: pods(2, podOpts{cpu: "1500m", mem: "1Gi"}),
		NodePools: []*scheduling.NodePool{reservedPool(scheduling.CapacityTypeReserved)}, DefaultInstanceTypes: reservedTypes(1)}
	plan := mustSolve(t, in)
	reserved := 0
	for _, c := range plan.NodeClaims {
		if c.CapacityType == scheduling.CapacityTypeReserved {
			reserved++
		}
	}
	if reserved != 1 {
		t.Errorf("%d reserved claims for a reservation of 1: %q", reserved, summary(plan))
	}
}

// twoReservations: m.large has a default ODCR cr-odcr in zone-a and an
// interruptible capacity block cr-block in zone-b; c.large is on-demand.
func twoReservations() []*scheduling.InstanceType {
	res := func(zone, id, typ string, interruptible bool) scheduling.Offering {
		return scheduling.Offering{Zone: zone, CapacityType: scheduling.CapacityTypeReserved, Price: 0.10 / 1e7, Available: true,
			ReservationID: id, ReservationCapacity: 5, ReservationType: typ, Interruptible: interruptible}
	}
	return []*scheduling.InstanceType{
		mkType("m.large", 2, 8, 30, "amd64", 0.10, od("zone-a", 0.10), od("zone-b", 0.10),
			res("zone-a", "cr-odcr", "default", false), res("zone-b", "cr-block", "capacity-block", true)),
		mkType("c.large", 2, 4, 30, "amd64", 0.08, od("zone-a", 0.08), od("zone-b", 0.08)),
	}
}

// The reservation labels are requirements as Karpenter's are: on the
// NodePool or in a pod's nodeSelector, they pick the reservations a claim
// may launch into, and DoesNotExist keeps a pool out of reservations.
func TestReservationLabelsAreRequirements(t *testing.T) {
	one := podOpts{cpu: "1500m", mem: "1Gi"}
	for _, c := range []struct {
		name string
		req  *scheduling.Requirement
		sel  map[string]string
		want string
	}{
		{"any reservation: the cheapest", nil, nil, "m.large/zone-a/reserved:default/p0"},
		{"capacity blocks only", ptr(req(scheduling.LabelReservationType, in, "capacity-block")), nil, "m.large/zone-b/reserved:default/p0"},
		{"not interruptible", ptr(req(scheduling.LabelReservationInterruptible, in, "false")), nil, "m.large/zone-a/reserved:default/p0"},
		{"no reservation", ptr(req(scheduling.LabelReservationID, dne)), nil, "c.large/zone-a/on-demand:default/p0"},
		{"a pod selects the block by id", nil, map[string]string{scheduling.LabelReservationID: "cr-block"}, "m.large/zone-b/reserved:default/p0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := reservedPool(scheduling.CapacityTypeReserved, "on-demand")
			if c.req != nil {
				pool.Requirements = pool.Requirements.Add(*c.req)
			}
			o := one
			o.nodeSelector = c.sel
			in := &scheduling.Input{Pods: pods(1, o), NodePools: []*scheduling.NodePool{pool}, DefaultInstanceTypes: twoReservations()}
			expect(t, mustSolve(t, in), c.want)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// An ICE entry for one reservation keeps that reservation out, not the
// type's other reservation in the same zone; an entry without a
// reservation keeps them all out.
func TestUnavailableReservationIsOneReservation(t *testing.T) {
	res := func(id string) scheduling.Offering {
		return scheduling.Offering{Zone: "zone-a", CapacityType: scheduling.CapacityTypeReserved, Price: 0.10 / 1e7, Available: true,
			ReservationID: id, ReservationCapacity: 1}
	}
	types := []*scheduling.InstanceType{
		mkType("m.large", 2, 8, 30, "amd64", 0.10, od("zone-a", 0.10), res("cr-1"), res("cr-2")),
		mkType("c.large", 2, 4, 30, "amd64", 0.08, od("zone-a", 0.08)),
	}
	solve := func(k scheduling.OfferingKey) string {
		in := &scheduling.Input{Pods: pods(1, podOpts{cpu: "1500m", mem: "1Gi"}),
			NodePools:            []*scheduling.NodePool{reservedPool(scheduling.CapacityTypeReserved, "on-demand")},
			DefaultInstanceTypes: types, Unavailable: map[scheduling.OfferingKey]bool{k: true}}
		return mustSolve(t, in).NodeClaims[0].CapacityType
	}
	key := scheduling.OfferingKey{InstanceType: "m.large", Zone: "zone-a", CapacityType: scheduling.CapacityTypeReserved}
	if ct := solve(key); ct != "on-demand" {
		t.Errorf("every reservation unavailable: %s, want on-demand", ct)
	}
	key.ReservationID = "cr-1"
	if ct := solve(key); ct != scheduling.CapacityTypeReserved {
		t.Errorf("cr-1 unavailable: %s, want cr-2's reserved capacity", ct)
	}
}
