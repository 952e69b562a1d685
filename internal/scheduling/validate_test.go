package scheduling_test

import (
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// This file is an independent checker: it re-derives every constraint from
// the raw input with plain Kubernetes semantics (no solver code, matchers
// in validate_match_test.go) and checks the plan's final state against it.

// checkPlan fails t for every constraint the plan violates.
func checkPlan(t *testing.T, in *scheduling.Input, plan *scheduling.Plan) {
	t.Helper()
	errs := planErrors(in, plan)
	for i, e := range errs {
		if i >= 20 {
			t.Errorf("... and %d more violations", len(errs)-20)
			break
		}
		t.Error(e)
	}
}

// planCheck is one run of the checker: the nodes of the plan's final state
// (existing nodes and claims, with every pod on them) and the violations
// found so far.
type planCheck struct {
	in      *scheduling.Input
	plan    *scheduling.Plan
	pending map[string]*corev1.Pod
	seen    map[string]int // times each pod appears in the plan
	pools   map[string]*scheduling.NodePool
	nodes   []*vnode
	byName  map[string]*vnode
	podNode map[*corev1.Pod]*vnode
	errs    []string
}

func (pc *planCheck) bad(f string, a ...any) { pc.errs = append(pc.errs, fmt.Sprintf(f, a...)) }

func planErrors(in *scheduling.Input, plan *scheduling.Plan) []string {
	pc := &planCheck{in: in, plan: plan, pending: map[string]*corev1.Pod{}, seen: map[string]int{},
		pools: map[string]*scheduling.NodePool{}, byName: map[string]*vnode{}, podNode: map[*corev1.Pod]*vnode{}}
	for _, p := range in.Pods {
		pc.pending[p.Namespace+"/"+p.Name] = p
	}
	for _, p := range in.NodePools {
		pc.pools[p.Name] = p
	}
	pc.existingNodes()
	pc.claims()
	pc.limits()
	pc.accounting()
	for _, n := range pc.nodes {
		for _, p := range n.pods {
			pc.podNode[p] = n
		}
	}
	for _, n := range pc.nodes {
		pc.nodeErrors(n)
	}
	pc.podAffinityErrors()
	pc.errs = append(pc.errs, spreadErrors(in, pc.nodes, pc.podNode, pc.pending)...)
	sort.Strings(pc.errs)
	return pc.errs
}

// place puts the plan's pods (by key) on n.
func (pc *planCheck) place(n *vnode, keys []string) {
	for _, k := range keys {
		pc.seen[k]++
		if p := pc.pending[k]; p != nil {
			n.pods = append(n.pods, p)
			n.placed = append(n.placed, p)
		}
	}
}

// existingNodes builds the input's nodes as the pods will find them (taints
// that go away once a node is initialized are dropped) and puts the pods the
// plan places there on them.
func (pc *planCheck) existingNodes() {
	for _, en := range pc.in.Nodes {
		n := &vnode{name: en.Name, labels: map[string]string{}, alloc: en.Allocatable, ports: map[string]bool{}}
		for k, v := range en.Labels {
			n.labels[k] = v
		}
		if _, ok := n.labels[corev1.LabelHostname]; !ok {
			n.labels[corev1.LabelHostname] = en.Name
		}
		for _, tt := range en.Taints {
			if !en.Initialized && scheduling.IsEphemeralTaint(tt) {
				continue
			}
			startup := false
			for _, st := range en.StartupTaints {
				startup = startup || (st.Key == tt.Key && st.Effect == tt.Effect)
			}
			if !en.Initialized && startup {
				continue
			}
			n.taints = append(n.taints, tt)
		}
		n.pods = append(n.pods, en.Pods...)
		pc.nodes = append(pc.nodes, n)
		pc.byName[n.name] = n
	}
	for _, np := range pc.plan.ExistingNodes {
		n := pc.byName[np.Name]
		if n == nil {
			pc.bad("plan places pods on unknown node %s", np.Name)
			continue
		}
		pc.place(n, np.Pods)
	}
}

func (pc *planCheck) types(pool string) []*scheduling.InstanceType {
	if its, ok := pc.in.InstanceTypes[pool]; ok {
		return its
	}
	return pc.in.DefaultInstanceTypes
}

// claims checks every claim against its pool and the catalog and builds
// its node: labels, the pool's taints, the DaemonSet pods it will run, and
// its planned pods.
func (pc *planCheck) claims() {
	claimNames := map[string]bool{}
	for _, c := range pc.plan.NodeClaims {
		if claimNames[c.Name] {
			pc.bad("claim name %s used twice", c.Name)
		}
		claimNames[c.Name] = true
		pool := pc.pools[c.NodePool]
		if pool == nil {
			pc.bad("claim %s from unknown pool %s", c.Name, c.NodePool)
			continue
		}
		var it *scheduling.InstanceType
		for _, x := range pc.types(c.NodePool) {
			if x.Name == c.InstanceType {
				it = x
			}
		}
		if it == nil {
			pc.bad("claim %s: unknown instance type %s", c.Name, c.InstanceType)
			continue
		}
		pc.claimOffering(c, it)
		pc.claimLabels(c, pool)
		n := &vnode{name: c.Name, labels: map[string]string{}, alloc: it.Allocatable, ports: map[string]bool{}, claim: true}
		for k, v := range c.Labels {
			n.labels[k] = v
		}
		n.labels[corev1.LabelHostname] = c.Name
		n.taints = pool.Taints
		pc.addDaemons(n, pool)
		pc.place(n, c.Pods)
		pc.nodes = append(pc.nodes, n)
		pc.byName[n.name] = n
	}
}

// claimOffering checks the claim's options and that its type is offered,
// available, at the claim's price, in its zone and capacity type.
func (pc *planCheck) claimOffering(c *scheduling.NodeClaimPlan, it *scheduling.InstanceType) {
	if len(c.InstanceTypeOptions) == 0 || len(c.InstanceTypeOptions) > 60 || c.InstanceTypeOptions[0] != c.InstanceType {
		pc.bad("claim %s: options %v must start with the chosen type and hold 1..60 types", c.Name, len(c.InstanceTypeOptions))
	}
	offered := false
	for _, o := range it.Offerings {
		if o.Zone == c.Zone && o.CapacityType == c.CapacityType && o.Available &&
			!pc.in.Unavailable[scheduling.OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}] {
			offered = true
			if o.Price != c.PricePerHour {
				pc.bad("claim %s: price %v but offering costs %v", c.Name, c.PricePerHour, o.Price)
			}
		}
	}
	if !offered {
		pc.bad("claim %s: %s not offered (or unavailable) in %s/%s", c.Name, it.Name, c.Zone, c.CapacityType)
	}
}

