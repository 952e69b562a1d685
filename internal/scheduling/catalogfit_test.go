package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// onRealCatalogs runs f on the embedded catalog and on the shared aws-data
// one (1,373 types, c7g.medium among them), which skips where absent.
func onRealCatalogs(t *testing.T, f func(t *testing.T, cat *catalog.Catalog)) {
	t.Run("embedded", func(t *testing.T) {
		cat, err := catalog.Builtin("us-east-1")
		if err != nil {
			t.Fatal(err)
		}
		f(t, cat)
	})
	t.Run("shared", func(t *testing.T) { f(t, sharedCatalog(t)) })
}

// poolOver is an on-demand pool over the catalog's types that pass keep.
func poolOver(t *testing.T, cat *catalog.Catalog, keep func(*catalog.InstanceType) bool, pods []*corev1.Pod) *scheduling.Input {
	t.Helper()
	its, err := scheduling.InstanceTypesFromCatalog(cat.Filter(keep), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := odOnly(&scheduling.NodePool{Name: "default"})
	return &scheduling.Input{Pods: pods, NodePools: []*scheduling.NodePool{pool}, DefaultInstanceTypes: its}
}

// A pod whose spec.resources asks 6 CPU and 12Gi over a small container is
// never planned onto a type with fewer than 6 vCPU or 12Gi (before, the
// pod-level requests were ignored and a 1-vCPU c7g.medium was chosen).
func TestPodLevelResourcesChooseABigEnoughType(t *testing.T) {
	onRealCatalogs(t, func(t *testing.T, cat *catalog.Catalog) {
		p := mkPod(podOpts{name: "big", cpu: "100m", mem: "128Mi"})
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "6", "memory", "12Gi")}
		in := poolOver(t, cat, func(it *catalog.InstanceType) bool { return it.Family == "c7g" }, []*corev1.Pod{p})
		plan := mustSolve(t, in)
		if len(plan.NodeClaims) != 1 || len(plan.Unschedulable) != 0 {
			t.Fatalf("plan %v", summary(plan))
		}
		for _, n := range plan.NodeClaims[0].InstanceTypeOptions {
			it, _ := cat.Get(n)
			if it.VCPU < 6 || it.MemoryMiB < 12<<10 {
				t.Errorf("option %s has %d vCPU, %d MiB: the pod asks 6 CPU, 12Gi", n, it.VCPU, it.MemoryMiB)
			}
		}
	})
}

// A pod asking for vpc.amazonaws.com/pod-eni (security groups for pods)
// lands on a type with branch interfaces, never on one without (t3 has no
// ENI trunking), and stays pending where the pool has none.
func TestPodENIPodsNeedATrunkingType(t *testing.T) {
	onRealCatalogs(t, func(t *testing.T, cat *catalog.Catalog) {
		sgp := func() *corev1.Pod {
			p := mkPod(podOpts{name: "sgp", cpu: "100m", mem: "128Mi"})
			p.Spec.Containers[0].Resources.Requests[catalog.ResourcePodENI] = resource.MustParse("1")
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{catalog.ResourcePodENI: resource.MustParse("1")}
			return p
		}
		mixed := func(it *catalog.InstanceType) bool { return it.Name == "t3.large" || it.Name == "m5.large" }
		plan := mustSolve(t, poolOver(t, cat, mixed, []*corev1.Pod{sgp()}))
		if len(plan.NodeClaims) != 1 || len(plan.Unschedulable) != 0 {
			t.Fatalf("plan %v", summary(plan))
		}
		if opts := plan.NodeClaims[0].InstanceTypeOptions; len(opts) != 1 || opts[0] != "m5.large" {
			t.Errorf("options %v, want only m5.large (9 branch interfaces)", opts)
		}
		t3 := func(it *catalog.InstanceType) bool { return it.Family == "t3" }
		if plan := mustSolve(t, poolOver(t, cat, t3, []*corev1.Pod{sgp()})); len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 1 {
			t.Errorf("t3 only: plan %v, want the pod unschedulable", summary(plan))
		}
	})
}
