package scheduling_test

import (
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Hand-checked cases about NodePools and the nodes already there: DaemonSet
// overhead, limits, minValues, weights, existing and in-flight nodes,
// extended resources.

func TestDaemonSetOverheadPerInstanceType(t *testing.T) {
	// A 1-cpu daemon runs only on amd64 nodes, so a 1.5-cpu pod fits a
	// 2-cpu arm64 node but not a 2-cpu amd64 one.
	ds := mkPod(podOpts{name: "ds", cpu: "1", nodeSelector: map[string]string{scheduling.LabelArch: "amd64"}})
	in := input(pods(1, podOpts{cpu: "1500m"}))
	in.DefaultInstanceTypes = []*scheduling.InstanceType{
		mkType("c.large", 2, 4, 20, "amd64", 0.05), mkType("g.large", 2, 4, 20, "arm64", 0.09), mkType("c.xlarge", 4, 8, 40, "amd64", 0.20)}
	in.DaemonSets = []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "amd-agent", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: ds.Spec}}}}
	plan := mustSolve(t, in)
	expect(t, plan, "g.large/zone-a/on-demand:default/p0")
	// On c.xlarge the daemon's share is part of the claim's requests.
	in.Pods = pods(1, podOpts{cpu: "2500m"})
	plan = mustSolve(t, in)
	expect(t, plan, "c.xlarge/zone-a/on-demand:default/p0")
	if q := plan.NodeClaims[0].Requests[corev1.ResourceCPU]; q.String() != "3500m" {
		t.Errorf("claim requests cpu %s, want pod + daemon = 3500m", q.String())
	}
}

func TestNodePoolLimits(t *testing.T) {
	types := []*scheduling.InstanceType{mkType("s", 2, 8, 20, "amd64", 0.10), mkType("l", 4, 16, 40, "amd64", 0.20)}
	// Limit 8 cpu; the first claim holds two 1.5-cpu pods (only "l" fits 3
	// cpu) and reserves 4; the second does the same; the fifth pod finds the
	// limit exhausted.
	pool := odOnly(&scheduling.NodePool{Name: "default", Limits: rl("cpu", "8")})
	in := input(pods(5, podOpts{cpu: "1500m"}), pool)
	in.DefaultInstanceTypes = types
	plan := mustSolve(t, in)
	if len(plan.NodeClaims) != 2 || len(plan.Unschedulable) != 1 {
		t.Fatalf("limits: %v", summary(plan))
	}
	if r := plan.Unschedulable[0].Reason; !strings.Contains(r, "limits exhausted") {
		t.Errorf("reason %q", r)
	}
	// Existing capacity of the pool counts: a 4-cpu node leaves room for one claim.
	in.Nodes = []*scheduling.ExistingNode{{Name: "old", Initialized: true, Labels: map[string]string{scheduling.LabelNodePool: "default"},
		Allocatable: rl("cpu", "4", "memory", "1Gi", "pods", "0"), Capacity: rl("cpu", "4")}}
	plan = mustSolve(t, in)
	if len(plan.NodeClaims) != 1 || len(plan.Unschedulable) != 3 {
		t.Errorf("limits with existing capacity: %v", summary(plan))
	}
}

func TestMinValues(t *testing.T) {
	fam := req("karpenter.k8s.aws/instance-family", exists)
	fam.MinValues = 2
	pool := odOnly(&scheduling.NodePool{Name: "default", Requirements: scheduling.NewRequirements(fam)})
	in := input(pods(1, podOpts{cpu: "1"}), pool)
	in.DefaultInstanceTypes = []*scheduling.InstanceType{
		mkType("a.large", 2, 4, 20, "amd64", 0.05), mkType("b.large", 2, 4, 20, "amd64", 0.07), mkType("b.xlarge", 4, 8, 20, "amd64", 0.14)}
	plan := mustSolve(t, in)
	expect(t, plan, "a.large/zone-a/on-demand:default/p0")
	if !reflect.DeepEqual(plan.NodeClaims[0].InstanceTypeOptions, []string{"a.large", "b.large", "b.xlarge"}) || plan.NodeClaims[0].MinValues["karpenter.k8s.aws/instance-family"] != 2 {
		t.Errorf("options %v minValues %v", plan.NodeClaims[0].InstanceTypeOptions, plan.NodeClaims[0].MinValues)
	}
	// A 3-cpu pod only fits family b: minValues cannot be met.
	in.Pods = pods(1, podOpts{cpu: "3"})
	plan = mustSolve(t, in)
	expect(t, plan, "unschedulable default/p0")
	if r := reasonOf(plan, "p0"); !strings.Contains(r, "minValues") {
		t.Errorf("reason %q", r)
	}
}