// claimLabels checks the claim's labels against its offering and its
// pool's labels and requirements.
func (pc *planCheck) claimLabels(c *scheduling.NodeClaimPlan, pool *scheduling.NodePool) {
	if c.Labels[corev1.LabelTopologyZone] != c.Zone || c.Labels["karpenter.sh/capacity-type"] != c.CapacityType ||
		c.Labels["karpenter.sh/nodepool"] != c.NodePool || c.Labels[corev1.LabelInstanceTypeStable] != c.InstanceType {
		pc.bad("claim %s: labels disagree with the chosen offering: %v", c.Name, c.Labels)
	}
	for k, v := range pool.Labels {
		if c.Labels[k] != v {
			pc.bad("claim %s: missing pool label %s", c.Name, k)
		}
	}
	for i := range pool.Requirements {
		r := pool.Requirements[i].NodeSelectorRequirement()
		if _, ok := c.Labels[r.Key]; !ok && (r.Operator == corev1.NodeSelectorOpNotIn || r.Operator == corev1.NodeSelectorOpDoesNotExist) {
			continue
		}
		if !matchExpr(r, c.Labels) {
			pc.bad("claim %s: labels violate pool requirement %v", c.Name, r)
		}
	}
}

// addDaemons puts on a new node the DaemonSet pods that will run there:
// those matching its labels and tolerating its taints and startup taints.
func (pc *planCheck) addDaemons(n *vnode, pool *scheduling.NodePool) {
	allTaints := append(append([]corev1.Taint(nil), pool.Taints...), pool.StartupTaints...)
	for _, ds := range pc.in.DaemonSets {
		dp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ds-" + ds.Name, Namespace: ds.Namespace}, Spec: ds.Spec.Template.Spec}
		ok := nodeAffinityOK(dp, n) == nil
		for _, tt := range allTaints {
			if blocks(tt) && !tolerated(dp, tt) {
				ok = false
			}
		}
		if ok {
			n.pods = append(n.pods, dp)
		}
	}
}

