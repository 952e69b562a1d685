package scheduling

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

type topoKind uint8

const (
	kindSpread topoKind = iota
	kindAffinity
	kindAnti
)

func (k topoKind) String() string {
	switch k {
	case kindSpread:
		return "topology spread"
	case kindAffinity:
		return "pod affinity"
	}
	return "pod anti-affinity"
}

// topoGroup is one (kind, topology key, namespaces, selector, parameters)
// with incremental per-domain counts of the pods its selector matches.
// Anti-affinity groups additionally count, per domain, the pods that own the
// term, so pods matching the selector keep away from them (symmetry).
type topoGroup struct {
	kind       topoKind
	key        string
	nsAll      bool
	namespaces map[string]bool
	nsLabels   labels.Selector // namespaceSelector, when set and non-empty
	selector   labels.Selector
	maxSkew    int32
	minDomains int32
	// Node filter for counting (spread only): nodeAffinityPolicy Honor keeps
	// the owner's node requirements, nodeTaintsPolicy Honor its tolerations.
	filterBase  Requirements
	filterTerms []Requirements
	filterTols  []corev1.Toleration
	honorTaints bool

	counts map[string]int32
	owners map[string]int32
	desc   string
}

func (g *topoGroup) selectsNamespace(ns string, nsLabels map[string]map[string]string) bool {
	if g.nsAll || g.namespaces[ns] {
		return true
	}
	if g.nsLabels != nil {
		return g.nsLabels.Matches(labels.Set(nsLabels[ns]))
	}
	return false
}

func (g *topoGroup) selects(ns string, podLabels map[string]string, nsLabels map[string]map[string]string) bool {
	return g.selectsNamespace(ns, nsLabels) && g.selector.Matches(labels.Set(podLabels))
}

// nodeCounts reports whether pods on n count toward g (spread node policies).
func (g *topoGroup) nodeCounts(n *node) bool {
	if g.kind != kindSpread {
		return true
	}
	if g.honorTaints && untoleratedTaint(g.filterTols, n.taints, false) != nil {
		return false
	}
	if len(g.filterBase) == 0 && len(g.filterTerms) == 0 {
		return true
	}
	match := func(rs Requirements) bool {
		if n.claim == nil {
			return rs.MatchesLabels(n.labels)
		}
		return n.claim.reqs.Compatible(rs) == nil
	}
	if !match(g.filterBase) {
		return false
	}
	if len(g.filterTerms) == 0 {
		return true
	}
	for _, t := range g.filterTerms {
		if match(t) {
			return true
		}
	}
	return false
}

// groupBuilder dedupes groups across shapes.
type groupBuilder struct {
	byKey    map[string]*topoGroup
	groups   []*topoGroup
	nsLabels map[string]map[string]string
}

func selectorString(w *keyWriter, s labels.Selector) {
	w.str(s.String())
}

func (b *groupBuilder) get(g *topoGroup, extra string) *topoGroup {
	var w keyWriter
	w.int(int64(g.kind))
	w.str(g.key)
	if g.nsAll {
		w.tag('*')
	} else {
		nss := make([]string, 0, len(g.namespaces))
		for n := range g.namespaces {
			nss = append(nss, n)
		}
		sort.Strings(nss)
		for _, n := range nss {
			w.str(n)
		}
	}
	if g.nsLabels != nil {
		w.str(g.nsLabels.String())
	}
	selectorString(&w, g.selector)
	w.int(int64(g.maxSkew))
	w.int(int64(g.minDomains))
	w.str(extra)
	k := string(w.b)
	if ex, ok := b.byKey[k]; ok {
		return ex
	}
	g.counts = map[string]int32{}
	if g.kind == kindAnti {
		g.owners = map[string]int32{}
	}
	b.byKey[k] = g
	b.groups = append(b.groups, g)
	return g
}

