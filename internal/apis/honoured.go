package apis

// Fields nodewright accepts (so Karpenter users' files load unchanged) but
// does not act on yet. Each is a warning, never silence: a user must not
// believe a setting works when it does not. Remove an entry when the
// behaviour lands.

const notHonoured = "accepted but not yet honoured by nodewright"

// notHonouredNodePool warns about a NodePool's unimplemented settings.
func notHonouredNodePool(np *NodePool) []fieldErr {
	var out []fieldErr
	if np.Spec.Disruption.ConsolidationPolicy == ConsolidationPolicyBalanced {
		out = append(out, fieldErr{path: "spec.disruption.consolidationPolicy", msg: notHonoured + " (Balanced pools consolidate empty nodes only, as WhenEmpty does)"})
	}
	return out
}

// notHonouredNodeClass warns about an EC2NodeClass's unimplemented
// settings: none today (placementGroupSelector was the last).
func notHonouredNodeClass(*EC2NodeClass) []fieldErr {
	return nil
}