func blocks(t corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

// limits checks NodePool limits: existing capacity plus every launched
// type's.
func (pc *planCheck) limits() {
	for _, pool := range pc.in.NodePools {
		if len(pool.Limits) == 0 {
			continue
		}
		sum := corev1.ResourceList{}
		nodes := int64(0)
		for _, en := range pc.in.Nodes {
			if en.Labels["karpenter.sh/nodepool"] == pool.Name {
				nodes++
				if en.Capacity != nil {
					addResources(sum, en.Capacity)
				} else {
					addResources(sum, en.Allocatable)
				}
			}
		}
		planned := 0
		for _, c := range pc.plan.NodeClaims {
			if c.NodePool != pool.Name {
				continue
			}
			nodes++
			planned++
			for _, it := range pc.types(pool.Name) {
				if it.Name == c.InstanceType {
					addResources(sum, it.Capacity)
				}
			}
		}
		// Existing nodes alone may exceed a limit (it was lowered, or they
		// were counted late); the plan is wrong only if it adds to such a pool.
		for name, lim := range pool.Limits {
			if planned == 0 {
				break
			}
			if name == "nodes" {
				if nodes > lim.Value() {
					pc.bad("pool %s: %d nodes > limit %s", pool.Name, nodes, lim.String())
				}
				continue
			}
			if q := sum[name]; q.Cmp(lim) > 0 {
				pc.bad("pool %s: %s %s > limit %s", pool.Name, name, q.String(), lim.String())
			}
		}
	}
}

func addResources(sum, l corev1.ResourceList) {
	for name, q := range l {
		cur := sum[name]
		cur.Add(q)
		sum[name] = cur
	}
}

// accounting checks the plan's cost adds up, every unschedulable pod has a
// reason, and every pending pod appears exactly once.
func (pc *planCheck) accounting() {
	var cost float64
	for _, c := range pc.plan.NodeClaims {
		cost += c.PricePerHour
	}
	if d := cost - pc.plan.CostPerHour; d > 1e-6 || d < -1e-6 {
		pc.bad("costPerHour %v but claims sum to %v", pc.plan.CostPerHour, cost)
	}
	for _, u := range pc.plan.Unschedulable {
		pc.seen[u.Pod]++
		if u.Reason == "" {
			pc.bad("pod %s unschedulable without a reason", u.Pod)
		}
	}
	for k := range pc.pending {
		if pc.seen[k] != 1 {
			pc.bad("pod %s appears %d times in the plan", k, pc.seen[k])
		}
	}
}

// nodeErrors checks one node's resources and host ports, and its placed
// pods' node affinity, volume topology and tolerations.
func (pc *planCheck) nodeErrors(n *vnode) {
	sum := corev1.ResourceList{}
	for _, p := range n.pods {
		addResources(sum, podReq(p))
	}
	for name, q := range sum {
		if q.IsZero() {
			continue
		}
		a, ok := n.alloc[name]
		if !ok || q.Cmp(a) > 0 {
			pc.bad("node %s: %s requested %s > allocatable %s", n.name, name, q.String(), a.String())
		}
	}
	ports := map[string]string{}
	for _, p := range n.pods {
		for _, c := range p.Spec.Containers {
			for _, cp := range c.Ports {
				if cp.HostPort == 0 {
					continue
				}
				k := fmt.Sprintf("%s/%d", cp.Protocol, cp.HostPort)
				if o, dup := ports[k]; dup {
					pc.bad("node %s: host port %s used by %s and %s", n.name, k, o, p.Name)
				}
				ports[k] = p.Name
			}
		}
	}
	for _, p := range n.placed {
		if err := nodeAffinityOK(p, n); err != nil {
			pc.bad("pod %s on %s: %v", p.Name, n.name, err)
		}
		pc.volumeErrors(p, n)
		for _, tt := range n.taints {
			if blocks(tt) && !tolerated(p, tt) {
				pc.bad("pod %s on %s does not tolerate %v", p.Name, n.name, tt)
			}
		}
	}
}

// volumeErrors checks that n meets the node affinity of p's bound volumes.
func (pc *planCheck) volumeErrors(p *corev1.Pod, n *vnode) {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim == nil {
			continue
		}
		for _, pvc := range pc.in.PersistentVolumeClaims {
			if pvc.Namespace != p.Namespace || pvc.Name != v.PersistentVolumeClaim.ClaimName || pvc.Spec.VolumeName == "" {
				continue
			}
			for _, pv := range pc.in.PersistentVolumes {
				if pv.Name == pvc.Spec.VolumeName && !pvAffinityMet(pv, n) {
					pc.bad("pod %s on %s: volume %s's node affinity not met", p.Name, n.name, pv.Name)
				}
			}
		}
	}
}

