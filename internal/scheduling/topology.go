package scheduling

import (
	"fmt"
	"sort"
)

// narrowing restricts a claim's label key to values, chosen by topology.
type narrowing struct {
	key    string
	values []string
}

// topoResult is the outcome of checking a shape's topology on one node.
// The failure is kept as data and only formatted when a person needs it:
// the check runs millions of times on the hot path.
type topoResult struct {
	allow     int
	permanent bool
	narrow    []narrowing
	why       whyCode
	g         *topoGroup
	dom       string
	skew      int32
}

type whyCode uint8

const (
	whyNone whyCode = iota
	whyInverseAntiIn
	whyInverseAntiAll
	whyAntiIn
	whyAntiAll
	whyNoLabel
	whyAffinityNewNode
	whyAffinityNone
	whyAffinityNowhere
	whySkew
	whySkewAll
	whyGroup
)

func (r topoResult) reason() string {
	g := r.g
	switch r.why {
	case whyInverseAntiIn:
		return "a pod with anti-affinity to it is in " + g.key + "=" + r.dom
	case whyInverseAntiAll:
		return "pods with anti-affinity to it occupy every " + g.key
	case whyAntiIn:
		return g.desc + ": matching pod already in " + r.dom
	case whyAntiAll:
		return g.desc + ": every domain already holds a matching pod"
	case whyNoLabel:
		return g.desc + ": node has no " + g.key + " label"
	case whyAffinityNewNode:
		return g.desc + ": a new node holds no matching pod"
	case whyAffinityNone:
		return g.desc + ": no matching pod in " + g.key + "=" + r.dom
	case whyAffinityNowhere:
		return g.desc + ": no domain holds a matching pod"
	case whySkew:
		return fmt.Sprintf("%s: %s=%s would have skew %d", g.desc, g.key, r.dom, r.skew)
	case whySkewAll:
		return g.desc + ": every reachable domain is at max skew"
	case whyGroup:
		return g.desc
	}
	return "topology constraints cannot be met"
}

// domainsOf returns the domains node n may end up in for key: one value
// when decided, the viable set for a claim still open on key, or none when
// the node will never carry the label.
func (st *state) domainsOf(n *node, key string, narrowed []narrowing) ([]string, bool) {
	for i := len(narrowed) - 1; i >= 0; i-- {
		if narrowed[i].key == key {
			return narrowed[i].values, len(narrowed[i].values) == 1
		}
	}
	if n.claim == nil {
		v, ok := n.labels[key]
		if !ok {
			if key == LabelHostname {
				return []string{n.name}, true
			}
			return nil, false
		}
		return []string{v}, true
	}
	if r, ok := n.claim.reqs.Get(key); ok {
		if v, ok := r.Single(); ok {
			return []string{v}, true
		}
	}
	vals := st.viable(n, key)
	return vals, len(vals) == 1
}

// viable lists the values of key a claim can still take given its options.
func (st *state) viable(n *node, key string) []string {
	c := n.claim
	if cached, ok := c.viable[key]; ok && cached.version == c.version {
		return cached.values
	}
	// Domain sets are tiny (zones, capacity types): a slice beats a map.
	var out []string
	add := func(v string) {
		for _, x := range out {
			if x == v {
				return
			}
		}
		out = append(out, v)
	}
	r, constrained := c.reqs.Get(key)
	switch {
	case isOfferingKey(key):
		f := launchFilterOf(c.reqs)
		c.options.each(func(i int) bool {
			for j := range c.pool.types[i].offerings {
				o := &c.pool.types[i].offerings[j]
				if v, ok := offeringLabel(o, key); ok && f.allows(o) {
					add(v)
				}
			}
			return true
		})
	default:
		typeKey := false
		c.options.each(func(i int) bool {
			it := c.pool.types[i].it
			if isTypeKey(it, key) {
				typeKey = true
				if v, ok := it.Labels[key]; ok && (!constrained || r.Has(v)) {
					add(v)
				}
			}
			return true
		})
		if !typeKey && constrained {
			if r.Finite() {
				for _, v := range r.Values() {
					add(v)
				}
			} else {
				for _, v := range st.universe[key] {
					if r.Has(v) {
						add(v)
					}
				}
			}
		}
	}
	sort.Strings(out)
	if c.viable == nil {
		c.viable = map[string]viableCache{}
	}
	c.viable[key] = viableCache{version: c.version, values: out}
	return out
}

type viableCache struct {
	version int
	values  []string
}

