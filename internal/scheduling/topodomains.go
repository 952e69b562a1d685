package scheduling

import "sort"

// filteredDomains gives each spread group whose node policies filter nodes
// (nodeTaintsPolicy Honor, or nodeAffinityPolicy Honor with node
// requirements) its own domains, as Karpenter builds them
// (provisioning/scheduling topologydomaingroup.go ForEachDomain and
// topology.go countDomains): a NodePool's domains only when the pod
// tolerates the pool's taints (Honor), and an existing node's domain only
// when the node passes the group's filter. Without it an empty domain the
// pod can never use would hold the spread's minimum at 0. Other groups use
// the key's universe.
func (st *state) filteredDomains() {
	for _, g := range st.groups.groups {
		if g.kind != kindSpread || g.key == LabelHostname || !g.filtersNodes() {
			continue
		}
		set := map[string]bool{}
		for _, p := range st.pools {
			if !g.honorTaints || untoleratedTaint(g.filterTols, p.taints, false) == nil {
				p.addDomains(g.key, set)
			}
		}
		for _, n := range st.nodes {
			if v, ok := n.labels[g.key]; ok && g.nodeCounts(n) {
				set[v] = true
			}
		}
		g.domains = make([]string, 0, len(set))
		for v := range set {
			g.domains = append(g.domains, v)
		}
		sort.Strings(g.domains)
	}
}

// filtersNodes reports whether the group's node policies exclude some nodes.
func (g *topoGroup) filtersNodes() bool {
	return g.honorTaints || len(g.filterBase) > 0 || len(g.filterTerms) > 0
}

// domainsFor is the universe a group's minimum is taken over.
func (st *state) domainsFor(g *topoGroup) []string {
	if g.domains != nil {
		return g.domains
	}
	return st.universe[g.key]
}
