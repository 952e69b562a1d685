package aws

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// plan picks the capacity type (reserved when the claim allows it and a
// reservation has room, else spot when allowed and available, else
// on-demand, as Karpenter does) and the options for it, cheapest first, at
// most MaxInstanceTypes. spotOK false leaves spot out (spotfallback.go).
func (p *Provider) plan(claim *apis.NodeClaim, types []*catalog.InstanceType, zonal map[string]Subnet, amis []AMI, spotOK bool) (string, []option) {
	byCT := p.optionsByCapacityType(claim, types, zonal, amis)
	if !spotOK {
		delete(byCT, catalog.CapacityTypeSpot)
	}
	ct := catalog.CapacityTypeOnDemand
	switch {
	case len(byCT[catalog.CapacityTypeReserved]) > 0:
		ct = catalog.CapacityTypeReserved
	case len(byCT[catalog.CapacityTypeSpot]) > 0:
		ct = catalog.CapacityTypeSpot
	}
	opts := byCT[ct]
	if od := byCT[catalog.CapacityTypeOnDemand]; ct == catalog.CapacityTypeSpot && len(od) > 0 {
		// As Karpenter does: when on-demand is allowed too, spot types dearer
		// than the cheapest on-demand option are not worth their interruptions.
		limit := od[0].offerings[0].Price
		cheaper := slices.DeleteFunc(slices.Clone(opts), func(o option) bool { return o.offerings[0].Price > limit })
		if len(cheaper) > 0 {
			opts = cheaper
		}
	}
	if len(opts) > p.opts.MaxInstanceTypes {
		opts = opts[:p.opts.MaxInstanceTypes]
	}
	return ct, opts
}

// optionsByCapacityType groups the launchable offerings of the claim's
// types by capacity type, each group cheapest first. Of several
// reservations of one type in one zone only the one with the most room is
// kept: a fleet cannot name two for the same type and zone.
func (p *Provider) optionsByCapacityType(claim *apis.NodeClaim, types []*catalog.InstanceType, zonal map[string]Subnet, amis []AMI) map[string][]option {
	reqs := claim.Spec.Requirements
	byCT := map[string][]option{}
	for _, it := range types {
		if it == nil || !allows(reqs, labelInstanceType, it.Name) {
			continue
		}
		ami, ok := pickAMI(amis, it)
		if !ok {
			continue
		}
		per := map[string][]catalog.Offering{}
		for _, o := range it.Offerings {
			if !o.Available || !offeringAllowed(reqs, o) {
				continue
			}
			if _, ok := zonal[o.Zone]; !ok {
				continue
			}
			if p.ice.IsUnavailable(OfferingKeyOf(it.Name, o)) {
				continue
			}
			per[o.CapacityType] = append(per[o.CapacityType], o)
		}
		if r := per[catalog.CapacityTypeReserved]; len(r) > 0 {
			per[catalog.CapacityTypeReserved] = roomiestPerZone(r)
		}
		for ct, offs := range per {
			sort.Slice(offs, func(i, j int) bool {
				if offs[i].Price != offs[j].Price {
					return offs[i].Price < offs[j].Price
				}
				return offs[i].Zone < offs[j].Zone
			})
			byCT[ct] = append(byCT[ct], option{it: it, offerings: offs, ami: ami})
		}
	}
	for _, o := range byCT {
		sortOptions(o)
	}
	if r := byCT[catalog.CapacityTypeReserved]; len(r) > 0 {
		byCT[catalog.CapacityTypeReserved] = oneReservationType(r)
	}
	return byCT
}

// roomiestPerZone keeps, per zone, the reserved offering whose reservation
// takes the most instances (ties by id).
func roomiestPerZone(offs []catalog.Offering) []catalog.Offering {
	best := map[string]catalog.Offering{}
	for _, o := range offs {
		cur, ok := best[o.Zone]
		if !ok || o.ReservationCapacity > cur.ReservationCapacity ||
			(o.ReservationCapacity == cur.ReservationCapacity && o.ReservationID < cur.ReservationID) {
			best[o.Zone] = o
		}
	}
	return valuesByKey(best)
}

