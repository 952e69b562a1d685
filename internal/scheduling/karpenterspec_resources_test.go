package scheduling_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's "Binpacking" (scheduling/suite_test.go), the sidecar and
// pod-level resource cases and "Resource Limits" of the provisioning
// suite (suite_test.go). Karpenter's fake types (small 2 cpu/2Gi, default
// 4 cpu/4Gi, ...) become the catalog's: "the smallest type" is the
// cheapest one that holds the pod, and where Karpenter counts nodes the
// pool is pinned to one real type so the count is the same arithmetic.

func TestKarpenterSpecResources(t *testing.T) {
	runSpec(t, append(binpackingCases(), containerResourceCases()...))
}

func TestKarpenterSpecLimits(t *testing.T) { runSpec(t, limitCases()) }

func typePool(types ...string) []*scheduling.NodePool {
	return []*scheduling.NodePool{specPool("default", req(scheduling.LabelInstanceType, in, types...))}
}

// cheapest asserts the pod's node costs what the cheapest type that holds
// its requests (plus need, for overhead the pod does not list) costs in
// any offering of the allowed capacity types.
func cheapest(pod string) func(r *specRun) error {
	return func(r *specRun) error {
		n, ok := r.nodeOf(pod)
		if !ok || n.claim == nil {
			return fmt.Errorf("pod %s not on a new node: %s", pod, reasonOf(r.plan, pod))
		}
		var p *corev1.Pod
		for _, q := range r.in.Pods {
			if q.Name == pod {
				p = q
			}
		}
		best := math.Inf(1)
		for _, it := range r.in.DefaultInstanceTypes {
			if !fits(scheduling.PodRequests(p), it.Allocatable) {
				continue
			}
			for _, o := range it.Offerings {
				if o.Available && o.Price < best {
					best = o.Price
				}
			}
		}
		if math.Abs(n.claim.PricePerHour-best) > 1e-9 {
			return fmt.Errorf("pod %s on %s at %.4f/h, the cheapest type that holds it costs %.4f/h", pod, n.claim.InstanceType, n.claim.PricePerHour, best)
		}
		return nil
	}
}

func fits(need, have corev1.ResourceList) bool {
	for k, q := range need {
		h, ok := have[k]
		if q.IsZero() {
			continue
		}
		if !ok || h.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// allocatableAtLeast: the pod's node has at least the given allocatable.
func allocatableAtLeast(pod string, kv ...string) func(r *specRun) error {
	return func(r *specRun) error {
		n, ok := r.nodeOf(pod)
		if !ok || n.claim == nil {
			return fmt.Errorf("pod %s not on a new node: %s", pod, reasonOf(r.plan, pod))
		}
		if !fits(rl(kv...), n.claim.Allocatable) {
			return fmt.Errorf("pod %s on %s (allocatable %v), want at least %v", pod, n.claim.InstanceType, n.claim.Allocatable, kv)
		}
		return nil
	}
}

// podRequestsAre: the claim's requests (no daemons here) are exactly kv.
func podRequestsAre(pod string, kv ...string) func(r *specRun) error {
	return func(r *specRun) error {
		n, ok := r.nodeOf(pod)
		if !ok || n.claim == nil {
			return fmt.Errorf("pod %s not on a new node: %s", pod, reasonOf(r.plan, pod))
		}
		var errs []error
		for name, want := range rl(kv...) {
			got := n.claim.Requests[name]
			if got.MilliValue() != want.MilliValue() && (name == corev1.ResourceCPU || got.Value() != want.Value()) {
				errs = append(errs, fmt.Errorf("claim requests %s=%s, want %s", name, got.String(), want.String()))
			}
		}
		return errors.Join(append(errs, allocatableAtLeast(pod, kv...)(r))...)
	}
}

func allScheduledOn(claims int) func(r *specRun) error {
	return func(r *specRun) error { return errors.Join(r.scheduled(names(r.in.Pods)...), r.claims(claims)) }
}

func initContainer(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: fmt.Sprintf("init-%d", len(p.Spec.InitContainers)),
			Resources: corev1.ResourceRequirements{Requests: rl(kv...)}})
	}
}

func sidecar(kv ...string) podOpt {
	always := corev1.ContainerRestartPolicyAlways
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: fmt.Sprintf("init-%d", len(p.Spec.InitContainers)),
			RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl(kv...)}})
	}
}

