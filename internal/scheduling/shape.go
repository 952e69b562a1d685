package scheduling

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A shape is a set of pending pods the solver cannot tell apart: same
// namespace, requests, node constraints, tolerations, topology terms, host
// ports, volume topology and the labels any selector looks at. Ten thousand
// replicas of a Deployment are one shape, placed in bulk.
type shape struct {
	id   int
	rank int           // position in the placement order (largest first)
	pods []*corev1.Pod // creation time, then UID
	ns   string
	// labels of the first pod restricted to keys some selector reads.
	labels map[string]string
	req    resVec
	ports  []hostPort
	// attach is, per pod, the volumes it attaches (nil: none attaches
	// any), for existing nodes' attach limits (volumelimits.go).
	attach [][]attachment

	// Constraint sources; relaxation walks through them in Karpenter's order.
	baseReqs       Requirements   // nodeSelector + volume topology
	requiredTerms  []Requirements // OR terms of required node affinity
	preferredNode  []weightedReqs // heaviest first
	tolerations    []corev1.Toleration
	spreads        []spreadTerm
	affinity       []affinityTerm // required pod affinity
	antiAffinity   []affinityTerm // required pod anti-affinity
	prefAffinity   []affinityTerm // preferred, heaviest first
	prefAnti       []affinityTerm
	invalid        string // set when the pod's spec cannot be interpreted
	countedBy      []*topoGroup
	inverseAnti    []*topoGroup // anti-affinity groups whose selector matches this shape
	placedSoFar    int
	opener         bool // each pod needs a node of its own
	unplacedReason string

	// Active variant, recomputed by activate() after each relaxation.
	variant         int
	termIdx         int
	prefNodeIdx     int
	prefAffDropped  int
	prefAntiDropped int
	anywayDropped   int
	toleratePrefer  bool
	reqs            Requirements
	owned           []*topoGroup
	masks           map[*poolState]bitset
	ideals          map[*poolState]float64
	cands           []int32
	excl            growBits // nodes this variant can never use
	seen            int
}

type weightedReqs struct {
	weight int32
	reqs   Requirements
}

type spreadTerm struct {
	group  *topoGroup
	anyway bool
}

type affinityTerm struct {
	group  *topoGroup
	weight int32
}

type hostPort struct {
	ip       string
	protocol corev1.Protocol
	port     int32
}

func (a hostPort) conflicts(b hostPort) bool {
	if a.port != b.port || a.protocol != b.protocol {
		return false
	}
	return a.ip == b.ip || a.ip == "" || a.ip == "0.0.0.0" || b.ip == "" || b.ip == "0.0.0.0"
}

func podHostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []corev1.Container) {
		for i := range cs {
			for _, p := range cs[i].Ports {
				if p.HostPort <= 0 {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPort{ip: p.HostIP, protocol: proto, port: p.HostPort})
			}
		}
	}
	add(pod.Spec.InitContainers)
	add(pod.Spec.Containers)
	sort.Slice(out, func(i, j int) bool {
		if out[i].port != out[j].port {
			return out[i].port < out[j].port
		}
		if out[i].protocol != out[j].protocol {
			return out[i].protocol < out[j].protocol
		}
		return out[i].ip < out[j].ip
	})
	return out
}

func portsConflict(a, b []hostPort) bool {
	for i := range a {
		for j := range b {
			if a[i].conflicts(b[j]) {
				return true
			}
		}
	}
	return false
}

// keyWriter builds a shape key without allocating per field.
type keyWriter struct{ b []byte }

func (w *keyWriter) str(s string) {
	w.b = strconv.AppendInt(w.b, int64(len(s)), 10)
	w.b = append(w.b, ':')
	w.b = append(w.b, s...)
}
func (w *keyWriter) int(n int64) { w.b = strconv.AppendInt(w.b, n, 10); w.b = append(w.b, ';') }
func (w *keyWriter) tag(c byte)  { w.b = append(w.b, c) }

func (w *keyWriter) sortedMap(m map[string]string, keep func(string) bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if keep == nil || keep(k) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	w.int(int64(len(keys)))
	for _, k := range keys {
		w.str(k)
		w.str(m[k])
	}
}

// strs writes a list of strings, length first.
func (w *keyWriter) strs(ss []string) {
	w.int(int64(len(ss)))
	for _, s := range ss {
		w.str(s)
	}
}

// expr writes one selector expression (node or label selector alike).
func (w *keyWriter) expr(key, op string, values []string) {
	w.str(key)
	w.str(op)
	w.strs(values)
}

