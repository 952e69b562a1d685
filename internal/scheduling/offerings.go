package scheduling

import "strconv"

// An offering (zone, capacity type, reservation), not the instance type,
// decides these labels of a node; requirements on them select offerings.
const (
	// The labels of a node launched into a capacity reservation; nodes of
	// other offerings lack them.
	LabelReservationID            = "karpenter.k8s.aws/capacity-reservation-id"
	LabelReservationType          = "karpenter.k8s.aws/capacity-reservation-type"
	LabelReservationInterruptible = "karpenter.k8s.aws/capacity-reservation-interruptible"
)

// launchFilter holds the requirements on offering keys an offering must
// meet for a pool or claim to launch it (nil: any). The reservation keys
// are rare, so they sit behind one flag to keep the common check short.
type launchFilter struct {
	zone, ct, zid          *Requirement
	reservation            bool
	rid, rtype, rinterrupt *Requirement
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
			f.rid, f.reservation = r, true
		case LabelReservationType:
			f.rtype, f.reservation = r, true
		case LabelReservationInterruptible:
			f.rinterrupt, f.reservation = r, true
		}
	}
	return f
}

func (f launchFilter) allows(o *Offering) bool {
	if !o.Available || (f.zone != nil && !f.zone.Has(o.Zone)) || (f.ct != nil && !f.ct.Has(o.CapacityType)) ||
		(f.zid != nil && !f.zid.Matches(o.ZoneID, o.ZoneID != "")) {
		return false
	}
	if !f.reservation {
		return true
	}
	for _, r := range [...]*Requirement{f.rid, f.rtype, f.rinterrupt} {
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
	case LabelZone, LabelCapacityType, LabelZoneID, LabelReservationID, LabelReservationType, LabelReservationInterruptible:
		return true
	}
	return false
}

// offeringLabel is the value an offering gives an offering key, and
// whether a node launched from it carries the label at all (only reserved
// offerings carry the reservation labels).
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
	}
	return o.Zone, true
}
