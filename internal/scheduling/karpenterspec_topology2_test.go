package scheduling_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's topology spread policies and combined constraints
// (scheduling/topology_test.go, MatchLabelKeys to "Combined Capacity
// Type Topology and Node Affinity"). Multi-round cases are ported as the
// final round, or with the earlier rounds' pods on existing nodes.

func TestKarpenterSpecTopologyPolicies(t *testing.T) {
	runSpec(t, append(spreadPolicyCases(), combinedSpreadCases()...))
}

const fakeLabel = "fake-label"

func policyTSC(key string, taints, affinity *corev1.NodeInclusionPolicy) []corev1.TopologySpreadConstraint {
	c := tsc(key, 1, corev1.DoNotSchedule)
	c.NodeTaintsPolicy, c.NodeAffinityPolicy = taints, affinity
	return []corev1.TopologySpreadConstraint{c}
}

func policy(p corev1.NodeInclusionPolicy) *corev1.NodeInclusionPolicy { return &p }

// labelledNodes are Karpenter's two small unowned nodes with values foo
// and bar of fake-label (and the extra labels and taints given).
func labelledNodes(taints []corev1.Taint, kv ...string) func(t *testing.T, in *scheduling.Input) {
	return func(_ *testing.T, in *scheduling.Input) {
		for _, v := range []string{"foo", "bar"} {
			n := unowned("node-"+v, "cpu", "100m", "pods", "10")
			n.Labels[fakeLabel], n.Taints = v, taints
			for i := 0; i+1 < len(kv); i += 2 {
				n.Labels[kv[i]] = kv[i+1]
			}
			in.Nodes = append(in.Nodes, n)
		}
	}
}

func spreadPolicyCases() []specCase {
	const f = "scheduling/topology_test.go:"
	tainted := []corev1.Taint{taint("taintname", "taintvalue", corev1.TaintEffectNoSchedule)}
	bazPool := func(kv ...string) []*scheduling.NodePool {
		return []*scheduling.NodePool{withLabels(specPool("default"), append([]string{fakeLabel, "baz"}, kv...)...)}
	}
	discovered := func() []*scheduling.NodePool {
		p2 := specPoolOnly("tainted", req(scheduling.LabelCapacityType, exists), req(fakeLabel, in, "bar"))
		p2.Taints = []corev1.Taint{taint("taint-key", "taint-value", corev1.TaintEffectNoSchedule)}
		return []*scheduling.NodePool{specPool("default", req(fakeLabel, in, "foo")), p2}
	}
	exclusive := func() []*scheduling.NodePool {
		var out []*scheduling.NodePool
		for i, ds := range [][]string{{"foo", "bar"}, {"foo", "baz"}} {
			p := specPoolOnly(fmt.Sprintf("np-%d", i), req(scheduling.LabelCapacityType, exists), req(fakeLabel, in, ds...))
			p.Taints = []corev1.Taint{taint("taint-key", fmt.Sprintf("nodepool-%d", i), corev1.TaintEffectNoSchedule)}
			out = append(out, p)
		}
		return out
	}
	tolerating := func(n int, i int) []*corev1.Pod {
		tol := corev1.Toleration{Key: "taint-key", Value: fmt.Sprintf("nodepool-%d", i), Effect: corev1.TaintEffectNoSchedule}
		return spreading(n, fmt.Sprintf("np%d", i), policyTSC(fakeLabel, policy(corev1.NodeInclusionPolicyHonor), nil), tolerates(tol))
	}
	mlk := func() []corev1.TopologySpreadConstraint {
		c := tsc(scheduling.LabelHostname, 1, corev1.DoNotSchedule)
		c.MatchLabelKeys = []string{"test-label"}
		return []corev1.TopologySpreadConstraint{c}
	}
	return []specCase{
		{name: "Topology/MatchLabelKeys/Supported", src: f + "1139", noPlanCheck: "the plan checker ignores matchLabelKeys",
			pods:  append(spreading(2, "a", mlk(), podLabels("test-label", "value-a")), spreading(2, "b", mlk(), podLabels("test-label", "value-b"))...),
			check: skewIs(scheduling.LabelHostname, 2, 2)},
		{name: "Topology/MatchLabelKeys/UnknownLabelIgnored", src: f + "1168", pods: spreading(4, "p", mlk()),
			check: skewIs(scheduling.LabelHostname, 1, 1, 1, 1)},
		{name: "Topology/NodeTaintsPolicy/Ignore", src: f + "1196", pools: bazPool(),
			pods: spreading(5, "p", policyTSC(fakeLabel, policy(corev1.NodeInclusionPolicyIgnore), nil), requests("cpu", "1")),
			edit: labelledNodes(tainted), check: skewIs(fakeLabel, 1)},
		{name: "Topology/NodeTaintsPolicy/Honor", src: f + "1267", pools: bazPool(),
			pods: spreading(5, "p", policyTSC(fakeLabel, policy(corev1.NodeInclusionPolicyHonor), nil), requests("cpu", "1")),
			edit: labelledNodes(tainted), check: skewIs(fakeLabel, 5)},
		{name: "Topology/NodeTaintsPolicy/IgnoreDiscoveredFromPool", src: f + "1336", pools: discovered(),
			pods: spreading(2, "p", policyTSC(fakeLabel, policy(corev1.NodeInclusionPolicyIgnore), nil)), check: skewIs(fakeLabel, 1)},
		{name: "Topology/NodeTaintsPolicy/HonorDiscoveredFromPool", src: f + "1392", pools: discovered(),
			pods: spreading(2, "p", policyTSC(fakeLabel, policy(corev1.NodeInclusionPolicyHonor), nil)), check: skewIs(fakeLabel, 2)},
		{name: "Topology/NodeTaintsPolicy/HonorExclusivePoolsShareDomains", src: f + "1448", pools: exclusive(),
			pods: append(tolerating(2, 0), tolerating(4, 1)...), check: skewIs(fakeLabel, 3, 2, 1)},
		{name: "Topology/NodeAffinityPolicy/Ignore", src: f + "1529", pools: bazPool("selector", "value"),
			pods: spreading(5, "p", policyTSC(fakeLabel, nil, policy(corev1.NodeInclusionPolicyIgnore)), selector("selector", "value"), requests("cpu", "1")),
			edit: labelledNodes(nil, "selector", "mismatch"), check: skewIs(fakeLabel, 1)},
		{name: "Topology/NodeAffinityPolicy/Honor", src: f + "1596", pools: bazPool("selector", "value"),
			pods: spreading(5, "p", policyTSC(fakeLabel, nil, policy(corev1.NodeInclusionPolicyHonor)), selector("selector", "value"), requests("cpu", "1")),
			edit: labelledNodes(nil, "selector", "mismatch"), check: skewIs(fakeLabel, 5)},
	}
}

