package scheduling

import (
	"strconv"

	"github.com/nodewright/nodewright/internal/catalog"
)

// An offering (zone, capacity type, reservation), not the instance type,
// decides these labels of a node; requirements on them select offerings.
const (
	// The labels of a node launched into a capacity reservation; nodes of
	// other offerings lack them.
	LabelReservationID            = "karpenter.k8s.aws/capacity-reservation-id"
	LabelReservationType          = "karpenter.k8s.aws/capacity-reservation-type"
	LabelReservationInterruptible = "karpenter.k8s.aws/capacity-reservation-interruptible"
	// The partition of a node in a partition placement group.
	LabelPlacementPartition = catalog.LabelPlacementGroupPartition
	// The placement group's id: a type label of the class's types.
	labelPlacementGroupID = catalog.LabelPlacementGroupID
)

// launchFilter holds the requirements on offering keys an offering must
// meet for a pool or claim to launch it (nil: any). The reservation keys
// and the partition are rare, so they sit behind one flag to keep the
// common check short.
type launchFilter struct {
	zone, ct, zid                     *Requirement
	rare                              bool
	rid, rtype, rinterrupt, partition *Requirement
}

func launchFilterOf(reqs Requirements) launchFilter {
	var f launchFilter
	// One pass, not six lookups: this runs for every type a pod class is
	// checked against.
	for i := range reqs {
		r := &reqs[i]
		switch r.Key {
		case LabelZone:
			f.zone = r
		case LabelCapacityType:
			f.ct = r
		case LabelZoneID:
			f.zid = r
		case LabelReservationID:
			f.rid, f.rare = r, true
		case LabelReservationType:
			f.rtype, f.rare = r, true
		case LabelReservationInterruptible:
			f.rinterrupt, f.rare = r, true
		case LabelPlacementPartition:
			f.partition, f.rare = r, true
		}
	}
	return f
}

func (f launchFilter) allows(o *Offering) bool {
	if !o.Available || (f.zone != nil && !f.zone.Has(o.Zone)) || (f.ct != nil && !f.ct.Has(o.CapacityType)) ||
		(f.zid != nil && !f.zid.Matches(o.ZoneID, o.ZoneID != "")) {
		return false
	}
	if !f.rare {
		return true
	}
	for _, r := range [...]*Requirement{f.rid, f.rtype, f.rinterrupt, f.partition} {
		if r != nil && !r.Matches(offeringLabel(o, r.Key)) {
			return false
		}
	}
	return true
}

// isOfferingKey reports whether an offering, not the instance type,
// decides the label key's value on a node.
func isOfferingKey(key string) bool {
	switch key {
	case LabelZone, LabelCapacityType, LabelZoneID, LabelReservationID, LabelReservationType, LabelReservationInterruptible,
		LabelPlacementPartition:
		return true
	}
	return false
}

// offeringLabel is the value an offering gives an offering key, and
// whether a node launched from it carries the label at all (only reserved
// offerings carry the reservation labels, only partitioned ones the
// partition).
func offeringLabel(o *Offering, key string) (string, bool) {
	switch key {
	case LabelCapacityType:
		return o.CapacityType, true
	case LabelZoneID:
		return o.ZoneID, o.ZoneID != ""
	case LabelReservationID:
		return o.ReservationID, o.ReservationID != ""
	case LabelReservationType:
		if o.ReservationType == "" {
			return "default", o.ReservationID != ""
		}
		return o.ReservationType, o.ReservationID != ""
	case LabelReservationInterruptible:
		return strconv.FormatBool(o.Interruptible), o.ReservationID != ""
	case LabelPlacementPartition:
		return strconv.Itoa(o.Partition), o.Partition > 0
	}
	return o.Zone, true
}