// pvAffinityMet: some term of the PV's node affinity matches n (terms are
// ORed); a local or hostPath volume's hostname expressions are ignored, as
// Karpenter ignores them (volumetopology.go getPersistentVolumeRequirements).
func pvAffinityMet(pv *corev1.PersistentVolume, n *vnode) bool {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return true
	}
	local := pv.Spec.Local != nil || pv.Spec.HostPath != nil
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		if local {
			var kept []corev1.NodeSelectorRequirement
			for _, e := range term.MatchExpressions {
				if e.Key != corev1.LabelHostname {
					kept = append(kept, e)
				}
			}
			term = corev1.NodeSelectorTerm{MatchExpressions: kept}
		}
		if termMatches(term, n.labels, n.name) {
			return true
		}
	}
	return false
}

// podAffinityErrors checks required pod anti-affinity and affinity in the
// final state.
func (pc *planCheck) podAffinityErrors() {
	all := []*corev1.Pod{}
	for _, n := range pc.nodes {
		all = append(all, n.pods...)
	}
	for _, p := range all {
		a := p.Spec.Affinity
		if a != nil && a.PodAntiAffinity != nil {
			for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				pc.antiAffinityErrors(all, p, &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i])
			}
		}
		if _, isPending := pc.pending[p.Namespace+"/"+p.Name]; isPending && a != nil && a.PodAffinity != nil {
			for i := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				pc.affinityErrors(all, p, &a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i])
			}
		}
	}
}

func (pc *planCheck) antiAffinityErrors(all []*corev1.Pod, p *corev1.Pod, term *corev1.PodAffinityTerm) {
	d, ok := pc.podNode[p].labels[term.TopologyKey]
	if !ok {
		return
	}
	_, pPending := pc.pending[p.Namespace+"/"+p.Name]
	for _, q := range all {
		if _, qPending := pc.pending[q.Namespace+"/"+q.Name]; !pPending && !qPending {
			continue // the input's own state is not the plan's doing
		}
		if q != p && pc.podNode[q].labels[term.TopologyKey] == d && selects(term, p, q) {
			pc.bad("anti-affinity: %s and %s share %s=%s", p.Name, q.Name, term.TopologyKey, d)
		}
	}
}

func (pc *planCheck) affinityErrors(all []*corev1.Pod, p *corev1.Pod, term *corev1.PodAffinityTerm) {
	d, ok := pc.podNode[p].labels[term.TopologyKey]
	if !ok {
		pc.bad("affinity: %s on node without %s", p.Name, term.TopologyKey)
		return
	}
	sameDomain, elsewhere := false, false
	for _, q := range all {
		if q == p || !selects(term, p, q) {
			continue
		}
		if pc.podNode[q].labels[term.TopologyKey] == d {
			sameDomain = true
		} else {
			elsewhere = true
		}
	}
	if !sameDomain && (elsewhere || !selects(term, p, p)) {
		pc.bad("affinity: %s in %s=%s has no matching pod there", p.Name, term.TopologyKey, d)
	}
}