// termSelector builds a pod affinity term's selector with matchLabelKeys /
// mismatchLabelKeys folded in from the owner's labels.
func termSelector(sel *metav1.LabelSelector, podLabels map[string]string, matchKeys, mismatchKeys []string) (labels.Selector, error) {
	var s labels.Selector
	if sel == nil {
		// A nil selector matches nothing in pod (anti-)affinity and spread.
		return labels.Nothing(), nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	for _, k := range matchKeys {
		if v, ok := podLabels[k]; ok {
			r, err := labels.NewRequirement(k, selection.In, []string{v})
			if err != nil {
				return nil, err
			}
			s = s.Add(*r)
		}
	}
	for _, k := range mismatchKeys {
		if v, ok := podLabels[k]; ok {
			r, err := labels.NewRequirement(k, selection.NotIn, []string{v})
			if err != nil {
				return nil, err
			}
			s = s.Add(*r)
		}
	}
	return s, nil
}

func (b *groupBuilder) affinityGroup(kind topoKind, pod *corev1.Pod, t *corev1.PodAffinityTerm) (*topoGroup, error) {
	if t.TopologyKey == "" {
		return nil, fmt.Errorf("%s term has an empty topologyKey", kind)
	}
	sel, err := termSelector(t.LabelSelector, pod.Labels, t.MatchLabelKeys, t.MismatchLabelKeys)
	if err != nil {
		return nil, fmt.Errorf("%s selector: %w", kind, err)
	}
	g := &topoGroup{kind: kind, key: t.TopologyKey, selector: sel, namespaces: map[string]bool{}}
	for _, n := range t.Namespaces {
		g.namespaces[n] = true
	}
	if t.NamespaceSelector != nil {
		if len(t.NamespaceSelector.MatchLabels) == 0 && len(t.NamespaceSelector.MatchExpressions) == 0 {
			g.nsAll = true
		} else {
			ns, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
			if err != nil {
				return nil, fmt.Errorf("%s namespaceSelector: %w", kind, err)
			}
			g.nsLabels = ns
		}
	}
	if !g.nsAll && len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
		g.namespaces[pod.Namespace] = true
	}
	g.desc = fmt.Sprintf("%s on %s (%s)", kind, t.TopologyKey, sel.String())
	return b.get(g, ""), nil
}

