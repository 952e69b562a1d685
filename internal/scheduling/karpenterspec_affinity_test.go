package scheduling_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's "Pod Affinity/Anti-Affinity" and "Taints"
// (scheduling/topology_test.go).

func TestKarpenterSpecPodAffinity(t *testing.T) {
	runSpec(t, append(podAffinityCases(), podAntiAffinityCases()...))
}

func TestKarpenterSpecTaints(t *testing.T) { runSpec(t, taintCases()) }

var s2 = map[string]string{"security": "s2"}

func term(key string, sel map[string]string) corev1.PodAffinityTerm {
	return corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: sel}, TopologyKey: key}
}

func affinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func affinityTo(terms ...corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, terms...)
	}
}

func antiTo(terms ...corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, terms...)
	}
}

func preferTo(anti bool, weight int32, t corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a, w := affinity(p), corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t}
		if anti {
			if a.PodAntiAffinity == nil {
				a.PodAntiAffinity = &corev1.PodAntiAffinity{}
			}
			a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, w)
			return
		}
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, w)
	}
}

func inNamespace(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }

// nodeOfNS finds a pod of another namespace.
func (r *specRun) nodeOfNS(ns, pod string) (string, bool) {
	for i, c := range r.plan.NodeClaims {
		for _, p := range c.Pods {
			if p == ns+"/"+pod {
				return fmt.Sprintf("claim-%d", i), true
			}
		}
	}
	return "", false
}

// spreadTen is the ten hostname-spread pods Karpenter adds beside its
// affinity pods so that they are not alone.
func spreadTen() []*corev1.Pod {
	return spreading(10, "spread", []corev1.TopologySpreadConstraint{tsc(scheduling.LabelHostname, 1, corev1.DoNotSchedule)})
}

