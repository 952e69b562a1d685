package scheduling_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's "Volume Topology Requirements" (suite_test.go) and
// "VolumeUsage" (scheduling/suite_test.go): PVCs, PVs and storage
// classes as the pod's zone requirements.

func TestKarpenterSpecVolumeTopology(t *testing.T) { runSpec(t, volumeCases()) }

// Karpenter's test storage class: WaitForFirstConsumer in zones 2 and 3.
func zonalClass(name string, binding storagev1.VolumeBindingMode, zoneTerms ...[]string) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &binding}
	for _, zs := range zoneTerms {
		sc.AllowedTopologies = append(sc.AllowedTopologies, corev1.TopologySelectorTerm{
			MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: scheduling.LabelZone, Values: zs}}})
	}
	return sc
}

func claim(name string, sc *string, volume string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: sc, VolumeName: volume}}
}

// volume is a PV whose node affinity is the given terms (each one
// requirement).
func volume(name string, sc string, terms ...corev1.NodeSelectorRequirement) *corev1.PersistentVolume {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{StorageClassName: sc}}
	if len(terms) > 0 {
		pv.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{}}
		for _, t := range terms {
			pv.Spec.NodeAffinity.Required.NodeSelectorTerms = append(pv.Spec.NodeAffinity.Required.NodeSelectorTerms,
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{t}})
		}
	}
	return pv
}

func mountsClaim(claims ...string) podOpt {
	return func(p *corev1.Pod) {
		for i, c := range claims {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i),
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		}
	}
}

func ephemeral(sc string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "eph", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc}}}}})
	}
}

type volumes struct {
	pvs  []*corev1.PersistentVolume
	pvcs []*corev1.PersistentVolumeClaim
	scs  []*storagev1.StorageClass
}

func (v volumes) edit(_ *testing.T, in *scheduling.Input) {
	in.PersistentVolumes, in.PersistentVolumeClaims, in.StorageClasses = v.pvs, v.pvcs, v.scs
}

