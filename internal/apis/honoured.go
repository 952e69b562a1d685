package apis

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Fields nodewright accepts (so Karpenter users' files load unchanged) but
// does not act on yet. Each is a warning, never silence: a user must not
// believe a setting works when it does not. Remove an entry when the
// behaviour lands.

const notHonoured = "accepted but not yet honoured by nodewright"

// notHonouredNodePool warns about a NodePool's unimplemented settings.
func notHonouredNodePool(np *NodePool) []fieldErr {
	var out []fieldErr
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.Key != CapacityTypeLabelKey || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		if j := slices.Index(r.Values, CapacityTypeReserved); j >= 0 {
			out = append(out, fieldErr{
				path: fmt.Sprintf("spec.template.spec.requirements[%d].values[%d]", i, j),
				msg:  notHonoured + " (capacity reservations are not used: nodes launch as spot or on-demand only)",
			})
		}
	}
	if np.Spec.Disruption.ConsolidationPolicy == ConsolidationPolicyBalanced {
		out = append(out, fieldErr{path: "spec.disruption.consolidationPolicy", msg: notHonoured + " (Balanced pools consolidate empty nodes only, as WhenEmpty does)"})
	}
	return out
}

// notHonouredNodeClass warns about an EC2NodeClass's unimplemented settings.
func notHonouredNodeClass(nc *EC2NodeClass) []fieldErr {
	var out []fieldErr
	s := nc.Spec
	if len(s.CapacityReservationSelectorTerms) > 0 {
		out = append(out, fieldErr{path: "spec.capacityReservationSelectorTerms", msg: notHonoured + " (reservations are neither discovered nor launched into)"})
	}
	if s.PlacementGroupSelector != nil {
		out = append(out, fieldErr{path: "spec.placementGroupSelector", msg: notHonoured + " (nodes are not launched into the placement group)"})
	}
	return out
}