func podAffinityCases() []specCase {
	const f = "scheduling/topology_test.go:"
	host, zone, arch := scheduling.LabelHostname, scheduling.LabelZone, scheduling.LabelArch
	selfHost := []podOpt{podLabels("security", "s2"), affinityTo(term(host, s2))}
	archTSC := spreads(spreadC(host, 1, s2, corev1.DoNotSchedule))
	return []specCase{
		{name: "PodAffinity/EmptyAffinityAndAntiAffinity", src: f + "1926",
			pods: one("p", func(p *corev1.Pod) {
				p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{}, PodAntiAffinity: &corev1.PodAntiAffinity{}}
			}), check: sched("p")},
		{name: "PodAffinity/Hostname", src: f + "1936",
			pods:  append(spreadTen(), kpod("target", podLabels("security", "s2")), kpod("follower", affinityTo(term(host, s2)))),
			check: func(r *specRun) error { return r.sameNode("target", "follower") }},
		{name: "PodAffinity/Arch", src: f + "1970",
			pods: []*corev1.Pod{kpod("a", podLabels("security", "s2"), archTSC, requests("cpu", "2"), selector(arch, "arm64")),
				kpod("b", podLabels("security", "s2"), archTSC, requests("cpu", "1"), affinityTo(term(arch, s2)))},
			check: func(r *specRun) error { return errors.Join(r.distinctNodes("a", "b"), r.hasLabel("b", arch, "arm64")) }},
		{name: "PodAffinity/SelfHostname", src: f + "2013", pods: kpods(3, "p", selfHost...),
			check: func(r *specRun) error { return r.sameNode(names(r.in.Pods)...) }},
		// Karpenter's types hold 5 pods; t3a.small holds 8.
		{name: "PodAffinity/SelfHostnameFirstEmptyDomainOnly", src: f + "2037", pools: typePool("t3a.small"), pods: kpods(10, "p", selfHost...),
			check: func(r *specRun) error {
				if err := r.claims(1); err != nil || len(r.plan.Unschedulable) != 2 {
					return fmt.Errorf("want 8 pods on one node and 2 unschedulable")
				}
				return nil
			}},
		{name: "PodAffinity/SelfHostnameFullNodeSecondBatch", src: f + "2037", pools: typePool("t3a.small"), pods: kpods(10, "second", selfHost...),
			edit: func(t *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{claimNode(t, in, "full", "t3a.small", zone1, kpods(8, "first", selfHost...)...)}
			}, check: func(r *specRun) error { return r.notScheduled(names(r.in.Pods)...) }},
		{name: "PodAffinity/SelfHostnameConstrainedZones", src: f + "2079",
			pods: kpods(10, "p", append(selfHost, required(expr(zone, in, zone2, zone3)))...),
			edit: func(t *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{claimNode(t, in, "z1", "c6g.2xlarge", zone1, kpod("first", selfHost...))}
			}, check: func(r *specRun) error { return r.notScheduled(names(r.in.Pods)...) }},
		{name: "PodAffinity/SelfZone", src: f + "2123", pods: kpods(3, "p", podLabels("security", "s2"), affinityTo(term(zone, s2))),
			check: func(r *specRun) error { return r.sameNode(names(r.in.Pods)...) }},
		{name: "PodAffinity/SelfZoneWithConstraint", src: f + "2147",
			pods:  kpods(3, "p", podLabels("security", "s2"), affinityTo(term(zone, s2)), required(expr(zone, in, zone3))),
			check: func(r *specRun) error { return errors.Join(r.sameNode(names(r.in.Pods)...), zoneIs("p-0", zone3)(r)) }},
		{name: "PodAffinity/IncompatibleSelectorsTwoNodes", src: f + "2178", noPlanCheck: "the plan checker does not let a pod satisfy its own affinity",
			pods: []*corev1.Pod{kpod("a", podLabels("security", "s1"), affinityTo(term(zone, map[string]string{"security": "s1"})), required(expr(zone, in, zone2))),
				kpod("b", podLabels("security", "s1"), affinityTo(term(zone, map[string]string{"security": "s1"})), required(expr(zone, in, zone3)))},
			check: func(r *specRun) error {
				return errors.Join(r.distinctNodes("a", "b"), zoneIs("a", zone2)(r), zoneIs("b", zone3)(r))
			}},
		{name: "PodAffinity/PreferredViolated", src: f + "2231", pods: append(spreadTen(), kpod("p", preferTo(false, 50, term(host, s2)))),
			check: sched("p")},
		{name: "PodAffinity/PreferenceConflictsWithRequired", src: f + "2630",
			pods:  append(spreading(3, "p", []corev1.TopologySpreadConstraint{tsc(host, 1, corev1.DoNotSchedule)}, preferTo(false, 50, term(host, s2))), kpod("target", podLabels("security", "s2"))),
			check: func(r *specRun) error { return errors.Join(r.scheduled("target"), skewIs(host, 1, 1, 1)(r)) }},
		{name: "PodAffinity/NonExistentTarget", src: f + "2710", pods: kpods(10, "p", affinityTo(term(zone, s2))),
			check: func(r *specRun) error { return r.notScheduled(names(r.in.Pods)...) }},
		// The target's zone is open until its node exists: the followers
		// wait for the next batch, then all join it.
		{name: "PodAffinity/ZoneUnconstrainedTarget", src: f + "2727",
			pods: append(kpods(10, "p", affinityTo(term(zone, s2))), kpod("target", podLabels("security", "s2"))),
			check: func(r *specRun) error {
				return errors.Join(r.scheduled("target"), r.notScheduled(names(r.in.Pods[:10])...))
			}},
		{name: "PodAffinity/ZoneUnconstrainedTargetSecondBatch", src: f + "2727", pods: kpods(10, "p", affinityTo(term(zone, s2))),
			edit: func(t *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{claimNode(t, in, "n", "t4g.small", zone2, kpod("target", podLabels("security", "s2")))}
			}, check: func(r *specRun) error {
				return errors.Join(r.scheduled(names(r.in.Pods)...), wantSkewAll(r, zone, map[string]string{}, 11))
			}},
		{name: "PodAffinity/ZoneConstrainedTarget", src: f + "2760",
			pods: append(kpods(10, "p", affinityTo(term(zone, s2))), kpod("target", podLabels("security", "s2"), required(expr(zone, in, zone1)))),
			check: func(r *specRun) error {
				return errors.Join(r.scheduled(names(r.in.Pods)...), wantSkewAll(r, zone, map[string]string{}, 11), zoneIs("p-0", zone1)(r))
			}},
		{name: "PodAffinity/MultipleDependentAffinities", src: f + "2789", pods: dependentPods(),
			check: func(r *specRun) error { return r.scheduled("db", "web", "cache", "ui") }},
		{name: "PodAffinity/UnsatisfiableDependencies", src: f + "2824",
			pods: one("db", podLabels("type", "db", "spread", "spread"), affinityTo(term(host, map[string]string{"type": "web"}))), check: unsched("db")},
		{name: "PodAffinity/NamespaceNoMatch", src: f + "2840",
			pods: append(spreadTen(), kpod("target", podLabels("security", "s2"), inNamespace("other-ns-no-match")), kpod("follower", affinityTo(term(host, s2)))),
			check: func(r *specRun) error {
				if _, ok := r.nodeOfNS("other-ns-no-match", "target"); !ok {
					return fmt.Errorf("target not scheduled")
				}
				return r.notScheduled("follower")
			}},
		{name: "PodAffinity/NamespaceList", src: f + "2878", pods: nsAffinityPods("other-ns-list", func(t *corev1.PodAffinityTerm) { t.Namespaces = []string{"other-ns-list"} }),
			check: sameNodeAcrossNS("other-ns-list")},
		{name: "PodAffinity/EmptyNamespaceSelector", src: f + "2917",
			pods:  nsAffinityPods("empty-ns-selector", func(t *corev1.PodAffinityTerm) { t.NamespaceSelector = &metav1.LabelSelector{} }),
			check: sameNodeAcrossNS("empty-ns-selector")},
	}
}