func (w *keyWriter) selectorReqs(rs []corev1.NodeSelectorRequirement) {
	w.int(int64(len(rs)))
	for _, r := range rs {
		w.expr(r.Key, string(r.Operator), r.Values)
	}
}

func (w *keyWriter) labelSelector(s *metav1.LabelSelector) {
	if s == nil {
		w.tag('n')
		return
	}
	w.sortedMap(s.MatchLabels, nil)
	w.int(int64(len(s.MatchExpressions)))
	for _, e := range s.MatchExpressions {
		w.expr(e.Key, string(e.Operator), e.Values)
	}
}

func (w *keyWriter) podAffinityTerm(t *corev1.PodAffinityTerm) {
	w.labelSelector(t.LabelSelector)
	w.strs(t.Namespaces)
	w.labelSelector(t.NamespaceSelector)
	w.str(t.TopologyKey)
	w.strs(t.MatchLabelKeys)
	w.strs(t.MismatchLabelKeys)
}

// writeShapeKey serializes everything that makes pods distinguishable to
// the solver. volumeKey is the pod's resolved volume topology. Strings
// carry their length and optional parts a tag, so parts cannot run into
// each other.
func writeShapeKey(w *keyWriter, pod *corev1.Pod, req resVec, selectorKeys map[string]bool, volumeKey string) {
	w.str(pod.Namespace)
	for _, v := range req {
		w.int(v)
	}
	w.sortedMap(pod.Labels, func(k string) bool { return selectorKeys[k] })
	w.sortedMap(pod.Spec.NodeSelector, nil)
	w.str(volumeKey)
	w.tolerations(pod.Spec.Tolerations)
	if a := pod.Spec.Affinity; a != nil {
		if a.NodeAffinity != nil {
			w.nodeAffinity(a.NodeAffinity)
		}
		if pa := a.PodAffinity; pa != nil {
			w.podAffinities('A', 'a', pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
		if pa := a.PodAntiAffinity; pa != nil {
			w.podAffinities('X', 'x', pa.RequiredDuringSchedulingIgnoredDuringExecution, pa.PreferredDuringSchedulingIgnoredDuringExecution)
		}
	}
	w.tag('S')
	for i := range pod.Spec.TopologySpreadConstraints {
		w.spread(&pod.Spec.TopologySpreadConstraints[i])
	}
	w.tag('H')
	for _, p := range podHostPortsFast(pod) {
		w.str(p.ip)
		w.str(string(p.protocol))
		w.int(int64(p.port))
	}
}

func (w *keyWriter) tolerations(ts []corev1.Toleration) {
	w.int(int64(len(ts)))
	for _, t := range ts {
		w.str(t.Key)
		w.str(string(t.Operator))
		w.str(t.Value)
		w.str(string(t.Effect))
	}
}

func (w *keyWriter) nodeAffinity(na *corev1.NodeAffinity) {
	w.tag('N')
	if r := na.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
		w.int(int64(len(r.NodeSelectorTerms)))
		for _, t := range r.NodeSelectorTerms {
			w.selectorReqs(t.MatchExpressions)
			w.selectorReqs(t.MatchFields)
		}
	}
	w.tag('P')
	for _, p := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		w.int(int64(p.Weight))
		w.selectorReqs(p.Preference.MatchExpressions)
	}
}

// podAffinities writes one kind's required terms after reqTag and its
// preferred terms after prefTag.
func (w *keyWriter) podAffinities(reqTag, prefTag byte, required []corev1.PodAffinityTerm, preferred []corev1.WeightedPodAffinityTerm) {
	w.tag(reqTag)
	for i := range required {
		w.podAffinityTerm(&required[i])
	}
	w.tag(prefTag)
	for i := range preferred {
		w.int(int64(preferred[i].Weight))
		w.podAffinityTerm(&preferred[i].PodAffinityTerm)
	}
}

func (w *keyWriter) spread(c *corev1.TopologySpreadConstraint) {
	w.int(int64(c.MaxSkew))
	w.str(c.TopologyKey)
	w.str(string(c.WhenUnsatisfiable))
	w.labelSelector(c.LabelSelector)
	if c.MinDomains != nil {
		w.int(int64(*c.MinDomains))
	} else {
		w.tag('-')
	}
	if c.NodeAffinityPolicy != nil {
		w.str(string(*c.NodeAffinityPolicy))
	}
	w.tag('|')
	if c.NodeTaintsPolicy != nil {
		w.str(string(*c.NodeTaintsPolicy))
	}
	w.tag('|')
	w.strs(c.MatchLabelKeys)
}

