package scheduling_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's "Topology" (scheduling/topology_test.go): zonal, hostname
// and capacity-type spread, minDomains, combined constraints. Karpenter
// runs several provisioning rounds; a round's result is given here as
// the nodes already there (bound pods of 1.1 cpu filling 1.5-cpu nodes,
// as Karpenter's requests fill its small nodes). Karpenter's
// ExpectSkew counts every matching pod per domain: wantSkewAll.

func TestKarpenterSpecTopologySpread(t *testing.T) {
	runSpec(t, append(zonalSpreadCases(), hostnameAndCapacityTypeCases()...))
}

var testLabels = map[string]string{"test": "test"}

func tsc(key string, skew int32, how corev1.UnsatisfiableConstraintAction) corev1.TopologySpreadConstraint {
	return spreadC(key, skew, testLabels, how)
}

// spreading pods carry the test label and the constraints.
func spreading(n int, name string, cs []corev1.TopologySpreadConstraint, opts ...podOpt) []*corev1.Pod {
	return kpods(n, name, append([]podOpt{podLabels("test", "test"), spreads(cs...)}, opts...)...)
}

func zoneTSC(skew int32) []corev1.TopologySpreadConstraint {
	return []corev1.TopologySpreadConstraint{tsc(scheduling.LabelZone, skew, corev1.DoNotSchedule)}
}

// roundNode is a node an earlier round launched: full after one 1.1-cpu
// pod, with the given labels (zone, capacity type, ...).
func roundNode(name string, labels map[string]string, ps ...*corev1.Pod) *scheduling.ExistingNode {
	l := map[string]string{scheduling.LabelNodePool: "default", scheduling.LabelHostname: name, scheduling.LabelArch: "amd64",
		scheduling.LabelOS: "linux", scheduling.LabelCapacityType: "on-demand"}
	for k, v := range labels {
		l[k] = v
	}
	for _, p := range ps {
		p.Spec.NodeName = name
	}
	return &scheduling.ExistingNode{Name: name, Initialized: true, Labels: l, Allocatable: rl("cpu", "1.5", "memory", "4Gi", "pods", "10"), Pods: ps}
}

func bound(name string, opts ...podOpt) *corev1.Pod {
	return kpod(name, append([]podOpt{podLabels("test", "test"), requests("cpu", "1.1")}, opts...)...)
}

func withNodes(ns ...*scheduling.ExistingNode) func(t *testing.T, in *scheduling.Input) {
	return func(_ *testing.T, in *scheduling.Input) { in.Nodes = ns }
}

func skewIs(key string, want ...int) func(r *specRun) error {
	return func(r *specRun) error { return wantSkewAll(r, key, testLabels, want...) }
}

func zonePool(zs ...string) []*scheduling.NodePool {
	return []*scheduling.NodePool{specPool("default", req(scheduling.LabelZone, in, zs...))}
}

// labelZoneDomains is why a case skips the plan checker: it takes a
// spread's domains from the types' offerings, not from a pool label that
// pins the zone, so it sees zones no pool can launch in.
const labelZoneDomains = "the plan checker counts zones a pool's zone label excludes"