// maxSkewAtMost: per constraint, the largest difference between domains
// of the key (over domains with pods) is at most the bound.
func maxSkewAtMost(bounds map[string]int) func(r *specRun) error {
	return func(r *specRun) error {
		var errs []error
		for key, bound := range bounds {
			counts := map[string]int{}
			for _, p := range r.in.Pods {
				if n, ok := r.nodeOf(p.Name); ok {
					d := n.labels[key]
					if key == scheduling.LabelHostname {
						d = n.name
					}
					counts[d]++
				}
			}
			lo, hi := -1, 0
			for _, c := range counts {
				if lo < 0 || c < lo {
					lo = c
				}
				hi = max(hi, c)
			}
			if key == scheduling.LabelHostname {
				lo = 0 // a new node could always be the empty domain
			}
			if hi-lo > bound {
				errs = append(errs, fmt.Errorf("%s skew %d > %d (%v)", shortLabel(key), hi-lo, bound, counts))
			}
		}
		return errors.Join(append(errs, r.scheduled(names(r.in.Pods)...))...)
	}
}

// affinityDomains: the plan checker counts, for a pod whose node
// affinity excludes a zone, that zone as a domain (nodeAffinityPolicy
// Honor, the default, leaves it out).
const affinityDomains = "the plan checker counts zones the pod's node affinity excludes"

// roomy gives an earlier round's node room for its several pods.
func roomy(n *scheduling.ExistingNode) *scheduling.ExistingNode {
	n.Allocatable = rl("cpu", "4", "memory", "4Gi", "pods", "10")
	return n
}

