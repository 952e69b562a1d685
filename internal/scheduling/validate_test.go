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

func planErrors(in *scheduling.Input, plan *scheduling.Plan) []string {
	var errs []string
	bad := func(f string, a ...any) { errs = append(errs, fmt.Sprintf(f, a...)) }
	pending := map[string]*corev1.Pod{}
	for _, p := range in.Pods {
		pending[p.Namespace+"/"+p.Name] = p
	}
	seen := map[string]int{}
	pools := map[string]*scheduling.NodePool{}
	for _, p := range in.NodePools {
		pools[p.Name] = p
	}
	var nodes []*vnode
	byName := map[string]*vnode{}
	for _, en := range in.Nodes {
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
		nodes = append(nodes, n)
		byName[n.name] = n
	}
	for _, np := range plan.ExistingNodes {
		n := byName[np.Name]
		if n == nil {
			bad("plan places pods on unknown node %s", np.Name)
			continue
		}
		for _, k := range np.Pods {
			seen[k]++
			if p := pending[k]; p != nil {
				n.pods = append(n.pods, p)
				n.placed = append(n.placed, p)
			}
		}
	}
	types := func(pool string) []*scheduling.InstanceType {
		if its, ok := in.InstanceTypes[pool]; ok {
			return its
		}
		return in.DefaultInstanceTypes
	}
	claimNames := map[string]bool{}
	var cost float64
	for _, c := range plan.NodeClaims {
		if claimNames[c.Name] {
			bad("claim name %s used twice", c.Name)
		}
		claimNames[c.Name] = true
		cost += c.PricePerHour
		pool := pools[c.NodePool]
		if pool == nil {
			bad("claim %s from unknown pool %s", c.Name, c.NodePool)
			continue
		}
		var it *scheduling.InstanceType
		for _, x := range types(c.NodePool) {
			if x.Name == c.InstanceType {
				it = x
			}
		}
		if it == nil {
			bad("claim %s: unknown instance type %s", c.Name, c.InstanceType)
			continue
		}
		if len(c.InstanceTypeOptions) == 0 || len(c.InstanceTypeOptions) > 60 || c.InstanceTypeOptions[0] != c.InstanceType {
			bad("claim %s: options %v must start with the chosen type and hold 1..60 types", c.Name, len(c.InstanceTypeOptions))
		}
		offered := false
		for _, o := range it.Offerings {
			if o.Zone == c.Zone && o.CapacityType == c.CapacityType && o.Available &&
				!in.Unavailable[scheduling.OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}] {
				offered = true
				if o.Price != c.PricePerHour {
					bad("claim %s: price %v but offering costs %v", c.Name, c.PricePerHour, o.Price)
				}
			}
		}
		if !offered {
			bad("claim %s: %s not offered (or unavailable) in %s/%s", c.Name, it.Name, c.Zone, c.CapacityType)
		}
		if c.Labels[corev1.LabelTopologyZone] != c.Zone || c.Labels["karpenter.sh/capacity-type"] != c.CapacityType ||
			c.Labels["karpenter.sh/nodepool"] != c.NodePool || c.Labels[corev1.LabelInstanceTypeStable] != c.InstanceType {
			bad("claim %s: labels disagree with the chosen offering: %v", c.Name, c.Labels)
		}
		for k, v := range pool.Labels {
			if c.Labels[k] != v {
				bad("claim %s: missing pool label %s", c.Name, k)
			}
		}
		for i := range pool.Requirements {
			r := pool.Requirements[i].NodeSelectorRequirement()
			if _, ok := c.Labels[r.Key]; !ok && (r.Operator == corev1.NodeSelectorOpNotIn || r.Operator == corev1.NodeSelectorOpDoesNotExist) {
				continue
			}
			if !matchExpr(r, c.Labels) {
				bad("claim %s: labels violate pool requirement %v", c.Name, r)
			}
		}
		n := &vnode{name: c.Name, labels: map[string]string{}, alloc: it.Allocatable, ports: map[string]bool{}, claim: true}
		for k, v := range c.Labels {
			n.labels[k] = v
		}
		n.labels[corev1.LabelHostname] = c.Name
		n.taints = pool.Taints
		allTaints := append(append([]corev1.Taint(nil), pool.Taints...), pool.StartupTaints...)
		for _, ds := range in.DaemonSets {
			dp := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "ds-" + ds.Name, Namespace: ds.Namespace}, Spec: ds.Spec.Template.Spec}
			ok := nodeAffinityOK(dp, n) == nil
			for _, tt := range allTaints {
				if (tt.Effect == corev1.TaintEffectNoSchedule || tt.Effect == corev1.TaintEffectNoExecute) && !tolerated(dp, tt) {
					ok = false
				}
			}
			if ok {
				n.pods = append(n.pods, dp)
			}
		}
		for _, k := range c.Pods {
			seen[k]++
			if p := pending[k]; p != nil {
				n.pods = append(n.pods, p)
				n.placed = append(n.placed, p)
			}
		}
		nodes = append(nodes, n)
		byName[n.name] = n
	}
	// NodePool limits: existing capacity plus every launched type's.
	for _, pool := range in.NodePools {
		if len(pool.Limits) == 0 {
			continue
		}
		sum := corev1.ResourceList{}
		nodes := int64(0)
		add := func(l corev1.ResourceList) {
			for name, q := range l {
				cur := sum[name]
				cur.Add(q)
				sum[name] = cur
			}
		}
		for _, en := range in.Nodes {
			if en.Labels["karpenter.sh/nodepool"] == pool.Name {
				nodes++
				if en.Capacity != nil {
					add(en.Capacity)
				} else {
					add(en.Allocatable)
				}
			}
		}
		planned := 0
		for _, c := range plan.NodeClaims {
			if c.NodePool != pool.Name {
				continue
			}
			nodes++
			planned++
			for _, it := range types(pool.Name) {
				if it.Name == c.InstanceType {
					add(it.Capacity)
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
					bad("pool %s: %d nodes > limit %s", pool.Name, nodes, lim.String())
				}
				continue
			}
			if q := sum[name]; q.Cmp(lim) > 0 {
				bad("pool %s: %s %s > limit %s", pool.Name, name, q.String(), lim.String())
			}
		}
	}
	if d := cost - plan.CostPerHour; d > 1e-6 || d < -1e-6 {
		bad("costPerHour %v but claims sum to %v", plan.CostPerHour, cost)
	}
	for _, u := range plan.Unschedulable {
		seen[u.Pod]++
		if u.Reason == "" {
			bad("pod %s unschedulable without a reason", u.Pod)
		}
	}
	for k := range pending {
		if seen[k] != 1 {
			bad("pod %s appears %d times in the plan", k, seen[k])
		}
	}
	podNode := map[*corev1.Pod]*vnode{}
	for _, n := range nodes {
		for _, p := range n.pods {
			podNode[p] = n
		}
	}
	for _, n := range nodes {
		// Resources.
		sum := corev1.ResourceList{}
		for _, p := range n.pods {
			for name, q := range podReq(p) {
				cur := sum[name]
				cur.Add(q)
				sum[name] = cur
			}
		}
		for name, q := range sum {
			if q.IsZero() {
				continue
			}
			a, ok := n.alloc[name]
			if !ok || q.Cmp(a) > 0 {
				bad("node %s: %s requested %s > allocatable %s", n.name, name, q.String(), a.String())
			}
		}
		// Host ports.
		ports := map[string]string{}
		for _, p := range n.pods {
			for _, c := range p.Spec.Containers {
				for _, cp := range c.Ports {
					if cp.HostPort == 0 {
						continue
					}
					k := fmt.Sprintf("%s/%d", cp.Protocol, cp.HostPort)
					if o, dup := ports[k]; dup {
						bad("node %s: host port %s used by %s and %s", n.name, k, o, p.Name)
					}
					ports[k] = p.Name
				}
			}
		}
		for _, p := range n.placed {
			if err := nodeAffinityOK(p, n); err != nil {
				bad("pod %s on %s: %v", p.Name, n.name, err)
			}
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim == nil {
					continue
				}
				for _, pvc := range in.PersistentVolumeClaims {
					if pvc.Namespace != p.Namespace || pvc.Name != v.PersistentVolumeClaim.ClaimName || pvc.Spec.VolumeName == "" {
						continue
					}
					for _, pv := range in.PersistentVolumes {
						if pv.Name == pvc.Spec.VolumeName && pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil &&
							!termMatches(pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0], n.labels, n.name) {
							bad("pod %s on %s: volume %s's node affinity not met", p.Name, n.name, pv.Name)
						}
					}
				}
			}
			for _, tt := range n.taints {
				if (tt.Effect == corev1.TaintEffectNoSchedule || tt.Effect == corev1.TaintEffectNoExecute) && !tolerated(p, tt) {
					bad("pod %s on %s does not tolerate %v", p.Name, n.name, tt)
				}
			}
		}
	}
	// Pod (anti-)affinity and spread, final state.
	all := []*corev1.Pod{}
	for _, n := range nodes {
		all = append(all, n.pods...)
	}
	for _, p := range all {
		n := podNode[p]
		a := p.Spec.Affinity
		if a != nil && a.PodAntiAffinity != nil {
			for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				term := &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
				d, ok := n.labels[term.TopologyKey]
				if !ok {
					continue
				}
				_, pPending := pending[p.Namespace+"/"+p.Name]
				for _, q := range all {
					if _, qPending := pending[q.Namespace+"/"+q.Name]; !pPending && !qPending {
						continue // the input's own state is not the plan's doing
					}
					if q != p && podNode[q].labels[term.TopologyKey] == d && selects(term, p, q) {
						bad("anti-affinity: %s and %s share %s=%s", p.Name, q.Name, term.TopologyKey, d)
					}
				}
			}
		}
		if _, isPending := pending[p.Namespace+"/"+p.Name]; isPending && a != nil && a.PodAffinity != nil {
			for i := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				term := &a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i]
				d, ok := n.labels[term.TopologyKey]
				if !ok {
					bad("affinity: %s on node without %s", p.Name, term.TopologyKey)
					continue
				}
				sameDomain, elsewhere := false, false
				for _, q := range all {
					if q == p || !selects(term, p, q) {
						continue
					}
					if podNode[q].labels[term.TopologyKey] == d {
						sameDomain = true
					} else {
						elsewhere = true
					}
				}
				if !sameDomain && (elsewhere || !selects(term, p, p)) {
					bad("affinity: %s in %s=%s has no matching pod there", p.Name, term.TopologyKey, d)
				}
			}
		}
	}
	errs = append(errs, spreadErrors(in, nodes, podNode, pending)...)
	sort.Strings(errs)
	return errs
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
