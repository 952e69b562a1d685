package provisioning_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/kubelet"
)

// A pod of security groups for pods (it asks for vpc.amazonaws.com/pod-eni,
// as the VPC resource controller's webhook makes it) gets a node of a type
// with branch interfaces (m5.large, not the cheaper t3.large, which has no
// ENI trunking), whose emulated kubelet and VPC resource controller report
// pod-eni, and the kube-scheduler runs it there.
func TestPodENIPodRunsEndToEnd(t *testing.T) {
	h := newHarness(t, poolSpec{types: `["t3.large","m5.large"]`})
	p := h.pod("sgp", 0, "100m")
	one := resource.MustParse("1")
	p.Spec.Containers[0].Resources.Requests[catalog.ResourcePodENI] = one
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{catalog.ResourcePodENI: one}
	if _, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).Create(h.ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := h.run(h.deps(nil))
	cls := h.claims()
	if len(res.Launched) != 1 || len(cls) != 1 {
		t.Fatalf("launched %v, claims %d", res.Launched, len(cls))
	}
	if typ := cls[0].Labels[catalog.LabelInstanceType]; typ != "m5.large" {
		t.Fatalf("claim of type %q, want m5.large (t3.large has no branch interfaces)", typ)
	}
	var node *corev1.Node
	h.eventually("node registration", 30*time.Second, func() (bool, string) {
		nodes, err := h.cloud.KubeClient.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for i := range nodes.Items {
			if nodes.Items[i].Spec.ProviderID == cls[0].Status.ProviderID {
				node = &nodes.Items[i]
				return true, ""
			}
		}
		return false, "no node with providerID " + cls[0].Status.ProviderID
	})
	if q := node.Status.Allocatable[catalog.ResourcePodENI]; q.Value() != 9 || node.Labels[kubelet.HasTrunkAttachedLabel] != "true" {
		t.Errorf("node pod-eni allocatable %s, %s=%q; want 9, true", q.String(), kubelet.HasTrunkAttachedLabel, node.Labels[kubelet.HasTrunkAttachedLabel])
	}
	// What the lifecycle does on registration; then the pod runs there.
	if _, err := h.kube.RemoveTaints(h.ctx, node.Name, apis.UnregisteredTaintKey, ""); err != nil {
		t.Fatal(err)
	}
	h.eventually("the pod-eni pod running on the new node", 60*time.Second, func() (bool, string) {
		got, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).Get(h.ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if got.Spec.NodeName != node.Name || got.Status.Phase != corev1.PodRunning {
			return false, fmt.Sprintf("on %q phase %s", got.Spec.NodeName, got.Status.Phase)
		}
		return true, ""
	})
}
