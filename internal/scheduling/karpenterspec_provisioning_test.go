package scheduling_test

import (
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's provisioning suite (pkg/controllers/provisioning/
// suite_test.go): "Daemonsets", "Labels", "Taints", "NodeClaim
// Creation", the PreferNoSchedule fallback and "Multiple NodePools".
// Karpenter tells a counted daemon by the bigger node it launches; here
// the claim's requests say it directly (the pods' plus every daemon the
// node will run).

func TestKarpenterSpecDaemonSets(t *testing.T) { runSpec(t, daemonSetCases()) }

func TestKarpenterSpecNodeClaims(t *testing.T) {
	runSpec(t, append(nodeClaimCases(), nodePoolChoiceCases()...))
}

func withDaemons(ds ...*appsv1.DaemonSet) func(t *testing.T, in *scheduling.Input) {
	return func(_ *testing.T, in *scheduling.Input) { in.DaemonSets = ds }
}

func ds(name string, opts ...podOpt) *appsv1.DaemonSet { return daemonSet(name, kpod(name, opts...)) }

// claimCPU: the pod's claim requests this much cpu (pods + daemons).
func claimCPU(pod, cpu string) func(r *specRun) error {
	return func(r *specRun) error {
		n, ok := r.nodeOf(pod)
		if !ok || n.claim == nil {
			return fmt.Errorf("pod %s not on a new node: %s", pod, reasonOf(r.plan, pod))
		}
		want := qtyOf(cpu)
		if got := n.claim.Requests[corev1.ResourceCPU]; got.MilliValue() != want.MilliValue() {
			return fmt.Errorf("claim requests cpu %s, want %s", got.String(), cpu)
		}
		return nil
	}
}

func daemonSetCases() []specCase {
	const f = "suite_test.go:"
	pod := requests("cpu", "1", "memory", "1Gi")
	dsReq := requests("cpu", "2", "memory", "2Gi")
	podCounted := func(cpu string) func(r *specRun) error { return claimCPU("p", cpu) }
	taintedPool := func(ts ...corev1.Taint) []*scheduling.NodePool {
		p := specPool("default")
		p.Taints = ts
		return []*scheduling.NodePool{p}
	}
	startup := specPool("default")
	startup.StartupTaints = []corev1.Taint{taint("foo.com/taint", "", corev1.TaintEffectNoSchedule)}
	size := "karpenter.k8s.aws/instance-size"
	return []specCase{
		{name: "Daemonsets/Counted", src: f + "935", pods: one("p", pod), edit: withDaemons(ds("ds", dsReq)), check: podCounted("3")},
		{name: "Daemonsets/HostPorts", src: f + "956", pods: one("p", pod, hostPort(8080)),
			edit: withDaemons(ds("ds", dsReq, hostPort(8080))), check: func(r *specRun) error { return errors.Join(r.notScheduled("p"), r.claims(0)) }},
		{name: "Daemonsets/CountedWithStartupTaint", src: f + "974", pools: []*scheduling.NodePool{startup}, pods: one("p", pod),
			edit: withDaemons(ds("ds", dsReq)), check: podCounted("3")},
		{name: "Daemonsets/OverheadTooLarge", src: f + "1004", pods: one("p"),
			edit: withDaemons(ds("ds", requests("cpu", "10000", "memory", "10000Gi"))), check: unsched("p")},
		{name: "Daemonsets/LimitsAsRequestsTooLarge", src: f + "1057", pods: one("p"),
			edit: withDaemons(ds("ds", limits("cpu", "10000", "memory", "10000Gi"), func(p *corev1.Pod) {
				p.Spec.Containers[0].Resources.Requests = rl("cpu", "1")
			})), check: unsched("p")},
		{name: "Daemonsets/MaxOfContainersAndInitContainers", src: f + "1070", pods: one("p"),
			edit: withDaemons(ds("ds", requests("cpu", "1"), limits("memory", "1Gi"), initContainer("cpu", "3"))), check: podCounted("3")},
		{name: "Daemonsets/CombinedMaxTooLarge", src: f + "1098", pods: one("p"),
			edit: withDaemons(ds("ds", requests("cpu", "1", "memory", "1Gi"), initContainer("cpu", "1", "memory", "10000Gi"))), check: unsched("p")},
		{name: "Daemonsets/InitContainerTooLarge", src: f + "1119", pods: one("p"),
			edit: withDaemons(ds("ds", initContainer("cpu", "10000", "memory", "10000Gi"))), check: unsched("p")},
		{name: "Daemonsets/NoRequestsOrLimits", src: f + "1135", pods: one("p"), edit: withDaemons(ds("ds")), check: sched("p")},
		{name: "Daemonsets/IgnoredWithoutToleration", src: f + "1143", pools: taintedPool(taint("foo", "bar", corev1.TaintEffectNoSchedule)),
			pods: one("p", pod, tolerates(corev1.Toleration{Operator: corev1.TolerationOpExists})), edit: withDaemons(ds("ds", dsReq)), check: podCounted("1")},
		{name: "Daemonsets/IgnoredWithInvalidSelector", src: f + "1175", pods: one("p", pod),
			edit: withDaemons(ds("ds", dsReq, selector("node", "invalid"))), check: podCounted("1")},
		{name: "Daemonsets/IgnoredWhenNoTypeMatches", src: f + "1197", pods: one("p", pod),
			edit: withDaemons(ds("ds", dsReq, required(expr(scheduling.LabelInstanceType, in, "non-existent-instance-type")))), check: podCounted("1")},
		{name: "Daemonsets/CustomLabelSelectorMatchingPool", src: f + "1219",
			pools: []*scheduling.NodePool{withLabels(specPool("default"), "purpose", "monitoring")}, pods: one("p", pod),
			edit: withDaemons(ds("ds", dsReq, selector("purpose", "monitoring"))), check: podCounted("3")},
		// Only the daemon for "small" nodes runs on the small type the pod
		// gets; the 10-cpu one for "large" nodes does not.
		{name: "Daemonsets/FilteredByInstanceType", src: f + "1246", pods: one("p", pod, selector(size, "xlarge")),
			edit: withDaemons(ds("small", requests("cpu", "1"), required(expr(size, in, "xlarge"))),
				ds("large", requests("cpu", "10"), required(expr(size, in, "16xlarge")))),
			check: podCounted("2")},
		{name: "Daemonsets/NotInUnspecifiedKey", src: f + "1276", pods: one("p", pod, required(expr(scheduling.LabelZone, in, zone2))),
			edit: withDaemons(ds("ds", dsReq, required(expr("foo", notIn, "bar")))), check: podCounted("3")},
		{name: "Daemonsets/MultipleNodeAffinityTerms", src: f + "1371", pools: []*scheduling.NodePool{withLabels(specPool("default"), "foo", "bar")},
			pods: one("p", pod), edit: withDaemons(ds("ds", dsReq, required(expr("foo", in, "voo")), required(expr("foo", in, "bar")))), check: podCounted("3")},
		{name: "Daemonsets/IncompatiblePreferenceStillCounted", src: f + "1431", pods: one("p", pod),
			edit: withDaemons(ds("ds", dsReq, preferred(1, expr("node", in, "invalid")))), check: podCounted("3")},
		{name: "Daemonsets/PreferNoScheduleTaintStillCounted", src: f + "1459", pools: taintedPool(taint("test", "", corev1.TaintEffectPreferNoSchedule)),
			pods: one("p", pod), edit: withDaemons(ds("ds", dsReq)), check: podCounted("3")},
		// The daemon with port 8080 runs on xlarge nodes only; the pod
		// asks for a 2xlarge, where only the other daemon (port 8081)
		// runs, so its own 8080 is free.
		{name: "Daemonsets/HostPortsOfDaemonsNotOnTheNode", src: f + "1496", pods: one("p", pod, hostPort(8080), required(expr(size, in, "2xlarge"))),
			edit: withDaemons(ds("big", requests("cpu", "4", "memory", "4Gi"), hostPort(8080), required(expr(size, in, "xlarge"))),
				ds("small", requests("cpu", "2", "memory", "2Gi"), hostPort(8081), required(expr(size, in, "2xlarge")))),
			check: podCounted("3")},
		{name: "NodeClaimCreation/RequestsWithDaemonOverhead", src: f + "1939", pods: one("p", requests("cpu", "1", "memory", "1Gi")),
			edit: withDaemons(ds("ds", requests("cpu", "1", "memory", "1Gi"))), check: podCounted("2")},
		{name: "NodeClaimCreation/DaemonOverheadCountedOnce", src: f + "1959", pods: kpods(3, "p", requests("cpu", "1", "memory", "1Gi")),
			edit: withDaemons(ds("ds", requests("cpu", "1", "memory", "1Gi"))), check: func(r *specRun) error {
				return errors.Join(r.sameNode(names(r.in.Pods)...), claimCPU("p-0", "4")(r))
			}},
	}
}

// requirement is the claim's requirement on key, if any.
func requirement(c *scheduling.NodeClaimPlan, key string) (corev1.NodeSelectorRequirement, bool) {
	for _, r := range c.Requirements {
		if r.Key == key {
			return r, true
		}
	}
	return corev1.NodeSelectorRequirement{}, false
}

func claimOf(r *specRun, pod string) (*scheduling.NodeClaimPlan, error) {
	n, ok := r.nodeOf(pod)
	if !ok || n.claim == nil {
		return nil, fmt.Errorf("pod %s not on a new node: %s", pod, reasonOf(r.plan, pod))
	}
	return n.claim, nil
}

func nodeClaimCases() []specCase {
	const f = "suite_test.go:"
	gpuTol := func(t corev1.Toleration) podOpt { return tolerates(t) }
	gpuTaint := taint("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule)
	gpuPool := specPool("default")
	gpuPool.Taints = []corev1.Taint{gpuTaint}
	return []specCase{
		{name: "Labels/LabelNodes", src: f + "1546",
			pools: []*scheduling.NodePool{withLabels(specPool("default", req("test-key-2", in, "test-value-2"), req("test-key-3", notIn, "test-value-3"),
				req("test-key-4", lt, "4"), req("test-key-5", gt, "5"), req("test-key-6", exists), req("test-key-7", dne)), "test-key-1", "test-value-1")},
			pods: one("p"), check: func(r *specRun) error {
				return errors.Join(r.hasLabel("p", scheduling.LabelNodePool, "default"), r.hasLabel("p", "test-key-1", "test-value-1"),
					r.hasLabel("p", "test-key-2", "test-value-2"), hasKeyNot(r, "test-key-3", "test-value-3"), hasKeyNot(r, "test-key-4", "test-value-4"),
					hasKeyNot(r, "test-key-5", "test-value-5"), hasKeyNot(r, "test-key-6", ""), r.lacksLabel("p", "test-key-7", ""))
			}},
		{name: "Labels/KubernetesDomainLabels", src: f + "1579",
			pools: []*scheduling.NodePool{withLabels(specPool("default"), "kubernetes.io/test", "test-value", "k8s.io/test", "test-value")},
			pods:  one("p", required(expr("kubernetes.io/test", in, "test-value"), expr("k8s.io/test", in, "test-value"))),
			check: func(r *specRun) error { return r.hasLabel("p", "k8s.io/test", "test-value") }},
		{name: "Labels/KubernetesSubdomainLabels", src: f + "1601",
			pools: []*scheduling.NodePool{withLabels(specPool("default"), "subdomain.kubernetes.io/test", "test-value", "subdomain.k8s.io/test", "test-value")},
			pods:  one("p", required(expr("subdomain.kubernetes.io/test", in, "test-value"), expr("subdomain.k8s.io/test", in, "test-value"))),
			check: func(r *specRun) error { return r.hasLabel("p", "subdomain.k8s.io/test", "test-value") }},
		{name: "Labels/NoWellKnownLabelsFromRequirements", src: f + "1623",
			pools: []*scheduling.NodePool{specPool("default", req("foo", in, "bar"), req(scheduling.LabelWindowsBuild, notIn, "test-value"))},
			pods:  one("p"), check: func(r *specRun) error {
				return errors.Join(r.hasLabel("p", "foo", "bar"), r.lacksLabel("p", scheduling.LabelWindowsBuild, "test-value"))
			}},
		{name: "Provisioning/Taints/TolerantPodsSchedule", src: f + "1645", pools: []*scheduling.NodePool{gpuPool},
			pods: []*corev1.Pod{kpod("equal", gpuTol(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule})),
				kpod("exists", gpuTol(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
				kpod("any-effect", gpuTol(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists})),
				kpod("everything", gpuTol(corev1.Toleration{Operator: corev1.TolerationOpExists}))},
			check: sched("equal", "exists", "any-effect", "everything")},
		{name: "NodeClaimCreation/ExpectedRequirements", src: f + "1695", pods: one("p"), check: func(r *specRun) error {
			c, err := claimOf(r, "p")
			if err != nil {
				return err
			}
			pool, _ := requirement(c, scheduling.LabelNodePool)
			types, _ := requirement(c, scheduling.LabelInstanceType)
			if fmt.Sprint(pool.Values) != "[default]" || len(types.Values) == 0 {
				return fmt.Errorf("requirements %v: want nodepool In [default] and the instance types", c.Requirements)
			}
			return nil
		}},
		{name: "NodeClaimCreation/AdditionalRequirements", src: f + "1716",
			pools: []*scheduling.NodePool{specPool("default", req("custom-requirement-key", in, "value"), req("custom-requirement-key2", in, "value"))},
			pods:  one("p"), check: func(r *specRun) error {
				c, err := claimOf(r, "p")
				if err != nil {
					return err
				}
				for _, k := range []string{"custom-requirement-key", "custom-requirement-key2"} {
					if q, ok := requirement(c, k); !ok || fmt.Sprint(q.Values) != "[value]" {
						return fmt.Errorf("requirements %v lack %s In [value]", c.Requirements, k)
					}
				}
				return nil
			}},
		{name: "NodeClaimCreation/ArchRestrictsTypes", src: f + "1766", pools: []*scheduling.NodePool{specPool("default", req(scheduling.LabelArch, in, "arm64"))},
			pods: one("p"), check: optionsAll(scheduling.LabelArch, "arm64")},
		{name: "NodeClaimCreation/PodRequestsRestrictTypes", src: f + "1840", pods: one("p", requests("nvidia.com/gpu", "1"), limits("nvidia.com/gpu", "1")),
			check: optionsAll("karpenter.k8s.aws/instance-gpu-manufacturer", "nvidia")},
		{name: "NodeClaimCreation/NodeClassReference", src: f + "1885", pods: one("p"), check: func(r *specRun) error {
			c, err := claimOf(r, "p")
			if err == nil && c.NodeClass != "default" {
				err = fmt.Errorf("claim node class %q, want the pool's", c.NodeClass)
			}
			return err
		}},
		{name: "NodeClaimCreation/ResourceRequests", src: f + "1913", pods: one("p", requests("cpu", "1", "memory", "1Mi", "nvidia.com/gpu", "1"), limits("nvidia.com/gpu", "1")),
			check: podRequestsAre("p", "cpu", "1", "memory", "1Mi", "nvidia.com/gpu", "1", "pods", "1")},
	}
}

func hasKeyNot(r *specRun, key, value string) error {
	v, has, err := r.label("p", key)
	if err == nil && (!has || (value != "" && v == value)) {
		err = fmt.Errorf("node label %s=%q (present %v), want the key with another value than %q", key, v, has, value)
	}
	return err
}

// optionsAll: every instance type option of p's claim has label=value.
func optionsAll(label, value string) func(r *specRun) error {
	return func(r *specRun) error {
		c, err := claimOf(r, "p")
		if err != nil {
			return err
		}
		byName := map[string]*scheduling.InstanceType{}
		for _, it := range r.in.DefaultInstanceTypes {
			byName[it.Name] = it
		}
		for _, o := range c.InstanceTypeOptions {
			if byName[o].Labels[label] != value {
				return fmt.Errorf("option %s has %s=%q, want %q", o, label, byName[o].Labels[label], value)
			}
		}
		return nil
	}
}

func nodePoolChoiceCases() []specCase {
	const f = "suite_test.go:"
	soft := specPool("soft")
	soft.Taints = []corev1.Taint{taint("foo", "bar", corev1.TaintEffectPreferNoSchedule)}
	weighted := func() []*scheduling.NodePool {
		a, b, c := specPool("a"), specPool("b"), specPool("c")
		b.Weight, c.Weight = 20, 100
		return []*scheduling.NodePool{a, b, c}
	}
	poolIs := func(pool string, pods ...string) func(r *specRun) error {
		return func(r *specRun) error {
			var errs []error
			for _, p := range pods {
				errs = append(errs, r.hasLabel(p, scheduling.LabelNodePool, pool))
			}
			return errors.Join(errs...)
		}
	}
	return []specCase{
		{name: "PreferentialFallback/TolerateSoftTaintAfterAffinity", src: f + "2487", pools: []*scheduling.NodePool{soft},
			pods: one("p", preferred(1, expr(scheduling.LabelZone, in, "invalid")), preferred(1, expr(scheduling.LabelInstanceType, in, "invalid"))),
			check: func(r *specRun) error {
				c, err := claimOf(r, "p")
				if err == nil && (len(c.Taints) != 1 || c.Taints[0].Effect != corev1.TaintEffectPreferNoSchedule) {
					err = fmt.Errorf("claim taints %v, want foo=bar:PreferNoSchedule", c.Taints)
				}
				return err
			}},
		{name: "Provisioning/NoValidNodePools", src: f + "294", pools: []*scheduling.NodePool{}, pods: one("p"), check: func(r *specRun) error {
			if why := reasonOf(r.plan, "p"); why != "no NodePools" {
				return fmt.Errorf("reason %q, want no NodePools", why)
			}
			return r.notScheduled("p")
		}},
		{name: "MultipleNodePools/ExplicitlySelected", src: f + "2773", pools: []*scheduling.NodePool{specPool("default"), specPool("other")},
			pods: one("p", selector(scheduling.LabelNodePool, "other")), check: poolIs("other", "p")},
		{name: "MultipleNodePools/ByLabels", src: f + "2781", pools: []*scheduling.NodePool{specPool("default"), withLabels(specPool("other"), "foo", "bar")},
			pods: one("p", selector("foo", "bar")), check: poolIs("other", "p")},
		{name: "MultipleNodePools/AvoidPreferNoScheduleTaint", src: f + "2797", pools: []*scheduling.NodePool{soft, specPool("plain")},
			pods: one("p"), check: poolIs("plain", "p")},
		{name: "MultipleNodePools/Weighted/HighestWeight", src: f + "2815", pools: weighted(), pods: kpods(3, "p"),
			check: func(r *specRun) error { return poolIs("c", names(r.in.Pods)...)(r) }},
		{name: "MultipleNodePools/Weighted/ExplicitSelectionBeatsWeight", src: f + "2831", pools: weighted(),
			pods: one("p", selector(scheduling.LabelNodePool, "a")), check: poolIs("a", "p")},
	}
}