func binpackingCases() []specCase {
	const f = "scheduling/suite_test.go:"
	amd := selector(scheduling.LabelArch, "amd64")
	return []specCase{
		{name: "Binpacking/SmallPodSmallestInstance", src: f + "1522", pods: one("p", requests("memory", "100M")), check: cheapest("p")},
		{name: "Binpacking/SmallPodSmallestPossibleType", src: f + "1534", pods: one("p", requests("memory", "2000M")), check: cheapest("p")},
		// The RuntimeClass admission plugin copies the class's overhead into
		// spec.overhead, which is what the planner reads.
		{name: "Binpacking/RuntimeClassOverhead", src: f + "1546",
			pods:  one("p", requests("cpu", "1"), func(p *corev1.Pod) { p.Spec.Overhead = rl("cpu", "2") }),
			check: allocatableAtLeast("p", "cpu", "3")},
		{name: "Binpacking/SmallPodsShareSmallestType", src: f + "1574", pods: kpods(5, "p", requests("memory", "10M")),
			check: func(r *specRun) error { return errors.Join(r.sameNode(names(r.in.Pods)...), cheapest("p-0")(r)) }},
		// Karpenter's pods are 1.8G on 4Gi nodes (two a node); here 2G pods
		// on m5.large, whose 6903Mi allocatable holds three.
		{name: "Binpacking/NewNodesAtCapacity", src: f + "1593", pools: typePool("m5.large"), pods: kpods(40, "p", amd, requests("memory", "2G")),
			check: allScheduledOn(14)},
		// The 13 full nodes keep room for three 400M pods each.
		{name: "Binpacking/PackSmallAndLargeTogether", src: f + "1613", pools: typePool("m5.large"),
			pods: append(kpods(40, "large", amd, requests("memory", "2G")), kpods(20, "small", amd, requests("memory", "400M"))...), check: allScheduledOn(14)},
		// Types of at most 8 vCPU: the 7-cpu pod fills the largest, the
		// 1-cpu pod gets a smaller one.
		{name: "Binpacking/PackNodesTightly", src: f + "1645",
			pools: []*scheduling.NodePool{specPool("default", req(cpuLabel, lt, "9"))},
			pods:  []*corev1.Pod{kpod("big", requests("cpu", "7")), kpod("small", requests("cpu", "1"))},
			check: func(r *specRun) error {
				err := r.distinctNodes("big", "small")
				if err == nil && r.plan.NodeClaims[0].InstanceType == r.plan.NodeClaims[1].InstanceType {
					err = fmt.Errorf("both nodes are %s, want the small pod on a smaller type", r.plan.NodeClaims[0].InstanceType)
				}
				return err
			}},
		{name: "Binpacking/ZeroQuantityUnknownResource", src: f + "1671",
			pods: one("p", requests("foo.com/weird-resources", "0"), limits("foo.com/weird-resources", "0")), check: sched("p")},
		{name: "Binpacking/ExceedsEveryType", src: f + "1683", pods: one("p", requests("memory", "2Ti")), check: unsched("p")},
		// t3a.small takes 8 pods.
		{name: "Binpacking/NewNodesAtPodLimit", src: f + "1694", pools: typePool("t3a.small"), pods: kpods(25, "p", amd, requests("cpu", "1m", "memory", "1m")),
			check: allScheduledOn(4)},
		{name: "Binpacking/InitContainerRequests", src: f + "1716", pods: one("p", requests("cpu", "1", "memory", "1Gi"), initContainer("cpu", "2", "memory", "1Gi")),
			check: podRequestsAre("p", "cpu", "2", "memory", "1Gi")},
		{name: "Binpacking/InitContainerTooLarge", src: f + "1741", pods: one("p", requests("cpu", "1", "memory", "1Gi"), initContainer("cpu", "2", "memory", "2Ti")),
			check: unsched("p")},
		{name: "Binpacking/ValidTypesRegardlessOfPrice", src: f + "1763", pools: typePool("m5.large", "m5.xlarge", "m5.2xlarge"),
			pods: one("p", limits("cpu", "1m", "memory", "1Mi")), check: func(r *specRun) error {
				if err := r.hasLabel("p", scheduling.LabelInstanceType, "m5.large"); err != nil {
					return err
				}
				n, _ := r.nodeOf("p")
				if fmt.Sprint(n.claim.InstanceTypeOptions) != "[m5.large m5.xlarge m5.2xlarge]" {
					return fmt.Errorf("options %v, want all three types", n.claim.InstanceTypeOptions)
				}
				return nil
			}},
	}
}