func (b *groupBuilder) spreadGroup(pod *corev1.Pod, c *corev1.TopologySpreadConstraint, base Requirements, terms []Requirements) (*topoGroup, error) {
	if c.TopologyKey == "" {
		return nil, fmt.Errorf("topology spread constraint has an empty topologyKey")
	}
	if c.MaxSkew <= 0 {
		return nil, fmt.Errorf("topology spread constraint on %s: maxSkew must be positive", c.TopologyKey)
	}
	sel, err := termSelector(c.LabelSelector, pod.Labels, c.MatchLabelKeys, nil)
	if err != nil {
		return nil, fmt.Errorf("topology spread selector: %w", err)
	}
	g := &topoGroup{kind: kindSpread, key: c.TopologyKey, selector: sel, maxSkew: c.MaxSkew,
		namespaces: map[string]bool{pod.Namespace: true}}
	if c.MinDomains != nil {
		g.minDomains = *c.MinDomains
	}
	var extra keyWriter
	if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		g.filterBase, g.filterTerms = base, terms
		extra.str(base.canonical())
		for _, t := range terms {
			extra.str(t.canonical())
		}
	}
	extra.tag('|')
	if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		g.honorTaints, g.filterTols = true, pod.Spec.Tolerations
		for _, t := range pod.Spec.Tolerations {
			extra.str(t.Key + "/" + string(t.Operator) + "/" + t.Value + "/" + string(t.Effect))
		}
	}
	g.desc = fmt.Sprintf("topology spread on %s maxSkew %d (%s)", c.TopologyKey, c.MaxSkew, sel.String())
	return b.get(g, string(extra.b)), nil
}

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
	switch key {
	case LabelZone, LabelCapacityType, LabelZoneID:
		zone, _ := c.reqs.Get(LabelZone)
		ct, _ := c.reqs.Get(LabelCapacityType)
		zid, _ := c.reqs.Get(LabelZoneID)
		c.options.each(func(i int) bool {
			for j := range c.pool.types[i].offerings {
				o := &c.pool.types[i].offerings[j]
				if !o.Available || (zone != nil && !zone.Has(o.Zone)) || (ct != nil && !ct.Has(o.CapacityType)) ||
					(zid != nil && !zid.Matches(o.ZoneID, o.ZoneID != "")) {
					continue
				}
				switch key {
				case LabelZone:
					add(o.Zone)
				case LabelCapacityType:
					add(o.CapacityType)
				default:
					if o.ZoneID != "" {
						add(o.ZoneID)
					}
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

// topology decides how many pods of s may join node n (at most limit)
// under every topology term the shape owns and every anti-affinity that
// selects it, and which domains an undecided claim must narrow to.
func (st *state) topology(s *shape, n *node, limit int) topoResult {
	res := topoResult{allow: limit}
	if len(s.owned) == 0 && len(s.inverseAnti) == 0 {
		return res
	}
	fail := func(perm bool, why whyCode, g *topoGroup, dom string) topoResult {
		return topoResult{permanent: perm, why: why, g: g, dom: dom}
	}
	for _, g := range s.inverseAnti {
		if len(g.owners) == 0 {
			continue
		}
		doms, decided := st.domainsOf(n, g.key, res.narrow)
		if doms == nil {
			continue
		}
		if decided {
			if g.owners[doms[0]] > 0 {
				return fail(true, whyInverseAntiIn, g, doms[0])
			}
			continue
		}
		keep := doms[:0:0]
		for _, d := range doms {
			if g.owners[d] == 0 {
				keep = append(keep, d)
			}
		}
		if len(keep) == 0 {
			return fail(true, whyInverseAntiAll, g, "")
		}
		if len(keep) < len(doms) {
			res.narrow = append(res.narrow, narrowing{g.key, keep})
		}
	}
	for _, g := range s.owned {
		self := g.selects(s.ns, s.labels, st.nsLabels)
		doms, decided := st.domainsOf(n, g.key, res.narrow)
		switch g.kind {
		case kindAnti:
			if doms == nil {
				continue
			}
			if decided {
				if g.counts[doms[0]] > 0 {
					return fail(true, whyAntiIn, g, doms[0])
				}
			} else {
				keep := doms[:0:0]
				for _, d := range doms {
					if g.counts[d] == 0 {
						keep = append(keep, d)
					}
				}
				if len(keep) == 0 {
					return fail(true, whyAntiAll, g, "")
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
		case kindAffinity:
			if doms == nil {
				return fail(true, whyNoLabel, g, "")
			}
			matched := false
			for _, d := range st.universeFor(g.key) {
				if g.counts[d] > 0 && eligibleReq(s, g.key, d) {
					matched = true
					break
				}
			}
			if !matched && g.key == LabelHostname {
				for d, c := range g.counts {
					if c > 0 && eligibleReq(s, g.key, d) {
						matched = true
						break
					}
				}
			}
			if decided {
				if g.counts[doms[0]] > 0 || (!matched && self) {
					continue
				}
				if n.claim != nil && g.key == LabelHostname {
					return fail(false, whyAffinityNewNode, g, "")
				}
				return fail(false, whyAffinityNone, g, doms[0])
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
				return fail(false, whyAffinityNowhere, g, "")
			}
			res.narrow = append(res.narrow, narrowing{g.key, []string{pick}})
		case kindSpread:
			if doms == nil {
				return fail(true, whyNoLabel, g, "")
			}
			universe := st.universeFor(g.key)
			minC := g.minCount(s, universe)
			var inc int32
			if self {
				inc = 1
			}
			if decided {
				c := g.counts[doms[0]]
				if c+inc-minC > g.maxSkew {
					r := fail(g.key == LabelHostname, whySkew, g, doms[0])
					r.skew = c + inc - minC
					return r
				}
				if self {
					res.allow = min(res.allow, int(g.maxSkew+minC-c))
				}
				continue
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
				return fail(false, whySkewAll, g, "")
			}
			res.narrow = append(res.narrow, narrowing{g.key, []string{best}})
			if self {
				res.allow = min(res.allow, int(g.maxSkew+minC-bestC))
			}
		}
		if res.allow <= 0 {
			return fail(false, whyGroup, g, "")
		}
	}
	return res
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