// eligible reports whether domain d counts toward a spread's minimum for
// shape s (nodeAffinityPolicy Honor: the pod's own node requirements).
func eligible(g *topoGroup, s *shape, d string) bool {
	if g.filterBase == nil && g.filterTerms == nil {
		return true
	}
	r, ok := s.reqs.Get(g.key)
	return !ok || r.Has(d)
}

func (g *topoGroup) minCount(s *shape, universe []string) int32 {
	if g.key == LabelHostname {
		return 0 // a new node is always an empty hostname domain
	}
	var min int32 = -1
	var n int32
	for _, d := range universe {
		if !eligible(g, s, d) {
			continue
		}
		n++
		c := g.counts[d]
		if min < 0 || c < min {
			min = c
		}
	}
	if min < 0 || (g.minDomains > 0 && n < g.minDomains) {
		return 0
	}
	return min
}

// topology decides how many pods of s may join node n (at most limit, at
// least one) under every topology term the shape owns and every
// anti-affinity that selects it, and which domains an undecided claim must
// narrow to. Each term's check narrows res further, so later terms see the
// domains earlier ones left.
func (st *state) topology(s *shape, n *node, limit int) topoResult {
	res := topoResult{allow: limit}
	if len(s.owned) == 0 && len(s.inverseAnti) == 0 {
		return res
	}
	for _, g := range s.inverseAnti {
		if fail, ok := st.inverseAntiCheck(n, g, &res); !ok {
			return fail
		}
	}
	for _, g := range s.owned {
		self := g.selects(s.ns, s.labels, st.nsLabels)
		doms, decided := st.domainsOf(n, g.key, res.narrow)
		var fail topoResult
		ok := true
		switch g.kind {
		case kindAnti:
			fail, ok = antiCheck(g, self, doms, decided, &res)
		case kindAffinity:
			fail, ok = st.affinityCheck(s, n, g, self, doms, decided, &res)
		case kindSpread:
			fail, ok = st.spreadCheck(s, g, self, doms, decided, &res)
		}
		if !ok {
			return fail
		}
		if res.allow <= 0 {
			return topoFail(false, whyGroup, g, "")
		}
	}
	return res
}

func topoFail(perm bool, why whyCode, g *topoGroup, dom string) topoResult {
	return topoResult{permanent: perm, why: why, g: g, dom: dom}
}

// freeDomains returns the domains of doms where counts holds nothing, in
// a new slice (doms may be a claim's cached viable set).
func freeDomains(doms []string, counts map[string]int32) []string {
	keep := doms[:0:0]
	for _, d := range doms {
		if counts[d] == 0 {
			keep = append(keep, d)
		}
	}
	return keep
}

// inverseAntiCheck keeps the pod away from domains where pods with a
// required anti-affinity that selects it run (symmetry).
func (st *state) inverseAntiCheck(n *node, g *topoGroup, res *topoResult) (topoResult, bool) {
	if len(g.owners) == 0 {
		return topoResult{}, true
	}
	doms, decided := st.domainsOf(n, g.key, res.narrow)
	if doms == nil {
		return topoResult{}, true // the node never carries the key
	}
	if decided {
		if g.owners[doms[0]] > 0 {
			return topoFail(true, whyInverseAntiIn, g, doms[0]), false
		}
		return topoResult{}, true
	}
	keep := freeDomains(doms, g.owners)
	if len(keep) == 0 {
		return topoFail(true, whyInverseAntiAll, g, ""), false
	}
	if len(keep) < len(doms) {
		res.narrow = append(res.narrow, narrowing{g.key, keep})
	}
	return topoResult{}, true
}

// antiCheck keeps the pod out of domains holding a pod its anti-affinity
// term selects; a pod that selects itself takes one per domain.
func antiCheck(g *topoGroup, self bool, doms []string, decided bool, res *topoResult) (topoResult, bool) {
	if doms == nil {
		return topoResult{}, true // the node never carries the key
	}
	if decided {
		if g.counts[doms[0]] > 0 {
			return topoFail(true, whyAntiIn, g, doms[0]), false
		}
	} else {
		keep := freeDomains(doms, g.counts)
		if len(keep) == 0 {
			return topoFail(true, whyAntiAll, g, ""), false
		}
		// A pod that repels its own kind would otherwise block every
		// domain the claim might still land in; commit to one.
		if self && len(keep) > 1 {
			keep = keep[:1]
		}
		if len(keep) < len(doms) {
			res.narrow = append(res.narrow, narrowing{g.key, keep})
		}
	}
	if self {
		res.allow = min(res.allow, 1)
	}
	return topoResult{}, true
}