func nsAffinityPods(ns string, edit func(*corev1.PodAffinityTerm)) []*corev1.Pod {
	t := term(scheduling.LabelHostname, s2)
	edit(&t)
	return append(spreadTen(), kpod("target", podLabels("security", "s2"), inNamespace(ns)), kpod("follower", affinityTo(t)))
}

func sameNodeAcrossNS(ns string) func(r *specRun) error {
	return func(r *specRun) error {
		a, ok := r.nodeOfNS(ns, "target")
		b, ok2 := r.nodeOf("follower")
		if !ok || !ok2 || a != b.name {
			return fmt.Errorf("target on %q, follower on %v: want one node", a, b)
		}
		return nil
	}
}

// dependentPods: web follows db, cache follows web, ui follows both onto
// one host.
func dependentPods() []*corev1.Pod {
	l := func(t string) map[string]string { return map[string]string{"type": t} }
	host := scheduling.LabelHostname
	return []*corev1.Pod{
		kpod("db", podLabels("type", "db", "spread", "spread")),
		kpod("web", podLabels("type", "web", "spread", "spread"), affinityTo(term(host, l("db")))),
		kpod("cache", podLabels("type", "cache", "spread", "spread"), affinityTo(term(host, l("web")))),
		kpod("ui", podLabels("type", "ui", "spread", "spread"), affinityTo(term(host, l("db")), term(host, l("cache")))),
	}
}

func podAntiAffinityCases() []specCase {
	const f = "scheduling/topology_test.go:"
	host, zone, arch := scheduling.LabelHostname, scheduling.LabelZone, scheduling.LabelArch
	big := requests("cpu", "2")
	perZone := func(opt podOpt) []*corev1.Pod {
		return []*corev1.Pod{kpod("z1", big, opt, selector(zone, zone1)), kpod("z2", big, opt, selector(zone, zone2)), kpod("z3", big, opt, selector(zone, zone3))}
	}
	zoneNodes := func(opt podOpt) func(t *testing.T, in *scheduling.Input) {
		return func(t *testing.T, in *scheduling.Input) {
			for i, z := range specZones {
				in.Nodes = append(in.Nodes, claimNode(t, in, fmt.Sprintf("n%d", i), "c6g.xlarge", z, kpod(fmt.Sprintf("z%d", i), big, opt)))
			}
		}
	}
	archTSC := spreads(spreadC(host, 1, s2, corev1.DoNotSchedule))
	return []specCase{
		{name: "PodAntiAffinity/PreferredViolated", src: f + "2264",
			pods:  append(spreading(3, "spread", zoneTSC(1)), kpods(10, "anti", preferTo(true, 50, term(zone, testLabels)))...),
			check: func(r *specRun) error { return r.scheduled(names(r.in.Pods)...) }},
		{name: "PodAntiAffinity/SimpleHostname", src: f + "2297",
			pods:  []*corev1.Pod{kpod("avoider", antiTo(term(host, s2))), kpod("target", podLabels("security", "s2"))},
			check: func(r *specRun) error { return r.distinctNodes("avoider", "target") }},
		{name: "PodAntiAffinity/Zone", src: f + "2319", pods: append(perZone(podLabels("security", "s2")), kpod("anti", antiTo(term(zone, s2)))),
			check: func(r *specRun) error { return errors.Join(r.scheduled("z1", "z2", "z3"), r.notScheduled("anti")) }},
		{name: "PodAntiAffinity/ArchDifferent", src: f + "2380",
			pods: []*corev1.Pod{kpod("a", podLabels("security", "s2"), archTSC, big, selector(arch, "arm64")),
				kpod("b", podLabels("security", "s2"), archTSC, requests("cpu", "1"), antiTo(term(arch, s2)))},
			check: func(r *specRun) error { return errors.Join(r.scheduled("a"), r.hasLabel("b", arch, "amd64")) }},
		{name: "PodAntiAffinity/PreferredZoneInverse", src: f + "2423",
			pods:  append(perZone(preferTo(true, 10, term(zone, s2))), kpod("target", podLabels("security", "s2"))),
			check: sched("z1", "z2", "z3", "target")},
		{name: "PodAntiAffinity/ZoneInverse", src: f + "2463", pods: append(perZone(antiTo(term(zone, s2))), kpod("target", podLabels("security", "s2"))),
			check: func(r *specRun) error { return errors.Join(r.scheduled("z1", "z2", "z3"), r.notScheduled("target")) }},
		{name: "PodAntiAffinity/ZoneInverseExistingNodes", src: f + "2530", pods: one("target", podLabels("security", "s2")),
			edit: zoneNodes(antiTo(term(zone, s2))), check: unsched("target")},
		{name: "PodAntiAffinity/PreferredZoneInverseExistingNodes", src: f + "2580", pods: one("target", podLabels("security", "s2")),
			edit: zoneNodes(preferTo(true, 10, term(zone, s2))), check: sched("target")},
		// The first pod's zone is open until its node exists, so the
		// target waits for the next batch and then avoids that zone.
		{name: "PodAntiAffinity/ZoneSchrodinger", src: f + "2499",
			pods:  []*corev1.Pod{kpod("anywhere", big, antiTo(term(zone, s2))), kpod("target", podLabels("security", "s2"))},
			check: func(r *specRun) error { return errors.Join(r.scheduled("anywhere"), r.notScheduled("target")) }},
		{name: "PodAntiAffinity/ZoneSchrodingerSecondBatch", src: f + "2499", pods: one("target", podLabels("security", "s2")),
			edit: func(t *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{claimNode(t, in, "n", "c6g.xlarge", zone1, kpod("anywhere", big, antiTo(term(zone, s2))))}
			}, check: func(r *specRun) error { return r.lacksLabel("target", zone, zone1) }},
		{name: "PodAntiAffinity/ZoneTopologyOnePerZone", src: f + "2665",
			pods: kpods(6, "p", podLabels("security", "s2"), antiTo(term(zone, s2))),
			check: func(r *specRun) error {
				return errors.Join(wantSkewAll(r, zone, s2, 1, 1, 1), claimsPinZone(r))
			}},
	}
}

