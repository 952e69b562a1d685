package scheduling_test

import (
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's "In-Flight Nodes" and "Existing Nodes"
// (scheduling/suite_test.go). Karpenter provisions a first pod, then
// feeds the node it made back into cluster state; here that node is an
// ExistingNode of the catalog type Karpenter's first round would launch,
// in flight (launched, not initialized) unless the case says otherwise.

func TestKarpenterSpecInFlightAndExistingNodes(t *testing.T) {
	runSpec(t, append(inFlightCases(), existingNodeCases()...))
}

// claimNode is a node of the default pool of a catalog type, in flight,
// with pods bound to it.
func claimNode(t *testing.T, in *scheduling.Input, name, typ, zone string, ps ...*corev1.Pod) *scheduling.ExistingNode {
	t.Helper()
	for _, it := range in.DefaultInstanceTypes {
		if it.Name != typ {
			continue
		}
		labels := map[string]string{scheduling.LabelNodePool: "default", scheduling.LabelZone: zone, scheduling.LabelHostname: name,
			scheduling.LabelCapacityType: "on-demand"}
		for k, v := range it.Labels {
			labels[k] = v
		}
		for _, p := range ps {
			p.Spec.NodeName = name
		}
		return &scheduling.ExistingNode{Name: name, Labels: labels, Allocatable: it.Allocatable.DeepCopy(), Capacity: it.Capacity.DeepCopy(),
			Pods: ps, InFlight: true}
	}
	t.Fatalf("no catalog type %s", typ)
	return nil
}

func nodes(f func(t *testing.T, in *scheduling.Input) []*scheduling.ExistingNode) func(t *testing.T, in *scheduling.Input) {
	return func(t *testing.T, in *scheduling.Input) { in.Nodes = f(t, in) }
}

// onNode: the pod landed on the named existing node.
func onNode(node string, pods ...string) func(r *specRun) error {
	return func(r *specRun) error {
		var errs []error
		for _, p := range pods {
			n, ok := r.nodeOf(p)
			if !ok || n.name != node {
				errs = append(errs, fmt.Errorf("pod %s not on node %s (%v): %s", p, node, n, reasonOf(r.plan, p)))
			}
		}
		return errors.Join(errs...)
	}
}

func newNodeFor(pods ...string) func(r *specRun) error {
	return func(r *specRun) error {
		var errs []error
		for _, p := range pods {
			if n, ok := r.nodeOf(p); !ok || n.claim == nil {
				errs = append(errs, fmt.Errorf("pod %s not on a new node (%v): %s", p, n, reasonOf(r.plan, p)))
			}
		}
		return errors.Join(errs...)
	}
}

func taint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

func inFlightCases() []specCase {
	const f = "scheduling/suite_test.go:"
	small := limits("cpu", "10m")
	node1 := func(typ, zone string, edit ...func(*scheduling.ExistingNode)) func(t *testing.T, in *scheduling.Input) {
		return nodes(func(t *testing.T, in *scheduling.Input) []*scheduling.ExistingNode {
			n := claimNode(t, in, "node1", typ, zone)
			for _, e := range edit {
				e(n)
			}
			return []*scheduling.ExistingNode{n}
		})
	}
	initialized := func(n *scheduling.ExistingNode) { n.Initialized, n.InFlight = true, false }
	withTaints := func(ts ...corev1.Taint) func(*scheduling.ExistingNode) {
		return func(n *scheduling.ExistingNode) { n.Taints = ts }
	}
	return []specCase{
		{name: "InFlightNodes/PodFitsInFlightNode", src: f + "1830 (and 2531)", pods: one("second", small), edit: node1("t4g.small", zone1),
			check: onNode("node1", "second")},
		{name: "InFlightNodes/NodeSelectorsIntersectInFlightZone", src: f + "1847",
			pods: []*corev1.Pod{kpod("second", small, required(expr(scheduling.LabelZone, in, zone1, zone2))),
				kpod("third", small, required(expr(scheduling.LabelZone, in, zone1, zone3)))},
			edit: node1("t4g.small", zone2), check: func(r *specRun) error { return errors.Join(onNode("node1", "second")(r), newNodeFor("third")(r)) }},
		{name: "InFlightNodes/PodDoesNotFitInFlightNode", src: f + "1896", pods: one("second", limits("cpu", "1")),
			edit: nodes(func(t *testing.T, in *scheduling.Input) []*scheduling.ExistingNode {
				return []*scheduling.ExistingNode{claimNode(t, in, "node1", "t4g.small", zone1, kpod("first", limits("cpu", "1001m")))}
			}), check: newNodeFor("second")},
		{name: "InFlightNodes/PodIncompatibleWithInFlightNode", src: f + "1915", pods: one("second", selector(scheduling.LabelArch, "arm64")),
			edit: node1("t3a.small", zone1), check: newNodeFor("second")},
		{name: "InFlightNodes/InFlightNodeTerminating", src: f + "1932", pods: one("second", small),
			edit: node1("t4g.small", zone1, func(n *scheduling.ExistingNode) { n.MarkedForDeletion = true }), check: newNodeFor("second")},
		{name: "InFlightNodes/Taints/UntaintedNode", src: f + "2018", pods: one("second"), edit: node1("c6g.2xlarge", zone1, initialized),
			check: onNode("node1", "second")},
		{name: "InFlightNodes/Taints/NotReadyNoExecuteUninitialized", src: f + "2040", pods: one("second"),
			edit: node1("t4g.small", zone1, withTaints(taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoExecute))), check: onNode("node1", "second")},
		{name: "InFlightNodes/Taints/NotReadyNoExecuteInitialized", src: f + "2040", pods: one("third"),
			edit: node1("t4g.small", zone1, initialized, withTaints(taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoExecute))), check: newNodeFor("third")},
		{name: "InFlightNodes/Taints/TaintedInitializedNode", src: f + "2078", pods: one("second"),
			edit: node1("c6g.2xlarge", zone1, initialized, withTaints(taint("foo.com/taint", "tainted", corev1.TaintEffectNoSchedule))), check: newNodeFor("second")},
		{name: "InFlightNodes/Taints/CustomStartupTaint", src: f + "2110", pods: one("second"),
			edit: node1("c6g.2xlarge", zone1, func(n *scheduling.ExistingNode) {
				st := taint("foo.com/taint", "tainted", corev1.TaintEffectNoSchedule)
				n.StartupTaints, n.Taints = []corev1.Taint{st}, []corev1.Taint{st, taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule)}
			}), check: onNode("node1", "second")},
		{name: "InFlightNodes/Taints/StartupTaintAfterInitialization", src: f + "2143", pods: one("second"),
			edit: node1("t4g.small", zone1, initialized, func(n *scheduling.ExistingNode) {
				st := taint("ignore-me", "nothing-to-see-here", corev1.TaintEffectNoSchedule)
				n.StartupTaints, n.Taints = []corev1.Taint{st}, []corev1.Taint{st}
			}), check: newNodeFor("second")},
		// Karpenter counts a NotReady node as not initialized whatever its
		// label says; the state layer sets Initialized that way.
		{name: "InFlightNodes/Taints/NotReadyNodeStillInFlight", src: f + "2174", pods: one("second", requests("cpu", "10m")),
			edit: node1("t4g.small", zone1, withTaints(taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoSchedule),
				taint(corev1.TaintNodeUnreachable, "", corev1.TaintEffectNoSchedule),
				taint("node.cloudprovider.kubernetes.io/uninitialized", "true", corev1.TaintEffectNoSchedule))), check: onNode("node1", "second")},
		{name: "InFlightNodes/Topology/BalanceZones", src: f + "1959", pods: kpods(5, "second", zoneSpreadOpts()...),
			edit: nodes(func(t *testing.T, in *scheduling.Input) []*scheduling.ExistingNode {
				return []*scheduling.ExistingNode{claimNode(t, in, "n1", "c6g.2xlarge", zone1, kpods(1, "a", zoneSpreadOpts()...)...),
					claimNode(t, in, "n2", "c6g.2xlarge", zone2, kpods(1, "b", zoneSpreadOpts()...)...),
					claimNode(t, in, "n3", "c6g.2xlarge", zone3, kpods(2, "c", zoneSpreadOpts()...)...)}
			}), check: func(r *specRun) error {
				return errors.Join(r.claims(0), wantSkewAll(r, scheduling.LabelZone, map[string]string{"foo": "bar"}, 3, 3, 3))
			}},
		{name: "InFlightNodes/Topology/BalanceHostnames", src: f + "1990",
			pods: kpods(5, "second", podLabels("foo", "bar"), spreads(spreadC(scheduling.LabelHostname, 1, map[string]string{"foo": "bar"}, corev1.DoNotSchedule))),
			edit: nodes(func(t *testing.T, in *scheduling.Input) []*scheduling.ExistingNode {
				var out []*scheduling.ExistingNode
				for i, z := range []string{zone1, zone2, zone3, zone1} {
					out = append(out, claimNode(t, in, fmt.Sprintf("n%d", i), "c6g.2xlarge", z,
						kpod(fmt.Sprintf("old-%d", i), podLabels("foo", "bar"))))
				}
				return out
			}), check: func(r *specRun) error {
				return wantSkewAll(r, scheduling.LabelHostname, map[string]string{"foo": "bar"}, 1, 1, 1, 1, 1, 1, 1, 1, 1)
			}},
		{name: "InFlightNodes/SameHostPortDifferentNodes", src: f + "2593", pods: kpods(2, "p", hostPort(8080)),
			check: func(r *specRun) error { return r.distinctNodes("p-0", "p-1") }},
	}
}

