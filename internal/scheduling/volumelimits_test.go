package scheduling_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// attachWorld is a node n1 that attaches two EBS volumes (claims c0, c1 of
// bound pods b0, b1) and pending pods: "new" with a claim of its own,
// "shared" mounting c0, "plain" without volumes, "efs" with a claim of a
// driver the node does not limit.
func attachWorld(t *testing.T, limits map[string]int, digest bool) *scheduling.Input {
	t.Helper()
	gp3, efs := classOf("gp3", ebsDriver), classOf("efs", "efs.csi.aws.com")
	var pvs []*corev1.PersistentVolume
	for _, n := range []string{"pv0", "pv1"} {
		pv := volume(n, gp3.Name, expr(scheduling.LabelZone, in, zone1))
		pv.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: ebsDriver, VolumeHandle: "vol-" + n}
		pvs = append(pvs, pv)
	}
	pending := []*corev1.Pod{kpod("new", mountsClaim("c2")), kpod("shared", mountsClaim("c0")), kpod("plain"), kpod("efs", mountsClaim("c3"))}
	in := &scheduling.Input{Pods: pending, NodePools: []*scheduling.NodePool{specPool("default")}, DefaultInstanceTypes: specTypes(t)}
	n := limitedNode(t, in, limits, kpod("b0", mountsClaim("c0")), kpod("b1", mountsClaim("c1")))
	if digest {
		n.Digest = scheduling.DigestNode(n, nil)
	}
	in.Nodes = []*scheduling.ExistingNode{n}
	in.PersistentVolumes, in.StorageClasses = pvs, []*storagev1.StorageClass{gp3, efs}
	in.PersistentVolumeClaims = []*corev1.PersistentVolumeClaim{claim("c0", &gp3.Name, "pv0"), claim("c1", &gp3.Name, "pv1"),
		claim("c2", &gp3.Name, ""), claim("c3", &efs.Name, "")}
	return in
}

func solveSpec(t *testing.T, in *scheduling.Input) *specRun {
	t.Helper()
	plan, err := scheduling.Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if errs := planErrors(in, plan); len(errs) > 0 {
		t.Errorf("invalid plan: %s", strings.Join(errs, "; "))
	}
	return &specRun{in: in, plan: plan}
}

// A node at its EBS attach limit takes no pod with a new EBS claim: that
// pod gets a new node. Pods whose claims are attached there already, pods
// without volumes and pods of other drivers still go to the node.
func TestAttachLimitSendsNewClaimToNewNode(t *testing.T) {
	for _, digest := range []bool{false, true} {
		r := solveSpec(t, attachWorld(t, map[string]int{ebsDriver: 2}, digest))
		if err := onNode("n1", "shared", "plain", "efs")(r); err != nil {
			t.Errorf("digest %v: %v", digest, err)
		}
		if err := newNodeFor("new")(r); err != nil {
			t.Errorf("digest %v: %v", digest, err)
		}
	}
}

// Without a CSINode (an in-flight claim, a node whose driver has not
// registered) nothing limits the node, as in Karpenter; neither does a
// limit with room left. A limit of 0 on the other driver sends only that
// driver's pod away.
func TestAttachLimitOnlyWhereReached(t *testing.T) {
	for _, c := range []struct {
		limits   map[string]int
		on, away []string
	}{
		{nil, []string{"new", "shared", "plain", "efs"}, nil},
		{map[string]int{ebsDriver: 3}, []string{"new", "shared", "plain", "efs"}, nil},
		{map[string]int{"efs.csi.aws.com": 0}, []string{"new", "shared", "plain"}, []string{"efs"}},
	} {
		r := solveSpec(t, attachWorld(t, c.limits, false))
		if err := errors.Join(onNode("n1", c.on...)(r), newNodeFor(c.away...)(r)); err != nil {
			t.Errorf("limits %v: %v", c.limits, err)
		}
	}
}

// Pods of one shape (a StatefulSet's replicas, one claim each) fill a node
// up to its limit and no further, also when the node's room would hold
// them all.
func TestAttachLimitCapsOneShape(t *testing.T) {
	gp3 := classOf("gp3", ebsDriver)
	ps := kpods(5, "web", func(p *corev1.Pod) { mountsClaim("data-" + p.Name)(p) })
	in := &scheduling.Input{Pods: ps, NodePools: []*scheduling.NodePool{specPool("default")}, DefaultInstanceTypes: specTypes(t),
		StorageClasses: []*storagev1.StorageClass{gp3}}
	for _, p := range ps {
		in.PersistentVolumeClaims = append(in.PersistentVolumeClaims, claim("data-"+p.Name, &gp3.Name, ""))
	}
	in.Nodes = []*scheduling.ExistingNode{limitedNode(t, in, map[string]int{ebsDriver: 3})}
	r := solveSpec(t, in)
	if err := errors.Join(onNode("n1", "web-0", "web-1", "web-2")(r), newNodeFor("web-3", "web-4")(r)); err != nil {
		t.Error(err)
	}
}