func zonalSpreadCases() []specCase {
	const f = "scheduling/topology_test.go:"
	rr := requests("cpu", "1.1")
	z := func(zone string) map[string]string { return map[string]string{scheduling.LabelZone: zone} }
	exprSel := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: scheduling.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "test", Operator: metav1.LabelSelectorOpIn, Values: []string{"test"}}}}}
	nilSel := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: scheduling.LabelZone, WhenUnsatisfiable: corev1.DoNotSchedule}}
	min := func(n int32) []corev1.TopologySpreadConstraint {
		c := zoneTSC(1)
		c[0].MinDomains = &n
		return c
	}
	labelled := withLabels(specPool("default"), scheduling.LabelZone, zone1)
	return []specCase{
		{name: "Topology/UnknownTopologyKey", src: f + "58",
			pods:  []*corev1.Pod{kpod("spread", podLabels("test", "test"), spreads(tsc("unknown", 1, corev1.DoNotSchedule))), kpod("plain")},
			check: func(r *specRun) error { return errors.Join(r.notScheduled("spread"), r.scheduled("plain")) }},
		{name: "Topology/NilLabelSelector", src: f + "92", pods: spreading(2, "p", nilSel), check: skewIs(scheduling.LabelZone, 2)},
		{name: "Topology/Zonal/MatchLabels", src: f + "108", pods: spreading(4, "p", zoneTSC(1)), check: skewIs(scheduling.LabelZone, 1, 1, 2)},
		{name: "Topology/Zonal/MatchExpressions", src: f + "121", pods: spreading(4, "p", []corev1.TopologySpreadConstraint{exprSel}),
			check: skewIs(scheduling.LabelZone, 1, 1, 2)},
		{name: "Topology/Zonal/PoolZones", src: f + "142", pools: zonePool(zone1, zone2, zone3), pods: spreading(4, "p", zoneTSC(1)),
			check: skewIs(scheduling.LabelZone, 1, 1, 2)},
		{name: "Topology/Zonal/PoolZoneSubsetRequirements", src: f + "157", pools: zonePool(zone1, zone2), pods: spreading(4, "p", zoneTSC(1)),
			check: skewIs(scheduling.LabelZone, 2, 2)},
		{name: "Topology/Zonal/PoolZoneSubsetLabels", src: f + "173", noPlanCheck: labelZoneDomains, pools: []*scheduling.NodePool{labelled}, pods: spreading(4, "p", zoneTSC(1)),
			check: skewIs(scheduling.LabelZone, 4)},
		{name: "Topology/Zonal/PoolZoneSubsetRequirementsAndLabels", src: f + "188", noPlanCheck: labelZoneDomains,
			pools: []*scheduling.NodePool{withLabels(specPool("default", req(scheduling.LabelZone, in, zone1, zone2)), scheduling.LabelZone, zone1)},
			pods:  spreading(4, "p", zoneTSC(1)), check: skewIs(scheduling.LabelZone, 4)},
		{name: "Topology/Zonal/PoolZoneLabelsAcrossPools", src: f + "204", noPlanCheck: labelZoneDomains,
			pools: []*scheduling.NodePool{withLabels(specPool("default", req(scheduling.LabelZone, in, zone1, zone2)), scheduling.LabelZone, zone1),
				withLabels(specPool("second"), scheduling.LabelZone, zone2)},
			pods: spreading(4, "p", zoneTSC(1)), check: skewIs(scheduling.LabelZone, 2, 2)},
		{name: "Topology/Zonal/ExistingPodOutsidePoolZones", src: f + "232", pools: zonePool(zone1, zone2), pods: spreading(6, "p", zoneTSC(1), rr),
			edit: withNodes(roundNode("n3", z(zone3), bound("old"))), check: skewIs(scheduling.LabelZone, 1, 2, 2)},
		{name: "Topology/Zonal/NonMinimumDomainIfOnlyOne", src: f + "266", pools: zonePool(zone3), pods: spreading(10, "p", zoneTSC(5), rr),
			edit:  withNodes(roundNode("n1", z(zone1), bound("a")), roundNode("n2", z(zone2), bound("b"))),
			check: skewIs(scheduling.LabelZone, 1, 1, 6)},
		{name: "Topology/Zonal/MinimumDomainsWhenViolating", src: f + "308", pods: spreading(3, "p", zoneTSC(1), rr),
			edit:  withNodes(roundNode("n1", z(zone1), bound("a")), roundNode("n2", z(zone1), bound("b")), roundNode("n3", z(zone1), bound("c"))),
			check: skewIs(scheduling.LabelZone, 3, 1, 2)},
		{name: "Topology/Zonal/MaxSkewDoNotSchedule", src: f + "347", pools: zonePool(zone2, zone3), pods: spreading(10, "p", zoneTSC(1), rr),
			edit: withNodes(roundNode("n1", z(zone1), bound("a", spreads(zoneTSC(1)...)))), check: skewIs(scheduling.LabelZone, 1, 2, 2)},
		{name: "Topology/Zonal/MaxSkewDoNotScheduleDiscoverDomains", src: f + "380", pools: zonePool(zone2, zone3), pods: spreading(10, "p", zoneTSC(1), rr),
			edit: withNodes(roundNode("n1", z(zone1), bound("a"))), check: skewIs(scheduling.LabelZone, 1, 2, 2)},
		{name: "Topology/Zonal/OnlyCountScheduledMatchingPods", src: f + "412", pods: spreading(2, "p", zoneTSC(1)),
			edit: countingNodes(scheduling.LabelZone, zone1, zone2), check: func(r *specRun) error {
				got := r.countBy(scheduling.LabelZone, r.in.Pods)
				if got[zone1] != 0 || got[zone3] < 1 || got[zone2]+got[zone3] != 2 {
					return fmt.Errorf("new pods per zone %v, want none in %s (it holds the 2 counted pods) and one in %s", got, zone1, zone3)
				}
				return nil
			}},
		{name: "Topology/Zonal/NoLabelSelectorMatchesAll", src: f + "445", pods: spreading(1, "p", nilSel), check: sched("p-0")},
		{name: "Topology/Zonal/InterdependentSelectors", src: f + "457",
			pods:  kpods(5, "p", spreads(tsc(scheduling.LabelHostname, 1, corev1.DoNotSchedule))),
			check: func(r *specRun) error { return r.sameNode(names(r.in.Pods)...) }},
		{name: "Topology/Zonal/MinDomains", src: f + "482", pools: zonePool(zone1, zone2), pods: spreading(3, "p", min(3)),
			check: skewIs(scheduling.LabelZone, 1, 1)},
		{name: "Topology/Zonal/MinDomainsEqual", src: f + "502", pools: zonePool(zone1, zone2, zone3), pods: spreading(11, "p", min(3)),
			check: skewIs(scheduling.LabelZone, 4, 4, 3)},
		{name: "Topology/Zonal/MinDomainsBelowDomains", src: f + "522", pools: zonePool(zone1, zone2, zone3), pods: spreading(11, "p", min(2)),
			check: skewIs(scheduling.LabelZone, 4, 4, 3)},
	}
}