func zoneSpreadOpts() []podOpt {
	l := map[string]string{"foo": "bar"}
	return []podOpt{podLabels("foo", "bar"), spreads(spreadC(scheduling.LabelZone, 1, l, corev1.DoNotSchedule))}
}

// wantSkewAll is ExpectSkew over every pod with the labels: the pending
// pods where the plan puts them and the pods already bound.
func wantSkewAll(r *specRun, key string, sel map[string]string, want ...int) error {
	var all []*corev1.Pod
	for _, n := range r.in.Nodes {
		for _, p := range n.Pods {
			if labelsMatch(p.Labels, sel) {
				all = append(all, p)
			}
		}
	}
	counts := map[string]int{}
	for _, p := range all {
		counts[r.existingLabels(p.Spec.NodeName)[key]]++
	}
	var pending []*corev1.Pod
	for _, p := range r.in.Pods {
		if labelsMatch(p.Labels, sel) {
			pending = append(pending, p)
		}
	}
	if key == scheduling.LabelHostname {
		// new nodes have no hostname yet: each claim is its own domain
		for _, p := range pending {
			if n, ok := r.nodeOf(p.Name); ok {
				counts[n.name]++
			}
		}
	} else {
		for k, v := range r.countBy(key, pending) {
			counts[k] += v
		}
	}
	var got []int
	for _, v := range counts {
		got = append(got, v)
	}
	return compareSkew(got, want, counts)
}

