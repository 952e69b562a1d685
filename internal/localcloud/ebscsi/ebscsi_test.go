package ebscsi

import (
	"context"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A node gets a CSINode with its type's attachment limit; a claim the
// scheduler placed on it gets a PV in its zone; a released volume goes.
func TestReconcile(t *testing.T) {
	ctx := context.Background()
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{
			corev1.LabelTopologyZone: "us-west-2b", corev1.LabelInstanceTypeStable: "m6i.large"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2b/i-0123"},
	}
	sc := StorageClassName
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "0b7f1c3e-1111-2222-3333-444455556666",
			Annotations: map[string]string{selectedNode: "n1"}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	released := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Annotations: map[string]string{provisionedBy: Driver}},
		Spec:       corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete},
		Status:     corev1.PersistentVolumeStatus{Phase: corev1.VolumeReleased},
	}
	kc := fake.NewClientset(node, claim, released)
	if err := Install(ctx, kc); err != nil {
		t.Fatal(err)
	}
	if err := Reconcile(ctx, kc, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	cn, err := kc.StorageV1().CSINodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil || cn.Spec.Drivers[0].NodeID != "i-0123" || *cn.Spec.Drivers[0].Allocatable.Count != 26 {
		t.Fatalf("CSINode %+v, %v", cn, err)
	}
	pv, err := kc.CoreV1().PersistentVolumes().Get(ctx, "pvc-"+string(claim.UID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions[0]
	if req.Key != corev1.LabelTopologyZone || req.Values[0] != "us-west-2b" || pv.Spec.ClaimRef.Name != "data" ||
		pv.Spec.CSI.Driver != Driver || pv.Spec.Capacity.Storage().String() != "10Gi" {
		t.Errorf("PV %+v", pv.Spec)
	}
	if _, err := kc.CoreV1().PersistentVolumes().Get(ctx, "old", metav1.GetOptions{}); err == nil {
		t.Error("released volume not deleted")
	}
	if AttachLimit("m4.large") != 39 || AttachLimit("c7g.xlarge") != 26 {
		t.Error("attach limits")
	}
}

// Options: only the selected nodes get a CSINode, with the given limit.
func TestReconcileWithOptions(t *testing.T) {
	ctx := context.Background()
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large"}},
			Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-" + name}}
	}
	kc := fake.NewClientset(node("mine"), node("other"))
	o := Options{AttachLimit: func(*corev1.Node) int32 { return 1 }, Nodes: func(n *corev1.Node) bool { return n.Name == "mine" }}
	if err := ReconcileWith(ctx, kc, slog.New(slog.DiscardHandler), o); err != nil {
		t.Fatal(err)
	}
	if cn, err := kc.StorageV1().CSINodes().Get(ctx, "mine", metav1.GetOptions{}); err != nil || *cn.Spec.Drivers[0].Allocatable.Count != 1 {
		t.Errorf("CSINode of mine %+v, %v", cn, err)
	}
	if _, err := kc.StorageV1().CSINodes().Get(ctx, "other", metav1.GetOptions{}); err == nil {
		t.Error("CSINode for a node the driver does not run on")
	}
}
