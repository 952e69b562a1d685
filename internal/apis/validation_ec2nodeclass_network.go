package apis

import "regexp"

// karpenter.k8s.aws/v1 rules for the fields of v1.1 and later: capacity
// reservations, placement groups, network interfaces, connection tracking,
// prefix delegation and CPU options. Messages are Karpenter's where it has
// one (see validation.go).

var (
	reservationIDPattern = regexp.MustCompile(`^cr-[0-9a-z]+$`)
	ownerIDPattern       = regexp.MustCompile(`^[0-9]{12}$`)
	placementIDPattern   = regexp.MustCompile(`^pg-[0-9a-z]+$`)
)

func validateNetworking(v *validator, s *EC2NodeClassSpec) {
	validateReservationTerms(v, s.CapacityReservationSelectorTerms)
	if pg := s.PlacementGroupSelector; pg != nil {
		const p = "spec.placementGroupSelector"
		switch {
		case pg.Name == nil && pg.ID == nil:
			v.add(p, "expected at least one, got none, ['name', 'id']")
		case pg.Name != nil && pg.ID != nil:
			v.add(p, "'name' and 'id' are mutually exclusive")
		}
		if pg.Name != nil && *pg.Name == "" {
			v.add(p+".name", "name may not be empty")
		}
		if pg.ID != nil && !placementIDPattern.MatchString(*pg.ID) {
			v.add(p+".id", "%q is not a placement group id (pg-...)", *pg.ID)
		}
	}
	if n := s.IPPrefixCount; n != nil && *n < 0 {
		v.add("spec.ipPrefixCount", "%d must not be negative", *n)
	}
	validateNetworkInterfaces(v, s.NetworkInterfaces)
	if ct := s.ConnectionTracking; ct != nil {
		const p = "spec.connectionTracking"
		if ct.TCPEstablishedTimeout == nil && ct.UDPStreamTimeout == nil && ct.UDPTimeout == nil {
			v.add(p, "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set")
		}
		inRange(v, p+".tcpEstablishedTimeout", ct.TCPEstablishedTimeout, 60, 432000)
		inRange(v, p+".udpStreamTimeout", ct.UDPStreamTimeout, 60, 180)
		inRange(v, p+".udpTimeout", ct.UDPTimeout, 30, 60)
	}
	if c := s.CPUOptions; c != nil && c.NestedVirtualization != nil {
		v.oneOf("spec.cpuOptions.nestedVirtualization", *c.NestedVirtualization, "enabled", "disabled")
	}
}

func inRange(v *validator, path string, n *int32, lo, hi int32) {
	if n != nil && (*n < lo || *n > hi) {
		v.add(path, "%d is outside %d..%d", *n, lo, hi)
	}
}

func validateReservationTerms(v *validator, terms []CapacityReservationSelectorTerm) {
	const path = "spec.capacityReservationSelectorTerms"
	if len(terms) > 30 {
		v.add(path, "%d terms, at most 30 are allowed", len(terms))
	}
	for i, t := range terms {
		p := joinIndex(path, i)
		switch {
		case t.Tags == nil && t.ID == "" && t.InstanceMatchCriteria == "":
			v.add(p, "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']")
		case t.ID != "" && (t.Tags != nil || t.OwnerID != "" || t.InstanceMatchCriteria != ""):
			v.add(p, "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term")
		}
		validateTermTagsAndID(v, p, t.Tags, t.ID, reservationIDPattern, "%q is not a capacity reservation id (cr-...)")
		if t.OwnerID != "" && !ownerIDPattern.MatchString(t.OwnerID) {
			v.add(joinField(p, "ownerID"), "%q is not a 12-digit AWS account id", t.OwnerID)
		}
		if t.InstanceMatchCriteria != "" {
			v.oneOf(joinField(p, "instanceMatchCriteria"), t.InstanceMatchCriteria, "open", "targeted")
		}
	}
}

func validateNetworkInterfaces(v *validator, nis []*NetworkInterface) {
	const path = "spec.networkInterfaces"
	if len(nis) > 150 {
		v.add(path, "%d interfaces, at most 150 are allowed", len(nis))
	}
	primary, complete := false, true
	slots := map[[2]int32]int{}
	efaPerCard := map[int32]int{}
	for i, ni := range nis {
		p := joinIndex(path, i)
		if ni == nil {
			v.add(p, "empty network interface")
			complete = false
			continue
		}
		for _, f := range []struct {
			field string
			idx   *int32
		}{{"networkCardIndex", ni.NetworkCardIndex}, {"deviceIndex", ni.DeviceIndex}} {
			field, idx := f.field, f.idx
			switch {
			case idx == nil:
				v.add(joinField(p, field), msgRequired)
				complete = false
			case *idx < 0:
				v.add(joinField(p, field), "%d must not be negative", *idx)
			}
		}
		if ni.InterfaceType == "" {
			v.add(joinField(p, "interfaceType"), "%s (%s or %s)", msgRequired, InterfaceTypeInterface, InterfaceTypeEFAOnly)
		} else {
			v.oneOf(joinField(p, "interfaceType"), ni.InterfaceType, InterfaceTypeInterface, InterfaceTypeEFAOnly)
		}
		if ni.NetworkCardIndex == nil || ni.DeviceIndex == nil {
			continue
		}
		card, dev := *ni.NetworkCardIndex, *ni.DeviceIndex
		if ni.isPrimary() {
			primary = true
		}
		slots[[2]int32{card, dev}]++
		if ni.InterfaceType == InterfaceTypeEFAOnly {
			efaPerCard[card]++
		}
	}
	if len(nis) > 0 && complete && !primary {
		v.add(path, "networkInterfaces must include a primary interface with interfaceType='interface'")
	}
	if hasMoreThanOne(slots) || hasMoreThanOne(efaPerCard) {
		v.add(path, "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card")
	}
}

func hasMoreThanOne[K comparable](counts map[K]int) bool {
	for _, n := range counts {
		if n > 1 {
			return true
		}
	}
	return false
}
