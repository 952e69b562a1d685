package provisioning_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/ebscsi"
)

// A node at its EBS attach limit (the simulated driver's CSINode allows one
// volume on this test's nodes) runs a pod with a volume; a second pod with
// a claim of its own fits the node's CPU and memory but not its volumes:
// the kube-scheduler finds it unschedulable, nodewright launches a second
// node instead of planning it onto the full one, and the pod runs there.
func TestPVCPodAtAttachLimitGetsANewNode(t *testing.T) {
	h := newHarness(t, poolSpec{types: `["m5.large"]`})
	startEBSCSI(t, h, 1)
	first := h.runVolumePod("vol-a")
	node1 := h.volumePodRunning(first)
	h.eventually("the CSINode of "+node1, 30*time.Second, func() (bool, string) {
		cn, err := h.cloud.KubeClient.StorageV1().CSINodes().Get(h.ctx, node1, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(cn.Spec.Drivers) == 1 && *cn.Spec.Drivers[0].Allocatable.Count == 1, fmt.Sprintf("%+v", cn.Spec.Drivers)
	})
	second := h.runVolumePod("vol-b")
	if node2 := h.volumePodRunning(second); node2 == node1 {
		t.Fatalf("pod %s runs on the full node %s", second.Name, node1)
	}
	if n := len(h.claims()); n != 2 {
		t.Errorf("%d claims, want 2", n)
	}
}

// startEBSCSI runs the simulated EBS CSI driver on this test's nodes, each
// of which may attach limit volumes, until the test ends.
func startEBSCSI(t *testing.T, h *harness, limit int32) {
	t.Helper()
	if err := ebscsi.Install(h.ctx, h.cloud.KubeClient); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	o := ebscsi.Options{
		AttachLimit: func(*corev1.Node) int32 { return limit },
		Nodes:       func(n *corev1.Node) bool { return n.Labels["nodewright.io/test"] == h.pool },
	}
	go func() {
		defer close(done)
		ebscsi.RunWith(ctx, h.cloud.KubeClient, 200*time.Millisecond, slog.New(slog.NewJSONHandler(h.logs, nil)), o)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// runVolumePod creates a pod of app with a gp3 claim of its own, waits for
// the scheduler to find it unschedulable, runs the provisioner and checks
// that it launched one node.
func (h *harness) runVolumePod(app string) *corev1.Pod {
	h.t.Helper()
	sc := ebscsi.StorageClassName
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + app, Namespace: h.ns},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := h.cloud.KubeClient.CoreV1().PersistentVolumeClaims(h.ns).Create(h.ctx, claim, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	p := h.pod(app, 0, "100m")
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}}}
	created, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).Create(h.ctx, p, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	cloudtest.WaitUnschedulable(h.ctx, h.t, h.cloud.KubeClient, h.ns, "app="+app, 1, 30*time.Second)
	if res := h.run(h.deps(nil)); len(res.Launched) != 1 {
		h.t.Fatalf("pod %s: launched %v, want one node", p.Name, res.Launched)
	}
	return created
}

// volumePodRunning lifts the unregistered taint of every registered node of
// the test's claims (what the lifecycle does) until the pod runs, and
// returns its node.
func (h *harness) volumePodRunning(p *corev1.Pod) string {
	h.t.Helper()
	var node string
	h.eventually("pod "+p.Name+" running", 90*time.Second, func() (bool, string) {
		h.registerNodes()
		got, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).Get(h.ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = got.Spec.NodeName
		return node != "" && got.Status.Phase == corev1.PodRunning, fmt.Sprintf("on %q phase %s", node, got.Status.Phase)
	})
	return node
}

func (h *harness) registerNodes() {
	h.t.Helper()
	nodes, err := h.cloud.KubeClient.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{LabelSelector: "nodewright.io/test=" + h.pool})
	if err != nil {
		h.t.Fatal(err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		for _, tn := range n.Spec.Taints {
			if tn.Key == apis.UnregisteredTaintKey {
				if _, err := h.kube.RemoveTaints(h.ctx, n.Name, apis.UnregisteredTaintKey, ""); err != nil {
					h.t.Fatal(err)
				}
			}
		}
	}
}