// podHostPortsFast avoids the sort when there are no host ports (the norm).
func podHostPortsFast(pod *corev1.Pod) []hostPort {
	for i := range pod.Spec.Containers {
		for _, p := range pod.Spec.Containers[i].Ports {
			if p.HostPort > 0 {
				return podHostPorts(pod)
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		for _, p := range pod.Spec.InitContainers[i].Ports {
			if p.HostPort > 0 {
				return podHostPorts(pod)
			}
		}
	}
	return nil
}

// selectorKeys collects every label key any selector in the input reads,
// so shapes split only on labels that matter.
func collectSelectorKeys(pods []*corev1.Pod, nodes []*ExistingNode) map[string]bool {
	keys := map[string]bool{}
	addSel := func(s *metav1.LabelSelector) {
		if s == nil {
			return
		}
		for k := range s.MatchLabels {
			keys[k] = true
		}
		for _, e := range s.MatchExpressions {
			keys[e.Key] = true
		}
	}
	addTerm := func(t *corev1.PodAffinityTerm) {
		addSel(t.LabelSelector)
		for _, k := range t.MatchLabelKeys {
			keys[k] = true
		}
		for _, k := range t.MismatchLabelKeys {
			keys[k] = true
		}
	}
	visit := func(p *corev1.Pod, onlyAnti bool) {
		a := p.Spec.Affinity
		if a != nil && a.PodAntiAffinity != nil {
			for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				addTerm(&a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i])
			}
			if !onlyAnti {
				for i := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
					addTerm(&a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
				}
			}
		}
		if onlyAnti {
			return
		}
		if a != nil && a.PodAffinity != nil {
			for i := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				addTerm(&a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i])
			}
			for i := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				addTerm(&a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i].PodAffinityTerm)
			}
		}
		for _, c := range p.Spec.TopologySpreadConstraints {
			addSel(c.LabelSelector)
			for _, k := range c.MatchLabelKeys {
				keys[k] = true
			}
		}
	}
	for _, p := range pods {
		visit(p, false)
	}
	for _, n := range nodes {
		pods := n.Pods
		if n.Digest != nil {
			pods = n.Digest.anti // the only pods visit reads when onlyAnti
		}
		for _, p := range pods {
			visit(p, true)
		}
	}
	return keys
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// podRequirements returns nodeSelector as requirements and the OR terms of
// required node affinity (nil when there are none).
func podNodeRequirements(pod *corev1.Pod) (Requirements, []Requirements, []weightedReqs, error) {
	var base Requirements
	for k, v := range pod.Spec.NodeSelector {
		if err := ValidLabel(k, v); err != nil {
			return nil, nil, nil, fmt.Errorf("nodeSelector: %w", err)
		}
		base = base.Add(Requirement{Key: NormalizedKey(k), values: []string{v}})
	}
	var terms []Requirements
	var prefs []weightedReqs
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		if r := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; r != nil {
			for i, t := range r.NodeSelectorTerms {
				rs, err := termRequirements(t)
				if err != nil {
					return nil, nil, nil, fmt.Errorf("required node affinity term %d: %w", i, err)
				}
				terms = append(terms, rs)
			}
			if len(terms) == 0 {
				return nil, nil, nil, fmt.Errorf("required node affinity has no terms")
			}
		}
		for i, p := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			rs, err := termRequirements(p.Preference)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("preferred node affinity term %d: %w", i, err)
			}
			prefs = append(prefs, weightedReqs{weight: p.Weight, reqs: rs})
		}
		sort.SliceStable(prefs, func(i, j int) bool { return prefs[i].weight > prefs[j].weight })
	}
	return base, terms, prefs, nil
}

func termRequirements(t corev1.NodeSelectorTerm) (Requirements, error) {
	rs, err := RequirementsFromSelector(t.MatchExpressions)
	if err != nil {
		return nil, err
	}
	for _, f := range t.MatchFields {
		// metadata.name is the only field selector Kubernetes supports; it pins
		// the pod to one named node, which maps onto the hostname domain.
		if f.Key != "metadata.name" {
			return nil, fmt.Errorf("unsupported matchFields key %q", f.Key)
		}
		r, err := NewRequirement(LabelHostname, f.Operator, f.Values...)
		if err != nil {
			return nil, err
		}
		rs = rs.Add(r)
	}
	return rs, nil
}

func joinReasons(rs []string) string { return strings.Join(rs, "; ") }