// oneReservationType keeps the options of one reservation type, since a
// fleet launches either default reservations (as on-demand) or capacity
// blocks: default ODCRs when there are any.
func oneReservationType(opts []option) []option {
	kind := catalog.ReservationTypeCapacityBlock
	for _, o := range opts {
		for _, off := range o.offerings {
			if off.ReservationType != catalog.ReservationTypeCapacityBlock {
				kind = catalog.ReservationTypeDefault
			}
		}
	}
	var out []option
	for _, o := range opts {
		o.offerings = slices.DeleteFunc(slices.Clone(o.offerings), func(off catalog.Offering) bool { return reservationKind(off) != kind })
		if len(o.offerings) > 0 {
			out = append(out, o)
		}
	}
	return out
}

func reservationKind(o catalog.Offering) string {
	if o.ReservationType == catalog.ReservationTypeCapacityBlock {
		return o.ReservationType
	}
	return catalog.ReservationTypeDefault
}

func sortOptions(opts []option) {
	sort.SliceStable(opts, func(i, j int) bool {
		a, b := opts[i].offerings[0].Price, opts[j].offerings[0].Price
		if a != b {
			return a < b
		}
		return opts[i].it.Name < opts[j].it.Name
	})
}

// checkMinValues verifies the options still offer at least minValues
// distinct values for every requirement that has one (after ICE filtering
// and truncation to MaxInstanceTypes), as Karpenter refuses such launches.
func checkMinValues(reqs []apis.NodeSelectorRequirementWithMinValues, opts []option) error {
	for _, r := range reqs {
		if r.MinValues == nil || *r.MinValues <= 0 {
			continue
		}
		distinct := map[string]bool{}
		for _, o := range opts {
			v, ok := o.it.Labels[r.Key]
			if r.Key == labelInstanceType {
				v, ok = o.it.Name, true
			}
			if ok {
				distinct[v] = true
			}
		}
		if len(distinct) < *r.MinValues {
			return fmt.Errorf("%w: requirement %s needs %d distinct values (minValues), the launchable options have %d",
				ErrInsufficientCapacity, r.Key, *r.MinValues, len(distinct))
		}
	}
	return nil
}

// allows evaluates the claim's requirements on key for value. Keys the
// requirements do not mention are allowed.
func allows(reqs []apis.NodeSelectorRequirementWithMinValues, key, value string) bool {
	return allowsLabel(reqs, key, value, true)
}

// allowsLabel is allows for a label a node may lack (exists false): only
// NotIn and DoesNotExist admit a node without it.
func allowsLabel(reqs []apis.NodeSelectorRequirementWithMinValues, key, value string, exists bool) bool {
	for _, r := range reqs {
		if r.Key != key {
			continue
		}
		ok := true
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			ok = exists && slices.Contains(r.Values, value)
		case corev1.NodeSelectorOpNotIn:
			ok = !exists || !slices.Contains(r.Values, value)
		case corev1.NodeSelectorOpExists:
			ok = exists
		case corev1.NodeSelectorOpDoesNotExist:
			ok = !exists
		}
		if !ok {
			return false
		}
	}
	return true
}

// offeringAllowed evaluates the claim's requirements on the labels the
// offering decides: zone, capacity type and, for a reserved offering, its
// reservation's id, type and interruptibility.
func offeringAllowed(reqs []apis.NodeSelectorRequirementWithMinValues, o catalog.Offering) bool {
	if !allows(reqs, labelZone, o.Zone) || !allows(reqs, labelCapacityType, o.CapacityType) {
		return false
	}
	labels := catalog.ReservationLabels(o) // nil unless reserved
	for _, key := range []string{catalog.LabelCapacityReservationID, catalog.LabelCapacityReservationType, catalog.LabelCapacityReservationInterruptible} {
		v, ok := labels[key]
		if !allowsLabel(reqs, key, v, ok) {
			return false
		}
	}
	return true
}