// spreadErrors checks DoNotSchedule spread constraints. For hostname keys a
// node may hold at most maxSkew owners (a new node is always an empty
// domain). For other keys the final skew is checked when every pod the
// selector matches owns the same constraint (otherwise only the order of
// placement, which a final state cannot show, decides validity).
func spreadErrors(in *scheduling.Input, nodes []*vnode, podNode map[*corev1.Pod]*vnode, pending map[string]*corev1.Pod) []string {
	var errs []string
	type gk struct{ key, ns, sel string }
	done := map[gk]bool{}
	var all []*corev1.Pod
	for _, n := range nodes {
		all = append(all, n.pods...)
	}
	universe := map[string]bool{}
	for _, pool := range in.NodePools {
		its, ok := in.InstanceTypes[pool.Name]
		if !ok {
			its = in.DefaultInstanceTypes
		}
		for _, it := range its {
			lbls := map[string]string{}
			for k, v := range it.Labels {
				lbls[k] = v
			}
			for _, o := range it.Offerings {
				if !o.Available || in.Unavailable[scheduling.OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}] {
					continue
				}
				lbls[corev1.LabelTopologyZone], lbls["karpenter.sh/capacity-type"] = o.Zone, o.CapacityType
				ok := true
				for i := range pool.Requirements {
					r := pool.Requirements[i].NodeSelectorRequirement()
					if _, has := lbls[r.Key]; has && !matchExpr(r, lbls) {
						ok = false
					}
				}
				if ok {
					universe[o.Zone] = true
				}
			}
		}
	}
	for _, n := range nodes {
		if !n.claim {
			if z, ok := n.labels[corev1.LabelTopologyZone]; ok {
				universe[z] = true
			}
		}
	}
	for _, p := range in.Pods {
		n := podNode[p]
		if n == nil {
			continue
		}
		for _, c := range p.Spec.TopologySpreadConstraints {
			if c.WhenUnsatisfiable != corev1.DoNotSchedule || c.LabelSelector == nil {
				continue
			}
			sel, _ := metav1.LabelSelectorAsSelector(c.LabelSelector)
			k := gk{c.TopologyKey, p.Namespace, sel.String() + fmt.Sprint(c.MaxSkew)}
			if done[k] {
				continue
			}
			done[k] = true
			owns := func(q *corev1.Pod) bool {
				for _, qc := range q.Spec.TopologySpreadConstraints {
					if qc.TopologyKey == c.TopologyKey && qc.MaxSkew == c.MaxSkew && qc.WhenUnsatisfiable == corev1.DoNotSchedule && qc.LabelSelector != nil {
						qs, _ := metav1.LabelSelectorAsSelector(qc.LabelSelector)
						if qs.String() == sel.String() {
							return true
						}
					}
				}
				return false
			}
			counts := map[string]int{}
			pure := true
			for _, q := range all {
				if q.Namespace != p.Namespace || !sel.Matches(labels.Set(q.Labels)) {
					continue
				}
				_, isPending := pending[q.Namespace+"/"+q.Name]
				if !owns(q) || !isPending {
					pure = false
					continue
				}
				if d, ok := podNode[q].labels[c.TopologyKey]; ok {
					counts[d]++
				}
			}
			if c.TopologyKey == corev1.LabelHostname {
				for d, v := range counts {
					if v > int(c.MaxSkew) {
						errs = append(errs, fmt.Sprintf("spread %s: node %s holds %d owners > maxSkew %d", sel, d, v, c.MaxSkew))
					}
				}
				continue
			}
			if !pure || c.TopologyKey != corev1.LabelTopologyZone {
				continue
			}
			minC, maxC := -1, 0
			for d := range universe {
				v := counts[d]
				if minC < 0 || v < minC {
					minC = v
				}
				maxC = max(maxC, v)
			}
			if maxC-minC > int(c.MaxSkew) {
				errs = append(errs, fmt.Sprintf("spread %s on %s: skew %d > %d (%v)", sel, c.TopologyKey, maxC-minC, c.MaxSkew, counts))
			}
		}
	}
	return errs
}