// affinityCheck puts the pod in a domain that holds a pod its affinity
// term selects; the first pod of a kind that selects itself may start
// anywhere its requirements allow.
func (st *state) affinityCheck(s *shape, n *node, g *topoGroup, self bool, doms []string, decided bool, res *topoResult) (topoResult, bool) {
	if doms == nil {
		return topoFail(true, whyNoLabel, g, ""), false
	}
	matched := st.affinityMatchedAnywhere(s, g)
	if decided {
		if g.counts[doms[0]] > 0 || (!matched && self) {
			return topoResult{}, true
		}
		if n.claim != nil && g.key == LabelHostname {
			return topoFail(false, whyAffinityNewNode, g, ""), false
		}
		return topoFail(false, whyAffinityNone, g, doms[0]), false
	}
	var pick string
	for _, d := range doms {
		if g.counts[d] > 0 {
			pick = d
			break
		}
	}
	if pick == "" && !matched && self {
		for _, d := range doms {
			if eligibleReq(s, g.key, d) {
				pick = d
				break
			}
		}
	}
	if pick == "" {
		return topoFail(false, whyAffinityNowhere, g, ""), false
	}
	res.narrow = append(res.narrow, narrowing{g.key, []string{pick}})
	return topoResult{}, true
}

// affinityMatchedAnywhere reports whether any domain the shape may use
// already holds a pod the group selects (hostname domains are not in the
// universe: they are the counts' own keys).
func (st *state) affinityMatchedAnywhere(s *shape, g *topoGroup) bool {
	for _, d := range st.universeFor(g.key) {
		if g.counts[d] > 0 && eligibleReq(s, g.key, d) {
			return true
		}
	}
	if g.key == LabelHostname {
		for d, c := range g.counts {
			if c > 0 && eligibleReq(s, g.key, d) {
				return true
			}
		}
	}
	return false
}

// spreadCheck keeps the skew of the pod's domain within maxSkew of the
// least loaded eligible domain, narrowing an open claim to the least
// loaded domain it can still reach, and caps the pods of a self-selecting
// shape at what the skew allows.
func (st *state) spreadCheck(s *shape, g *topoGroup, self bool, doms []string, decided bool, res *topoResult) (topoResult, bool) {
	if doms == nil {
		return topoFail(true, whyNoLabel, g, ""), false
	}
	minC := g.minCount(s, st.domainsFor(g))
	var inc int32
	if self {
		inc = 1
	}
	if decided {
		c := g.counts[doms[0]]
		if c+inc-minC > g.maxSkew {
			r := topoFail(g.key == LabelHostname, whySkew, g, doms[0])
			r.skew = c + inc - minC
			return r, false
		}
		if self {
			res.allow = min(res.allow, int(g.maxSkew+minC-c))
		}
		return topoResult{}, true
	}
	best, bestC := "", int32(-1)
	for _, d := range doms {
		c := g.counts[d]
		if c+inc-minC > g.maxSkew {
			continue
		}
		if bestC < 0 || c < bestC {
			best, bestC = d, c
		}
	}
	if best == "" {
		return topoFail(false, whySkewAll, g, ""), false
	}
	res.narrow = append(res.narrow, narrowing{g.key, []string{best}})
	if self {
		res.allow = min(res.allow, int(g.maxSkew+minC-bestC))
	}
	return topoResult{}, true
}

func eligibleReq(s *shape, key, d string) bool {
	r, ok := s.reqs.Get(key)
	return !ok || r.Has(d)
}

func (st *state) universeFor(key string) []string { return st.universe[key] }

// record counts k pods of s on n in every group that cares.
func (st *state) record(s *shape, n *node, k int) {
	for _, g := range s.countedBy {
		if !g.nodeCounts(n) {
			continue
		}
		doms, decided := st.domainsOf(n, g.key, nil)
		if decided {
			g.counts[doms[0]] += int32(k)
		} else if g.kind == kindAnti {
			// Block every domain the pod may still land in.
			for _, d := range doms {
				g.counts[d] += int32(k)
			}
		}
	}
	// Only required anti-affinity repels other pods (preferred terms only
	// steer their owner).
	for _, t := range s.antiAffinity {
		g := t.group
		doms, _ := st.domainsOf(n, g.key, nil)
		for _, d := range doms {
			g.owners[d] += int32(k)
		}
	}
}

// recordDecided counts pods already on claim n for groups keyed on key,
// now that the claim's domain for key is decided (they were skipped while
// it was open).
func (st *state) recordDecided(n *node, key string) {
	doms, decided := st.domainsOf(n, key, nil)
	if !decided {
		return
	}
	for _, pr := range n.placed {
		for _, g := range pr.s.countedBy {
			if g.key == key && g.kind != kindAnti && g.nodeCounts(n) {
				g.counts[doms[0]] += pr.n
			}
		}
	}
}