func volumeCases() []specCase {
	const f = "suite_test.go:"
	const g = "scheduling/suite_test.go:"
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := zonalClass("my-sc", wffc, []string{zone2, zone3})
	scName, empty, missing := "my-sc", "", "missing-storage-class"
	zone := scheduling.LabelZone
	zoneIn := func(z ...string) corev1.NodeSelectorRequirement { return expr(zone, in, z...) }
	hostIn := expr(scheduling.LabelHostname, in, "some-host")
	local := volume("local-pv", "local-path", hostIn)
	local.Spec.Local = &corev1.LocalVolumeSource{Path: "/mnt/data"}
	hostPath := volume("hostpath-pv", "local-path", hostIn)
	hostPath.Spec.HostPath = &corev1.HostPathVolumeSource{Path: "/mnt/data"}
	// two pods, each with its own claim (c0, c1), apart by zone
	twoZonePods := func() []*corev1.Pod {
		ps := kpods(2, "p", podLabels("app", "v"), antiTo(term(zone, map[string]string{"app": "v"})))
		for i, p := range ps {
			mountsClaim(fmt.Sprintf("c%d", i))(p)
		}
		return ps
	}
	twoZones := func(r *specRun) error {
		a, _, err := r.label("p-0", zone)
		b, _, err2 := r.label("p-1", zone)
		if err = errors.Join(err, err2); err != nil {
			return err
		}
		if a == b || (a != zone1 && a != zone2) || (b != zone1 && b != zone2) {
			return fmt.Errorf("zones %s and %s, want %s and %s", a, b, zone1, zone2)
		}
		return nil
	}
	return []specCase{
		{name: "VolumeTopology/InvalidPVC", src: f + "1995", pods: []*corev1.Pod{kpod("invalid", mountsClaim("invalid")), kpod("valid")},
			check: func(r *specRun) error { return errors.Join(r.notScheduled("invalid"), r.scheduled("valid")) }},
		{name: "VolumeTopology/EmptyStorageClassBound", src: f + "2004", pods: one("p", mountsClaim("c")),
			edit:  volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &empty, "test-volume")}, pvs: []*corev1.PersistentVolume{volume("test-volume", "")}}.edit,
			check: sched("p")},
		{name: "VolumeTopology/EmptyStorageClassUnbound", src: f + "2024", pods: one("p", mountsClaim("c")),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &empty, "")}}.edit, check: unsched("p")},
		{name: "VolumeTopology/MissingStorageClassBound", src: f + "2034", pods: one("p", mountsClaim("c")),
			edit:  volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &missing, "test-volume")}, pvs: []*corev1.PersistentVolume{volume("test-volume", missing)}}.edit,
			check: sched("p")},
		{name: "VolumeTopology/MissingStorageClassUnbound", src: f + "2054 (and 2077)", pods: []*corev1.Pod{kpod("p", mountsClaim("c")), kpod("valid")},
			edit:  volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &missing, "")}}.edit,
			check: func(r *specRun) error { return errors.Join(r.notScheduled("p"), r.scheduled("valid")) }},
		{name: "VolumeTopology/InvalidVolumeName", src: f + "2090", pods: []*corev1.Pod{kpod("p", mountsClaim("c")), kpod("valid")},
			edit:  volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", nil, "invalid-volume-name")}}.edit,
			check: func(r *specRun) error { return errors.Join(r.notScheduled("p"), r.scheduled("valid")) }},
		{name: "VolumeTopology/StorageClassZones", src: f + "2103", pods: one("p", mountsClaim("c"), required(zoneIn(zone1, zone3))),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &scName, "")}, scs: []*storagev1.StorageClass{sc}}.edit, check: zoneIs("p", zone3)},
		{name: "VolumeTopology/StorageClassZonesEphemeral", src: f + "2116", pods: one("p", ephemeral(scName), required(zoneIn(zone1, zone3))),
			edit: volumes{scs: []*storagev1.StorageClass{sc}}.edit, check: zoneIs("p", zone3)},
		{name: "VolumeTopology/StorageClassZonesIncompatible", src: f + "2138", pods: one("p", mountsClaim("c"), required(zoneIn(zone1))),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &scName, "")}, scs: []*storagev1.StorageClass{sc}}.edit, check: unsched("p")},
		{name: "VolumeTopology/StorageClassZonesIncompatibleEphemeral", src: f + "2150", pods: one("p", ephemeral(scName), required(zoneIn(zone1))),
			edit: volumes{scs: []*storagev1.StorageClass{sc}}.edit, check: unsched("p")},
		{name: "VolumeTopology/BoundVolumeZones", src: f + "2171", pods: one("p", mountsClaim("c")),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &scName, "pv")}, pvs: []*corev1.PersistentVolume{volume("pv", scName, zoneIn(zone3))},
				scs: []*storagev1.StorageClass{sc}}.edit, check: zoneIs("p", zone3)},
		{name: "VolumeTopology/BoundVolumeZonesEphemeral", src: f + "2182", pods: one("p", ephemeral(scName)),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("p-eph", &scName, "pv")}, pvs: []*corev1.PersistentVolume{volume("pv", scName, zoneIn(zone3))},
				scs: []*storagev1.StorageClass{sc}}.edit, check: zoneIs("p", zone3)},
		{name: "VolumeTopology/LocalVolumeHostnameIgnored", src: f + "2241", pods: one("p", mountsClaim("c")),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", nil, "local-pv")}, pvs: []*corev1.PersistentVolume{local}}.edit, check: sched("p")},
		{name: "VolumeTopology/HostPathVolumeHostnameIgnored", src: f + "2242", pods: one("p", mountsClaim("c")),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", nil, "hostpath-pv")}, pvs: []*corev1.PersistentVolume{hostPath}}.edit, check: sched("p")},
		{name: "VolumeTopology/NonLocalVolumeHostnameKept", src: f + "2290", pods: one("p", mountsClaim("c")),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &scName, "pv")}, pvs: []*corev1.PersistentVolume{volume("pv", scName, hostIn)},
				scs: []*storagev1.StorageClass{sc}}.edit, check: unsched("p")},
		{name: "VolumeTopology/BoundVolumeZonesIncompatible", src: f + "2317", pods: one("p", mountsClaim("c"), required(zoneIn(zone1))),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &scName, "pv")}, pvs: []*corev1.PersistentVolume{volume("pv", scName, zoneIn(zone3))},
				scs: []*storagev1.StorageClass{sc}}.edit, check: unsched("p")},
		{name: "VolumeTopology/VolumeZoneNotRelaxed", src: f + "2353", pods: one("p", mountsClaim("c"), preferred(1, zoneIn(zone1))),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &scName, "pv")}, pvs: []*corev1.PersistentVolume{volume("pv", scName, zoneIn(zone3))},
				scs: []*storagev1.StorageClass{sc}}.edit, check: zoneIs("p", zone3)},
		{name: "VolumeUsage/NFSVolume", src: g + "3009", pods: one("p", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "nfs", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "fs", Path: "/"}}}}
		}), check: sched("p")},
		{name: "VolumeUsage/PVWithMultipleZones", src: g + "3047", pods: twoZonePods(),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c0", &scName, "pv0"), claim("c1", &scName, "pv1")},
				pvs: []*corev1.PersistentVolume{volume("pv0", scName, zoneIn(zone1), zoneIn(zone2)), volume("pv1", scName, zoneIn(zone1), zoneIn(zone2))},
				scs: []*storagev1.StorageClass{sc}}.edit, check: twoZones},
		{name: "VolumeUsage/StorageClassWithMultipleZones", src: g + "3118", pods: twoZonePods(),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c0", &scName, ""), claim("c1", &scName, "")},
				scs: []*storagev1.StorageClass{zonalClass(scName, wffc, []string{zone1}, []string{zone2})}}.edit, check: twoZones},
		{name: "VolumeUsage/UnboundImmediateVolume", src: g + "3662", pods: one("p", mountsClaim("c")),
			edit: volumes{pvcs: []*corev1.PersistentVolumeClaim{claim("c", &scName, "")},
				scs: []*storagev1.StorageClass{zonalClass(scName, storagev1.VolumeBindingImmediate, []string{zone1})}}.edit, check: unsched("p")},
		{name: "VolumeUsage/DeletingClaim", src: g + "3684", pods: one("p", mountsClaim("c")),
			edit: func(t *testing.T, in *scheduling.Input) {
				c := claim("c", &scName, "")
				now := metav1.NewTime(epoch)
				c.DeletionTimestamp = &now
				volumes{pvcs: []*corev1.PersistentVolumeClaim{c}, scs: []*storagev1.StorageClass{sc}}.edit(t, in)
			}, check: unsched("p")},
	}
}
