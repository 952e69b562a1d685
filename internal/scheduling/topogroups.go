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
	// domains are the group's own domains when its node filter excludes
	// some (filteredDomains); nil: the key's universe.
	domains []string

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
	if sel == nil {
		// A nil selector matches nothing in pod (anti-)affinity and spread.
		return labels.Nothing(), nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	if s, err = withLabelKeys(s, podLabels, matchKeys, selection.In); err != nil {
		return nil, err
	}
	return withLabelKeys(s, podLabels, mismatchKeys, selection.NotIn)
}

// withLabelKeys adds to s, for each of keys the owner pod carries, that
// the key must be (In) or must not be (NotIn) the owner's value.
func withLabelKeys(s labels.Selector, podLabels map[string]string, keys []string, op selection.Operator) (labels.Selector, error) {
	for _, k := range keys {
		if v, ok := podLabels[k]; ok {
			r, err := labels.NewRequirement(k, op, []string{v})
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
