package catalog

import "testing"

func TestReservedOfferingsPerNodeClass(t *testing.T) {
	c, err := Builtin("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	rc := c.WithReservations(map[string][]Reservation{"gpu": {
		{ID: "cr-b", InstanceType: "m5.large", Zone: "us-east-1b", Available: 2, Type: ReservationTypeDefault},
		{ID: "cr-a", InstanceType: "m5.large", Zone: "us-east-1a", Available: 0, Type: ReservationTypeCapacityBlock, Interruptible: true},
		{ID: "cr-x", InstanceType: "m5.large", Zone: "nowhere-1z", Available: 5},
	}})
	if rc.ForNodeClass("other") != rc {
		t.Error("a class without reservations should see the catalog as is")
	}
	gpu := rc.ForNodeClass("gpu")
	it, _ := gpu.Get("m5.large")
	od, _ := it.Offering("us-east-1b", CapacityTypeOnDemand)
	var reserved []Offering
	for _, o := range it.Offerings {
		if o.CapacityType == CapacityTypeReserved {
			reserved = append(reserved, o)
		}
	}
	// Zone order; the reservation in a zone the catalog lacks is dropped.
	if len(reserved) != 2 || reserved[0].ReservationID != "cr-a" || reserved[1].ReservationID != "cr-b" {
		t.Fatalf("reserved offerings %+v", reserved)
	}
	if reserved[0].Available || !reserved[1].Available || reserved[1].ReservationCapacity != 2 {
		t.Errorf("a full reservation is unavailable, one with room takes its count: %+v", reserved)
	}
	if p := reserved[1].Price; p <= 0 || p >= od.Price/1000 || reserved[1].ZoneID == "" {
		t.Errorf("reserved price %v (on-demand %v), zone id %q", p, od.Price, reserved[1].ZoneID)
	}
	labels := it.NodeLabels(reserved[0])
	if labels[LabelCapacityType] != CapacityTypeReserved || labels[LabelCapacityReservationID] != "cr-a" ||
		labels[LabelCapacityReservationType] != ReservationTypeCapacityBlock || labels[LabelCapacityReservationInterruptible] != "true" {
		t.Errorf("reserved node labels %v", labels)
	}
	if l := it.NodeLabels(od); l[LabelCapacityReservationID] != "" {
		t.Errorf("on-demand node labelled with a reservation: %v", l)
	}
	orig, _ := c.Get("m5.large")
	if len(orig.Offerings) == len(it.Offerings) {
		t.Error("ForNodeClass changed the shared type")
	}
	a, _ := gpu.Get("m6i.large")
	b, _ := c.Get("m6i.large")
	if a != b {
		t.Error("types without reservations should be shared")
	}
}