func containerResourceCases() []specCase {
	const f = "suite_test.go:"
	main := requests("cpu", "6", "memory", "2Gi")
	return []specCase{
		{name: "Provisioning/Sidecars/InitBeforeSidecar", src: f + "532",
			pods:  one("p", main, initContainer("cpu", "10", "memory", "4Gi"), sidecar("cpu", "4.9", "memory", "2.9Gi")),
			check: podRequestsAre("p", "cpu", "10.9", "memory", "4.9Gi")},
		{name: "Provisioning/Sidecars/SidecarBeforeSmallerInit", src: f + "583",
			pods:  one("p", main, sidecar("cpu", "4.9", "memory", "2.9Gi"), initContainer("cpu", "5", "memory", "1Gi")),
			check: podRequestsAre("p", "cpu", "10.9", "memory", "4.9Gi")},
		{name: "Provisioning/Sidecars/SidecarBeforeLargerInit", src: f + "634",
			pods:  one("p", requests("cpu", "5", "memory", "1Gi"), sidecar("cpu", "4.9", "memory", "2.9Gi"), initContainer("cpu", "6", "memory", "2Gi")),
			check: podRequestsAre("p", "cpu", "10.9", "memory", "4.9Gi")},
		{name: "Provisioning/PodLevelResources", src: f + "685",
			pods: one("p", requests("cpu", "5", "memory", "1Gi"), initContainer("cpu", "6", "memory", "2Gi"), sidecar("cpu", "4", "memory", "2Gi"),
				func(p *corev1.Pod) {
					p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "9.9", "memory", "3.9Gi")}
				}),
			check: podRequestsAre("p", "cpu", "9.9", "memory", "3.9Gi")},
		{name: "Provisioning/Accelerators", src: f + "416",
			pods:  []*corev1.Pod{kpod("nvidia", limits("nvidia.com/gpu", "1")), kpod("neuron", limits("aws.amazon.com/neuron", "1"))},
			check: sched("nvidia", "neuron")},
		{name: "Provisioning/MaxPodsMakesMoreNodes", src: f + "431", pools: typePool("t3a.small"), pods: kpods(9, "p"), check: allScheduledOn(2)},
	}
}

// inflightClaim is a launched claim of the pool with the capacity given,
// as Karpenter's cluster.UpdateNodeClaim puts one in cluster state.
func inflightClaim(name, pool string, capacity ...string) *scheduling.ExistingNode {
	return &scheduling.ExistingNode{Name: name, InFlight: true, Labels: map[string]string{scheduling.LabelNodePool: pool},
		Allocatable: rl("cpu", "0", "memory", "0", "pods", "0"), Capacity: rl(capacity...)}
}

func limitCases() []specCase {
	const f = "suite_test.go:"
	limited := func(kv ...string) []*scheduling.NodePool {
		p := specPool("default")
		p.Limits = rl(kv...)
		return []*scheduling.NodePool{p}
	}
	anti := func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "foo"}
		p.Spec.Affinity = podAff("anti", scheduling.LabelHostname, map[string]string{"app": "foo"})
	}
	return []specCase{
		{name: "ResourceLimits/ExceededByExistingClaim", src: f + "742", pools: limited("cpu", "20"), pods: one("p"),
			edit: func(_ *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{inflightClaim("big", "default", "cpu", "100")}
			},
			check: unsched("p")},
		{name: "ResourceLimits/MetByATwoCPUNode", src: f + "765", pools: limited("cpu", "2"), pods: one("p", requests("cpu", "1.75")), check: sched("p")},
		{name: "ResourceLimits/PartiallySchedule", src: f + "782", pools: limited("cpu", "3"), pods: kpods(2, "p", requests("cpu", "1.5"), anti),
			check: func(r *specRun) error {
				if len(r.plan.Unschedulable) != 1 || r.claims(1) != nil {
					return fmt.Errorf("want one pod placed and one unschedulable")
				}
				return nil
			}},
		{name: "ResourceLimits/WouldBeExceeded", src: f + "832", pools: limited("cpu", "2"), pods: one("p", requests("cpu", "2.1")), check: unsched("p")},
		// Karpenter's only GPU type has more GPUs than the limit; here the
		// pool takes 4-GPU types only and the limit is 3 GPUs.
		{name: "ResourceLimits/WouldBeExceededGPU", src: f + "847", pools: func() []*scheduling.NodePool {
			p := limited("nvidia.com/gpu", "3")
			p[0].Requirements = p[0].Requirements.Add(req("karpenter.k8s.aws/instance-gpu-count", in, "4"))
			return p
		}(), pods: one("p", limits("nvidia.com/gpu", "1")), check: unsched("p")},
		{name: "ResourceLimits/AfterAnEarlierRound", src: f + "863", pools: limited("cpu", "2"), pods: one("second", requests("cpu", "1.75")),
			edit: func(_ *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{inflightClaim("first", "default", "cpu", "2")}
			},
			check: unsched("second")},
		{name: "ResourceLimits/NodeLimit", src: f + "891", pools: limited("nodes", "2"), pods: kpods(3, "p", requests("cpu", "1.5"), anti),
			check: func(r *specRun) error {
				if len(r.plan.Unschedulable) != 1 || r.claims(2) != nil {
					return fmt.Errorf("want two nodes and one pod unschedulable")
				}
				return nil
			}},
	}
}
