package state_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/state"
)

// A node whose CSINode allows one EBS volume, attached by its pod's claim:
// a pending pod with a claim of its own gets a new node; without the
// CSINode it goes to the node.
func TestCSINodeAttachLimitReachesTheSolver(t *testing.T) {
	cfg, cat := loadConfig(t, nil), builtin(t)
	const driver = "ebs.csi.aws.com"
	sc := "gp3"
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	mount := func(p *corev1.Pod, claim string) *corev1.Pod {
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		return p
	}
	pvc := func(name, volume string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, VolumeName: volume}}
	}
	count := int32(1)
	for _, withCSINode := range []bool{false, true} {
		snap := snapshot([]*corev1.Pod{mount(pendingPod("new", "100m"), "c1")}, []*corev1.Node{registeredNode("n1", "us-west-2a", "i-1")},
			mount(boundPod("b0", "n1", "100m"), "c0"))
		snap.StorageClasses = []*storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: sc}, Provisioner: driver, VolumeBindingMode: &wffc}}
		snap.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{pvc("c0", "pv0"), pvc("c1", "")}
		snap.PersistentVolumes = []*corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv0"}, Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-0"}}}}}
		if withCSINode {
			snap.CSINodes = []*storagev1.CSINode{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
				{Name: driver, NodeID: "i-1", Allocatable: &storagev1.VolumeNodeResources{Count: &count}},
				{Name: "efs.csi.aws.com", NodeID: "i-1"}}}}}
		}
		c, err := state.Build(state.Sources{Snapshot: snap, Config: cfg, Catalog: cat})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Nodes[0].Existing().VolumeLimits; withCSINode != (len(got) == 1 && got[driver] == 1) {
			t.Errorf("CSINode %v: volume limits %v", withCSINode, got)
		}
		plan := solve(t, c, state.InputOptions{})
		if onNode := len(plan.ExistingNodes) == 1 && len(plan.NodeClaims) == 0; onNode == withCSINode {
			t.Errorf("CSINode %v: existing %+v, %d new claims", withCSINode, plan.ExistingNodes, len(plan.NodeClaims))
		}
	}
}