// countingNodes is Karpenter's "should only count running/scheduled pods
// with matching labels": two nodes in the key's two first domains, one
// without the key, holding pods that must not count (no labels, another
// namespace, no domain) and three that do (two on the first, one on the
// second).
func countingNodes(key, first, second string) func(t *testing.T, in *scheduling.Input) {
	return func(_ *testing.T, in *scheduling.Input) {
		other := bound("other-ns")
		other.Namespace = "elsewhere"
		n1 := roundNode("first", map[string]string{key: first}, kpod("unlabelled"), other, bound("c1"), bound("c2"))
		n2 := roundNode("second", map[string]string{key: second}, bound("c3"))
		n3 := roundNode("third", nil, bound("no-domain"))
		delete(n3.Labels, key)
		for _, n := range []*scheduling.ExistingNode{n1, n2, n3} {
			n.Allocatable = rl("cpu", "10", "memory", "10Gi", "pods", "4")
		}
		in.Nodes = []*scheduling.ExistingNode{n1, n2, n3}
	}
}

func hostnameAndCapacityTypeCases() []specCase {
	const f = "scheduling/topology_test.go:"
	rr := requests("cpu", "1.1")
	ctTSC := func(how corev1.UnsatisfiableConstraintAction) []corev1.TopologySpreadConstraint {
		return []corev1.TopologySpreadConstraint{tsc(scheduling.LabelCapacityType, 1, how)}
	}
	ct := func(v string) map[string]string { return map[string]string{scheduling.LabelCapacityType: v} }
	ctPool := func(cts ...string) []*scheduling.NodePool {
		return []*scheduling.NodePool{specPoolOnly("default", req(scheduling.LabelCapacityType, in, cts...))}
	}
	app := func(name, arch string) []podOpt {
		sel := map[string]string{"app": name}
		return []podOpt{podLabels("app", name), required(expr(scheduling.LabelArch, in, arch)),
			spreads(spreadC(scheduling.LabelHostname, 1, sel, corev1.DoNotSchedule))}
	}
	return []specCase{
		{name: "Topology/Hostname/BalanceAcrossNodes", src: f + "545",
			pods:  spreading(4, "p", []corev1.TopologySpreadConstraint{tsc(scheduling.LabelHostname, 1, corev1.DoNotSchedule)}),
			check: skewIs(scheduling.LabelHostname, 1, 1, 1, 1)},
		{name: "Topology/Hostname/SameHostUpToMaxSkew", src: f + "558",
			pods:  spreading(4, "p", []corev1.TopologySpreadConstraint{tsc(scheduling.LabelHostname, 4, corev1.DoNotSchedule)}),
			check: skewIs(scheduling.LabelHostname, 4)},
		{name: "Topology/Hostname/MultipleDeployments", src: f + "571",
			pods:  append(kpods(2, "app1", app("app1", "amd64")[0], app("app1", "amd64")[2]), kpods(2, "app2", app("app2", "amd64")[0], app("app2", "amd64")[2])...),
			check: allScheduledOn(2)},
		{name: "Topology/Hostname/MultipleDeploymentsVaryingArch", src: f + "607",
			pods:  append(kpods(2, "app1", app("app1", "amd64")...), kpods(2, "app2", app("app2", "arm64")...)...),
			check: allScheduledOn(4)},
		{name: "Topology/CapacityType/Balance", src: f + "653", pods: spreading(4, "p", ctTSC(corev1.DoNotSchedule)),
			check: skewIs(scheduling.LabelCapacityType, 2, 2)},
		{name: "Topology/CapacityType/PoolConstraints", src: f + "666", pools: ctPool("spot", "on-demand"), pods: spreading(4, "p", ctTSC(corev1.DoNotSchedule)),
			check: skewIs(scheduling.LabelCapacityType, 2, 2)},
		{name: "Topology/CapacityType/MaxSkewDoNotSchedule", src: f + "681", pools: ctPool("on-demand"),
			pods: spreading(5, "p", ctTSC(corev1.DoNotSchedule), rr), edit: withNodes(roundNode("n1", ct("spot"), bound("a"))),
			check: skewIs(scheduling.LabelCapacityType, 1, 2)},
		{name: "Topology/CapacityType/ScheduleAnywayViolatesMaxSkew", src: f + "716", pools: ctPool("on-demand"),
			pods: spreading(5, "p", ctTSC(corev1.ScheduleAnyway), rr), edit: withNodes(roundNode("n1", ct("spot"), bound("a"))),
			check: skewIs(scheduling.LabelCapacityType, 1, 5)},
		{name: "Topology/CapacityType/OnlyCountScheduledMatchingPods", src: f + "747", pods: spreading(2, "p", ctTSC(corev1.DoNotSchedule)),
			edit: countingNodes(scheduling.LabelCapacityType, "spot", "on-demand"), check: func(r *specRun) error {
				if got := r.countBy(scheduling.LabelCapacityType, r.in.Pods); got["on-demand"] != 2 {
					return fmt.Errorf("new pods per capacity type %v, want both on-demand (spot holds 2 counted pods, on-demand 1)", got)
				}
				return nil
			}},
		{name: "Topology/CapacityType/NodeAffinityConstrained", src: f + "815",
			pods: spreading(5, "p", ctTSC(corev1.DoNotSchedule), required(expr(scheduling.LabelZone, in, zone2), expr(scheduling.LabelCapacityType, in, "spot"))),
			edit: withNodes(roundNode("n1", map[string]string{scheduling.LabelZone: zone1}, bound("a",
				required(expr(scheduling.LabelZone, in, zone1), expr(scheduling.LabelCapacityType, in, "on-demand"))))),
			check: skewIs(scheduling.LabelCapacityType, 1, 5)},
		{name: "Topology/CapacityType/NoConstraints", src: f + "852", pools: ctPool("spot"),
			pods: spreading(5, "p", ctTSC(corev1.DoNotSchedule), requests("cpu", "2")), edit: withNodes(roundNode("n1", ct("on-demand"), bound("a"))),
			check: skewIs(scheduling.LabelCapacityType, 1, 2)},
		{name: "Topology/Arch/NoConstraints", src: f + "895", pools: []*scheduling.NodePool{specPool("default", req(scheduling.LabelArch, in, "arm64"))},
			pods: spreading(5, "p", []corev1.TopologySpreadConstraint{tsc(scheduling.LabelArch, 1, corev1.DoNotSchedule)}, requests("cpu", "2")),
			edit: withNodes(roundNode("n1", nil, bound("a"))), check: skewIs(scheduling.LabelArch, 1, 2)},
	}
}
