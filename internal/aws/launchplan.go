package aws

import (
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// plan picks the capacity type (spot when the claim allows it and a spot
// offering is available, else on-demand, as Karpenter does) and the options
// for it, cheapest first, at most MaxInstanceTypes.
func (p *Provider) plan(claim *apis.NodeClaim, types []*catalog.InstanceType, zonal map[string]Subnet, amis []AMI) (string, []option) {
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
			if !o.Available || !allows(reqs, labelZone, o.Zone) || !allows(reqs, labelCapacityType, o.CapacityType) {
				continue
			}
			if _, ok := zonal[o.Zone]; !ok {
				continue
			}
			if p.ice.IsUnavailable(it.Name, o.Zone, o.CapacityType) {
				continue
			}
			per[o.CapacityType] = append(per[o.CapacityType], o)
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
	ct := catalog.CapacityTypeOnDemand
	if len(byCT[catalog.CapacityTypeSpot]) > 0 {
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
	for _, r := range reqs {
		if r.Key != key {
			continue
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			if !slices.Contains(r.Values, value) {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if slices.Contains(r.Values, value) {
				return false
			}
		case corev1.NodeSelectorOpDoesNotExist:
			return false
		}
	}
	return true
}