// claimsPinZone: every claim requires exactly its zone, so the launch
// cannot land elsewhere.
func claimsPinZone(r *specRun) error {
	for _, c := range r.plan.NodeClaims {
		if z := claimRequires(c, scheduling.LabelZone); len(z) != 1 || z[0] != c.Zone {
			return fmt.Errorf("claim %s requires zones %v, want only %s", c.InstanceType, z, c.Zone)
		}
	}
	return nil
}

func taintCases() []specCase {
	const f = "scheduling/topology_test.go:"
	tainted := func(ts ...corev1.Taint) []*scheduling.NodePool {
		p := specPoolOnly("default", req(scheduling.LabelCapacityType, exists))
		p.Taints = ts
		return []*scheduling.NodePool{p}
	}
	tk := taint("test-key", "test-value", corev1.TaintEffectNoSchedule)
	ns := corev1.TaintEffectNoSchedule
	return []specCase{
		{name: "Taints/PoolTaintsOnNode", src: f + "2981", pools: tainted(taint("test", "bar", ns)),
			pods: one("p", tolerates(corev1.Toleration{Effect: ns, Operator: corev1.TolerationOpExists})),
			check: func(r *specRun) error {
				n, ok := r.nodeOf("p")
				if !ok || len(n.claim.Taints) != 1 || n.claim.Taints[0].Key != "test" {
					return fmt.Errorf("claim taints %v, want test=bar:NoSchedule", n)
				}
				return nil
			}},
		{name: "Taints/TolerantPodsSchedule", src: f + "2991", pools: tainted(tk),
			pods: []*corev1.Pod{kpod("exists", tolerates(corev1.Toleration{Key: "test-key", Operator: corev1.TolerationOpExists, Effect: ns})),
				kpod("equal", tolerates(corev1.Toleration{Key: "test-key", Value: "test-value", Operator: corev1.TolerationOpEqual, Effect: ns}))},
			check: sched("exists", "equal")},
		{name: "Taints/IntolerantPodsDoNot", src: f + "2991", pools: tainted(tk),
			pods: []*corev1.Pod{kpod("none"), kpod("other", tolerates(corev1.Toleration{Key: "invalid", Operator: corev1.TolerationOpExists})),
				kpod("wrong-value", tolerates(corev1.Toleration{Key: "test-key", Operator: corev1.TolerationOpEqual, Effect: ns}))},
			check: unsched("none", "other", "wrong-value")},
		{name: "Taints/StartupTaintOnly", src: f + "3018", pools: func() []*scheduling.NodePool {
			p := tainted()
			p[0].StartupTaints = []corev1.Taint{taint("ignore-me", "nothing-to-see-here", ns)}
			return p
		}(), pods: one("p"), check: sched("p")},
		{name: "Taints/NoTaintsFromTolerations", src: f + "3026",
			pods: one("p", tolerates(corev1.Toleration{Key: "test-key", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
			check: func(r *specRun) error {
				if n, ok := r.nodeOf("p"); !ok || len(n.claim.Taints) != 0 {
					return fmt.Errorf("claim %v, want no taints", n)
				}
				return nil
			}},
	}
}
