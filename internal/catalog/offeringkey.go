package catalog

// OfferingKey names one capacity pool: instance type, zone, capacity type
// and, for a reserved offering, its capacity reservation. It is the one key
// of the unavailable-offerings (ICE) set, which the solver reads, the launch
// path writes and the store keeps for every function. A reserved key without
// a ReservationID covers every reservation of the type in the zone (one full
// reservation leaves the type's other reservations usable).
type OfferingKey struct {
	InstanceType  string
	Zone          string
	CapacityType  string
	ReservationID string
}

// String is "type/zone/capacity-type[/reservation]", for logs and errors.
func (k OfferingKey) String() string {
	s := k.InstanceType + "/" + k.Zone + "/" + k.CapacityType
	if k.ReservationID != "" {
		s += "/" + k.ReservationID
	}
	return s
}