func combinedSpreadCases() []specCase {
	const f = "scheduling/topology_test.go:"
	zone, host, ct := scheduling.LabelZone, scheduling.LabelHostname, scheduling.LabelCapacityType
	both := func(a, b corev1.TopologySpreadConstraint) []corev1.TopologySpreadConstraint {
		return []corev1.TopologySpreadConstraint{a, b}
	}
	ds := corev1.DoNotSchedule
	z := func(zone string) map[string]string { return map[string]string{scheduling.LabelZone: zone} }
	ctAnyway := []corev1.TopologySpreadConstraint{tsc(ct, 1, corev1.ScheduleAnyway)}
	return []specCase{
		// The last of Karpenter's four rounds (21 pods in all).
		{name: "Topology/Combined/HostnameAndZonal", src: f + "941", pods: spreading(21, "p", both(tsc(zone, 1, ds), tsc(host, 3, ds))),
			check: func(r *specRun) error {
				return errors.Join(skewIs(zone, 7, 7, 7)(r), maxSkewAtMost(map[string]int{host: 3})(r))
			}},
		{name: "Topology/Combined/AcrossPoolRequirements", src: f + "981",
			pools: []*scheduling.NodePool{specPoolOnly("spot", req(ct, in, "spot"), req("capacity.spread.4-1", in, "2", "3", "4", "5")),
				specPoolOnly("on-demand", req(ct, in, "on-demand"), req("capacity.spread.4-1", in, "1"))},
			pods: spreading(20, "p", []corev1.TopologySpreadConstraint{tsc("capacity.spread.4-1", 1, ds)}),
			check: func(r *specRun) error {
				return errors.Join(skewIs("capacity.spread.4-1", 4, 4, 4, 4, 4)(r), skewIs(ct, 4, 16)(r))
			}},
		{name: "Topology/Combined/ZonalAndHostnameScheduleAnyway", src: f + "1049",
			pools: []*scheduling.NodePool{specPool("default", req(zone, in, zone1, zone2)), func() *scheduling.NodePool {
				p := specPoolOnly("disabled", req(zone, in, zone3))
				p.Limits = rl("cpu", "0")
				return p
			}()},
			// zone 3 is a domain (of the disabled pool) no pod can reach, so
			// each other zone takes one pod, on its own node.
			pods: spreading(10, "p", both(tsc(zone, 1, ds), tsc(host, 1, corev1.ScheduleAnyway))),
			check: func(r *specRun) error {
				return errors.Join(skewIs(zone, 1, 1)(r), skewIs(host, 1, 1)(r))
			}},
		{name: "Topology/Combined/CapacityTypeAndHostname", src: f + "1090", pods: spreading(21, "p", both(tsc(ct, 1, ds), tsc(host, 3, ds))),
			check: func(r *specRun) error {
				return errors.Join(skewIs(ct, 11, 10)(r), maxSkewAtMost(map[string]int{host: 3})(r))
			}},
		{name: "Topology/Combined/ZonalAndCapacityType", src: f + "1662", pods: spreading(19, "p", both(tsc(ct, 1, ds), tsc(zone, 1, ds))),
			check: maxSkewAtMost(map[string]int{ct: 1, zone: 1})},
		{name: "Topology/Combined/HostnameZonalAndCapacityType", src: f + "1702",
			pods:  spreading(30, "p", []corev1.TopologySpreadConstraint{tsc(ct, 1, ds), tsc(zone, 2, ds), tsc(host, 3, ds)}),
			check: maxSkewAtMost(map[string]int{ct: 1, zone: 2, host: 3})},
		{name: "Topology/ZonalAndNodeAffinity/NodeSelector", src: f + "1740", noPlanCheck: affinityDomains,
			pods:  append(spreading(5, "a", zoneTSC(1), selector(zone, zone1)), spreading(10, "b", zoneTSC(1), selector(zone, zone2))...),
			check: skewIs(zone, 5, 10)},
		{name: "Topology/ZonalAndNodeAffinity/NodeRequirements", src: f + "1766", noPlanCheck: affinityDomains,
			pods: spreading(10, "p", zoneTSC(1), required(expr(zone, in, zone1, zone2))), check: skewIs(zone, 5, 5)},
		// Karpenter's second round: 3 + 3 pods already in zones 1 and 2.
		{name: "Topology/ZonalAndNodeAffinity/RequiredAffinity", src: f + "1788",
			pods:  spreading(1, "p", zoneTSC(1), required(expr(zone, in, zone2, zone3))),
			edit:  withNodes(roomy(roundNode("a", z(zone1), bound("a1"), bound("a2"), bound("a3"))), roomy(roundNode("b", z(zone2), bound("b1"), bound("b2"), bound("b3")))),
			check: skewIs(zone, 3, 3, 1)},
		{name: "Topology/ZonalAndNodeAffinity/PreferredAffinityDoesNotLimit", src: f + "1832",
			pods: spreading(6, "p", zoneTSC(1), preferred(1, expr(zone, in, zone1, zone2))), check: skewIs(zone, 2, 2, 2)},
		{name: "Topology/CapacityTypeAndNodeAffinity/NodeSelector", src: f + "1857",
			pods:  append(spreading(5, "s", ctAnyway, selector(ct, "spot")), spreading(5, "o", ctAnyway, selector(ct, "on-demand"))...),
			check: skewIs(ct, 5, 5)},
		// Karpenter's last round: 3 spot and 1 on-demand pod there already.
		{name: "Topology/CapacityTypeAndNodeAffinity/NodeAffinity", src: f + "1881",
			pods: spreading(5, "p", []corev1.TopologySpreadConstraint{tsc(ct, 1, ds)}),
			edit: withNodes(roomy(roundNode("s", map[string]string{ct: "spot"}, bound("s1"), bound("s2"), bound("s3"))),
				roomy(roundNode("o", map[string]string{ct: "on-demand"}, bound("o1")))),
			check: skewIs(ct, 5, 4)},
	}
}