func labelsMatch(l, sel map[string]string) bool {
	for k, v := range sel {
		if l[k] != v {
			return false
		}
	}
	return true
}

func compareSkew(got, want []int, counts map[string]int) error {
	g := sortedInts(got)
	if fmt.Sprint(g) != fmt.Sprint(sortedInts(want)) {
		return fmt.Errorf("pods per domain %v (%v), want %v", g, counts, sortedInts(want))
	}
	return nil
}

func sortedInts(v []int) []int {
	out := append([]int(nil), v...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// unowned is a node Karpenter did not launch: no NodePool label.
func unowned(name string, kv ...string) *scheduling.ExistingNode {
	return &scheduling.ExistingNode{Name: name, Initialized: true, Labels: map[string]string{scheduling.LabelHostname: name},
		Allocatable: rl(kv...)}
}

func dsPod(name, ds string, opts ...podOpt) *corev1.Pod {
	p := kpod(name, opts...)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds, UID: types.UID("uid-ds-" + ds)}}
	p.Namespace = "kube-system"
	return p
}

func existingNodeCases() []specCase {
	const f = "scheduling/suite_test.go:"
	pin := requests("cpu", "10m")
	return []specCase{
		{name: "ExistingNodes/UnownedNode", src: f + "2607", pods: one("p", pin, limits("cpu", "10m")),
			edit: func(_ *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{unowned("n", "cpu", "10", "memory", "10Gi", "pods", "110")}
			},
			check: onNode("n", "p")},
		{name: "ExistingNodes/ManyPodsOnUnownedNode", src: f + "2633", pods: kpods(100, "p", pin, limits("cpu", "10m")),
			edit: func(_ *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{unowned("n", "cpu", "10", "memory", "100Gi", "pods", "110")}
			}, check: func(r *specRun) error { return onNode("n", names(r.in.Pods)...)(r) }},
		{name: "ExistingNodes/InitializedBeforeUninitialized", src: f + "2662 (and 2553)", pods: one("p"),
			edit: nodes(func(t *testing.T, in *scheduling.Input) []*scheduling.ExistingNode {
				var out []*scheduling.ExistingNode
				for i := 0; i < 20; i++ {
					n := claimNode(t, in, fmt.Sprintf("n%02d", i), "t4g.small", zone1)
					n.Initialized, n.InFlight = i == 13, i != 13
					out = append(out, n)
				}
				return out
			}), check: onNode("n13", "p")},
		{name: "ExistingNodes/IncompatibleNodeCompatiblePool", src: f + "2695", pods: one("p", required(expr(scheduling.LabelZone, in, zone1))),
			edit: nodes(func(t *testing.T, in *scheduling.Input) []*scheduling.ExistingNode {
				n := claimNode(t, in, "n", "c6g.2xlarge", zone2)
				n.Initialized, n.InFlight = true, false
				return []*scheduling.ExistingNode{n}
			}), check: func(r *specRun) error { return errors.Join(newNodeFor("p")(r), zoneIs("p", zone1)(r)) }},
		{name: "ExistingNodes/Daemonsets/IncompatibleDaemonNotSubtracted", src: f + "2729",
			pods: []*corev1.Pod{kpod("p", requests("cpu", "1", "memory", "1Gi")), kpod("p2", requests("cpu", "1", "memory", "1Gi"))},
			edit: func(_ *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{{Name: "n", Initialized: true, Allocatable: rl("cpu", "1", "memory", "1Gi", "pods", "110"),
					Labels: map[string]string{scheduling.LabelNodePool: "default", scheduling.LabelHostname: "n", scheduling.LabelZone: zone2}}}
				in.DaemonSets = append(in.DaemonSets, daemonSet("huge", kpod("ds", requests("cpu", "100", "memory", "100Gi"),
					required(expr(scheduling.LabelZone, corev1.NodeSelectorOpIn, zone1)))))
			}, check: func(r *specRun) error {
				// p or p2 takes the node; a new zone-1 node would carry the
				// daemon and fits nothing, the other zones' nodes don't.
				return r.scheduled("p", "p2")
			}},
		// c6g.4xlarge has 15.89 cpu allocatable (Karpenter's fake: 15.9).
		{name: "InFlightNodes/Daemonsets/BoundDaemonPodCountsOnce", src: f + "2203", pods: one("second", limits("cpu", "14.89")),
			edit: func(t *testing.T, in *scheduling.Input) {
				in.DaemonSets = []*appsv1.DaemonSet{daemonSet("ds", kpod("ds", requests("cpu", "1", "memory", "1Gi")))}
				n := claimNode(t, in, "node1", "c6g.4xlarge", zone1, dsPod("ds-pod", "ds", requests("cpu", "1", "memory", "2Gi")))
				in.Nodes = []*scheduling.ExistingNode{n}
			}, check: onNode("node1", "second")},
		{name: "InFlightNodes/Daemonsets/UnboundDaemonReserved", src: f + "2203", pods: one("second", limits("cpu", "15")),
			edit: func(t *testing.T, in *scheduling.Input) {
				in.DaemonSets = []*appsv1.DaemonSet{daemonSet("ds", kpod("ds", requests("cpu", "1", "memory", "1Gi")))}
				in.Nodes = []*scheduling.ExistingNode{claimNode(t, in, "node1", "c6g.4xlarge", zone1)}
			}, check: newNodeFor("second")},
		{name: "InFlightNodes/Daemonsets/UnexpectedDaemonPod", src: f + "2275", pods: one("second", limits("cpu", "15.5")),
			edit: func(t *testing.T, in *scheduling.Input) {
				in.DaemonSets = []*appsv1.DaemonSet{daemonSet("ds1", kpod("ds1", selector("my-node-label", "value"), requests("cpu", "1", "memory", "1Gi"))),
					daemonSet("ds2", kpod("ds2", requests("cpu", "1m")))}
				n := claimNode(t, in, "node1", "c6g.4xlarge", zone1, dsPod("ds1-pod", "ds1", requests("cpu", "1", "memory", "2Gi")))
				n.Labels["my-node-label"] = "value"
				in.Nodes = []*scheduling.ExistingNode{n}
			}, check: newNodeFor("second")},
	}
}