func TestWeightsOrderPools(t *testing.T) {
	arm := odOnly(&scheduling.NodePool{Name: "arm", Weight: 10, Requirements: scheduling.NewRequirements(req(scheduling.LabelArch, in, "arm64"))})
	general := odOnly(&scheduling.NodePool{Name: "general"})
	// 1.5 cpu each, so repacking cannot fold one claim into the other.
	ps := []*corev1.Pod{mkPod(podOpts{name: "any", cpu: "1500m"}), mkPod(podOpts{name: "x86", cpu: "1500m", nodeSelector: map[string]string{scheduling.LabelArch: "amd64"}, seq: 1})}
	plan := mustSolve(t, input(ps, general, arm))
	expect(t, plan, "g.large/zone-a/on-demand:default/any", "c.large/zone-a/on-demand:default/x86")
	for _, c := range plan.NodeClaims {
		want := map[string]string{"default/any": "arm", "default/x86": "general"}[c.Pods[0]]
		if c.NodePool != want {
			t.Errorf("%s from %s, want %s", c.Pods[0], c.NodePool, want)
		}
	}
}

func TestExistingNodesFirstAndEphemeralTaints(t *testing.T) {
	in := input(pods(2, podOpts{cpu: "1"}))
	in.Nodes = []*scheduling.ExistingNode{existing("n1", "zone-a", "1500m")}
	expect(t, mustSolve(t, in), "node n1:default/p0", "g.large/zone-a/on-demand:default/p1")
	// An uninitialized (in-flight) node's not-ready taint is ignored; an
	// initialized node's is not.
	notReady := []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
	n := existing("n1", "zone-a", "4")
	n.Taints, n.Initialized = notReady, false
	in = input(pods(1, podOpts{cpu: "1"}))
	in.Nodes = []*scheduling.ExistingNode{n}
	expect(t, mustSolve(t, in), "node n1:default/p0")
	n.Initialized = true
	expect(t, mustSolve(t, in), "g.large/zone-a/on-demand:default/p0")
}

func TestExtendedResources(t *testing.T) {
	gpu := mkType("g5.xlarge", 4, 16, 58, "amd64", 1.00)
	gpu.Allocatable["nvidia.com/gpu"] = rl("x", "1")["x"]
	gpu.Labels["karpenter.k8s.aws/instance-gpu-count"] = "1"
	p := mkPod(podOpts{name: "train", cpu: "1"})
	p.Spec.Containers[0].Resources.Limits = rl("nvidia.com/gpu", "1")
	in := input([]*corev1.Pod{p})
	in.DefaultInstanceTypes = append(testTypes(), gpu)
	plan := mustSolve(t, in)
	expect(t, plan, "g5.xlarge/zone-a/on-demand:default/train")
	if q := plan.NodeClaims[0].Allocatable["nvidia.com/gpu"]; q.String() != "1" {
		t.Errorf("allocatable must list the GPU: %v", plan.NodeClaims[0].Allocatable)
	}
	// Two GPUs fit nowhere; the reason says what is short.
	p2 := mkPod(podOpts{name: "big", cpu: "1"})
	p2.Spec.Containers[0].Resources.Limits = rl("nvidia.com/gpu", "2")
	in.Pods = []*corev1.Pod{p2}
	plan = mustSolve(t, in)
	expect(t, plan, "unschedulable default/big")
	if r := reasonOf(plan, "big"); !strings.Contains(r, "nvidia.com/gpu") {
		t.Errorf("reason %q", r)
	}
}

func TestStartupTaintsOnUninitializedNodes(t *testing.T) {
	n := existing("n1", "zone-a", "4")
	cilium := corev1.Taint{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	n.Taints, n.StartupTaints, n.Initialized = []corev1.Taint{cilium}, []corev1.Taint{cilium}, false
	in := input(pods(1, podOpts{cpu: "1"}))
	in.Nodes = []*scheduling.ExistingNode{n}
	expect(t, mustSolve(t, in), "node n1:default/p0")
	n.Initialized = true
	expect(t, mustSolve(t, in), "g.large/zone-a/on-demand:default/p0")
}

func TestInFlightNodeReservesDaemonOverhead(t *testing.T) {
	// An in-flight 2-cpu claim whose 1-cpu daemon has not started yet: only
	// 1 cpu is free for pending pods, so the second 1-cpu pod needs a new node.
	ds := mkPod(podOpts{name: "ds", cpu: "1"})
	n := existing("inflight-1", "zone-a", "2")
	n.Initialized, n.InFlight = false, true
	in := input(pods(2, podOpts{cpu: "1"}))
	in.Nodes = []*scheduling.ExistingNode{n}
	in.DaemonSets = []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", UID: "ds-uid"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: ds.Spec}}}}
	in.DefaultInstanceTypes = []*scheduling.InstanceType{mkType("c.xlarge", 4, 8, 40, "amd64", 0.20)}
	expect(t, mustSolve(t, in), "node inflight-1:default/p0", "c.xlarge/zone-a/on-demand:default/p1")
	// Once the daemon pod is there it is counted as a pod, not reserved twice.
	running := mkPod(podOpts{name: "agent-x", cpu: "1"})
	running.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", UID: "ds-uid"}}
	n.Pods = []*corev1.Pod{running}
	expect(t, mustSolve(t, in), "node inflight-1:default/p0", "c.xlarge/zone-a/on-demand:default/p1")
}
