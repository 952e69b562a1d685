package scheduling_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's "VolumeUsage" cases on CSI attach limits
// (scheduling/suite_test.go): an existing node whose CSINode limits a
// driver takes a pending pod only while the pod's new claims fit under the
// limit; past it, the pod gets a new node (which has no limit).

func TestKarpenterSpecVolumeLimits(t *testing.T) { runSpec(t, volumeLimitCases()) }

const ebsDriver = "ebs.csi.aws.com"

// limitedNode is an initialized node of the default pool (m5.4xlarge in
// zone 1) whose CSINode gives the limits (driver, count, ...), with pods.
func limitedNode(t *testing.T, in *scheduling.Input, limits map[string]int, ps ...*corev1.Pod) *scheduling.ExistingNode {
	n := claimNode(t, in, "n1", "m5.4xlarge", zone1, ps...)
	n.InFlight, n.Initialized, n.VolumeLimits = false, true, limits
	return n
}

func ephemeralNamed(name, sc string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc}}}}})
	}
}

func classOf(name, provisioner string) *storagev1.StorageClass {
	sc := zonalClass(name, storagev1.VolumeBindingWaitForFirstConsumer, []string{zone1})
	sc.Provisioner = provisioner
	return sc
}

// onNodeCount: exactly n of the pods are on the named existing node.
func onNodeCount(r *specRun, node string, pods []*corev1.Pod, n int) error {
	got := 0
	for _, p := range pods {
		if nd, ok := r.nodeOf(p.Name); ok && nd.name == node {
			got++
		}
	}
	if got != n {
		return fmt.Errorf("%d pods on %s, want %d", got, node, n)
	}
	return nil
}

// ephemeralOnLimitedNode is Karpenter's shape of the ephemeral cases: the
// node already attaches the initial pod's ephemeral claim of class sc, its
// limit for driver is 1, and a new pod's ephemeral claim of the same class
// (created by the ephemeral volume controller, with the class the API
// server's DefaultStorageClass admission gave it) needs a new node.
func ephemeralOnLimitedNode(name, src string, scs []*storagev1.StorageClass, sc string, limits map[string]int) specCase {
	return specCase{name: name, src: src, pods: one("p", ephemeralNamed("tmp-ephemeral", sc)),
		edit: func(t *testing.T, in *scheduling.Input) {
			initial := kpod("initial", ephemeralNamed("tmp-ephemeral", sc))
			in.Nodes = []*scheduling.ExistingNode{limitedNode(t, in, limits, initial)}
			volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("initial-tmp-ephemeral", &sc, ""), claim("p-tmp-ephemeral", &sc, "")},
				scs: scs}.edit(t, in)
		}, check: newNodeFor("p")}
}

func volumeLimitCases() []specCase {
	const g = "scheduling/suite_test.go:"
	myClass := classOf("my-storage-class", ebsDriver)
	scName := myClass.Name
	otherDefault := classOf("default-storage-class", "other-provider")
	inTree := classOf("in-tree-storage-class", "kubernetes.io/aws-ebs")
	inTreeName := inTree.Name
	// six pods, each with two claims of their own
	sixPods := make([]*corev1.Pod, 6)
	var sixClaims []*corev1.PersistentVolumeClaim
	for i := range sixPods {
		a, b := fmt.Sprintf("my-claim-a-%d", i), fmt.Sprintf("my-claim-b-%d", i)
		sixPods[i] = kpod(fmt.Sprintf("p-%d", i), mountsClaim(a, b))
		sixClaims = append(sixClaims, claim(a, &scName, ""), claim(b, &scName, ""))
	}
	shared := kpods(100, "s", mountsClaim("my-claim"))
	sharedPV := volume("my-volume", scName, expr(scheduling.LabelZone, in, zone1))
	sharedPV.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: ebsDriver, VolumeHandle: "vol-shared"}
	inTreePV := volume("my-volume", inTreeName, expr(scheduling.LabelZone, in, zone1))
	inTreePV.Spec.AWSElasticBlockStore = &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-0123"}
	return []specCase{
		{name: "VolumeUsage/LaunchMultipleNodesForVolumeLimits", src: g + "2903", pods: sixPods,
			edit: func(t *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{limitedNode(t, in, map[string]int{ebsDriver: 10}, kpod("initial"))}
				volumes{pvcs: sixClaims, scs: []*storagev1.StorageClass{myClass}}.edit(t, in)
			},
			// ten volumes: five pods on the node, the sixth on a new one
			check: func(r *specRun) error {
				return errors.Join(onNodeCount(r, "n1", sixPods, 5), r.claims(1), r.scheduled(names(sixPods)...))
			}},
		// Karpenter's PV is of another driver than the limited one; here it
		// is of the limited driver, so the case also shows that one claim
		// counts once however many pods mount it.
		{name: "VolumeUsage/SingleNodeForSamePVC", src: g + "2955", pods: shared,
			edit: func(t *testing.T, in *scheduling.Input) {
				in.Nodes = []*scheduling.ExistingNode{limitedNode(t, in, map[string]int{ebsDriver: 10}, kpod("initial"))}
				volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("my-claim", &scName, "my-volume")},
					pvs: []*corev1.PersistentVolume{sharedPV}, scs: []*storagev1.StorageClass{myClass}}.edit(t, in)
			},
			check: func(r *specRun) error { return errors.Join(onNodeCount(r, "n1", shared, 100), r.claims(0)) }},
		ephemeralOnLimitedNode("VolumeUsage/EphemeralVolumeSpecifiedStorageClass", g+"3204",
			[]*storagev1.StorageClass{myClass, otherDefault}, scName, map[string]int{ebsDriver: 1, "other-provider": 10}),
		ephemeralOnLimitedNode("VolumeUsage/EphemeralVolumeDefaultStorageClass", g+"3318",
			[]*storagev1.StorageClass{myClass}, scName, map[string]int{ebsDriver: 1}),
		// Karpenter's initial claim is unbound and its in-tree PV stands
		// apart; here the claim is bound to it, so the PV's in-tree EBS
		// source is what resolves the driver.
		{name: "VolumeUsage/CSIMigration/NonDynamicPVC", src: g + "3899", pods: one("p", mountsClaim("pvc2")),
			edit: func(t *testing.T, in *scheduling.Input) {
				initial := kpod("initial", mountsClaim("pvc1"))
				in.Nodes = []*scheduling.ExistingNode{limitedNode(t, in, map[string]int{ebsDriver: 1}, initial)}
				volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("pvc1", &inTreeName, "my-volume"), claim("pvc2", &inTreeName, "")},
					pvs: []*corev1.PersistentVolume{inTreePV}, scs: []*storagev1.StorageClass{inTree}}.edit(t, in)
			}, check: newNodeFor("p")},
		ephemeralOnLimitedNode("VolumeUsage/CSIMigration/EphemeralVolume", g+"3958",
			[]*storagev1.StorageClass{inTree}, inTreeName, map[string]int{ebsDriver: 1}),
	}
}
