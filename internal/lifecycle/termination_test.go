package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/termination"
)

// A claim marked for deletion drains its node through the Eviction API in
// priority order, is held by a PodDisruptionBudget until the budget
// allows, then terminates the instance, deletes the Node and is tombstoned;
// the work queue carries the drain (no blocking waits).
func TestTerminationDrainHonoursPDB(t *testing.T) {
	e, c, h := newEnvWithController(t)
	cl, node := e.initializedClaim(c, "drain-a")
	id := cl.Status.InstanceID

	e.runningPod("web-1", node.Name, nil)
	e.runningPod("web-2", node.Name, nil)
	// A critical pod is evicted only after the non-critical ones.
	e.runningPod("critical", node.Name, func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "critical"}
		p.Spec.PriorityClassName = "system-cluster-critical"
	})
	// A pod tolerating the disrupted taint is neither evicted nor waited for.
	e.runningPod("tolerant", node.Name, func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "tolerant"}
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: apis.DisruptedTaintKey, Operator: corev1.TolerationOpExists})
	})
	e.guard(t, "web", 2)

	e.mark(cl.Name, apis.DeletionReasonManual)
	for range 3 {
		out, err := c.Reconcile(e.ctx, cl.Name)
		if err != nil {
			t.Fatal(err)
		}
		if out.Action != lifecycle.ActionTerminating || out.RequeueAfter < termination.MinRequeue || out.RequeueAfter > termination.MaxRequeue {
			t.Fatalf("blocked drain: outcome %+v", out)
		}
	}
	n, _ := e.cs.CoreV1().Nodes().Get(e.ctx, node.Name, metav1.GetOptions{})
	if !hasTaint(n, apis.DisruptedTaintKey) {
		t.Error("node not tainted karpenter.sh/disrupted")
	}
	for _, name := range []string{"web-1", "web-2", "critical"} {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s evicted while the PDB forbids it / before its group (err %v)", name, err)
		}
	}
	if e.terminateCalls(id) != 0 {
		t.Fatal("instance terminated while pods were still waiting")
	}
	cur, _ := e.st.GetNodeClaim(e.ctx, cl.Name)
	if c := cur.Condition(termination.ConditionDrained); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "blocked by PodDisruptionBudgets") {
		t.Errorf("Drained condition %+v", c)
	}
	if !hasEvent(e, node.Name, termination.ReasonFailedDraining) {
		t.Error("no FailedDraining event on the node")
	}

	// The budget allows it now: the work queue finishes the job.
	zero := intstr.FromInt32(0)
	got, err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.MinAvailable = &zero
	if _, err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPDB(t, e, "web", 2, 2)
	start := time.Now()
	e.send(cl.Name)
	e.pump(h, "the claim terminated", func() bool { return e.gone(cl.Name) })
	t.Logf("drain after the PDB allowed it: %v", time.Since(start).Round(time.Millisecond))

	for _, name := range []string{"web-1", "web-2", "critical"} {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err == nil && p.DeletionTimestamp == nil {
			t.Errorf("pod %s not evicted", name)
		}
	}
	if n := e.terminateCalls(id); n != 1 {
		t.Errorf("TerminateInstances for %s called %d times, want 1", id, n)
	}
	if s := e.instanceState(id); s != "shutting-down" && s != "terminated" {
		t.Errorf("instance %s is %s", id, s)
	}
	if e.nodeExists(node.Name) {
		t.Error("node still exists")
	}
	ts, err := e.st.GetTombstone(e.ctx, cl.Name)
	if err != nil {
		t.Fatalf("no tombstone: %v", err)
	}
	for _, typ := range []string{termination.ConditionDrained, termination.ConditionVolumesDetached, termination.ConditionInstanceTerminating} {
		if !ts.Claim.IsTrue(typ) {
			t.Errorf("tombstone condition %s not True: %+v", typ, ts.Claim.Condition(typ))
		}
	}
	if ts.Claim.DeletionReason() != apis.DeletionReasonManual {
		t.Errorf("tombstone reason %q", ts.Claim.DeletionReason())
	}
}

// faultyCloud fails Terminate while failTerminate is set; faultyCluster
// fails DeleteNode while failDelete is set: a function dying at that line.
type faultyCloud struct {
	*nwaws.Provider
	failTerminate atomic.Bool
}

func (f *faultyCloud) Terminate(ctx context.Context, ids ...string) error {
	if f.failTerminate.Load() {
		return errors.New("injected crash before TerminateInstances")
	}
	return f.Provider.Terminate(ctx, ids...)
}

type faultyCluster struct {
	*kube.Client
	failDelete atomic.Bool
}

func (f *faultyCluster) ReleaseNode(ctx context.Context, name string, uid types.UID) error {
	if f.failDelete.Load() {
		return errors.New("injected crash before ReleaseNode")
	}
	return f.Client.ReleaseNode(ctx, name, uid)
}

// Killed before terminating the instance, then before deleting the Node:
// each re-run resumes from what the world shows, the instance is terminated
// exactly once and the claim ends tombstoned.
func TestTerminationResumesAfterCrashes(t *testing.T) {
	e := newEnv(t)
	cloud := &faultyCloud{Provider: e.p}
	cluster := &faultyCluster{Client: e.kc}
	d := e.deps()
	d.Cloud, d.Cluster = cloud, cluster
	c := e.newController(d)
	cl, node := e.busyClaim(c, "crash-a")
	e.mark(cl.Name, apis.DeletionReasonDrifted)

	cloud.failTerminate.Store(true)
	var lastErr error
	for range 50 {
		if _, lastErr = c.Reconcile(e.ctx, cl.Name); lastErr != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lastErr == nil || !strings.Contains(lastErr.Error(), "injected crash before TerminateInstances") {
		t.Fatalf("drain never reached the terminate step: %v", lastErr)
	}
	if _, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "web-1", metav1.GetOptions{}); err == nil {
		if p, _ := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "web-1", metav1.GetOptions{}); p.DeletionTimestamp == nil {
			t.Fatal("terminate step reached before the pod was evicted")
		}
	}
	cloud.failTerminate.Store(false)
	cluster.failDelete.Store(true)
	// A fresh controller: nothing carried over in memory.
	c2 := e.newController(d)
	if _, err := c2.Reconcile(e.ctx, cl.Name); err == nil || !strings.Contains(err.Error(), "injected crash before ReleaseNode") {
		t.Fatalf("expected the DeleteNode crash, got %v", err)
	}
	if e.terminateCalls(cl.Status.InstanceID) != 1 {
		t.Fatalf("TerminateInstances calls = %d, want 1", e.terminateCalls(cl.Status.InstanceID))
	}
	cluster.failDelete.Store(false)
	c3 := e.newController(d)
	out, err := c3.Reconcile(e.ctx, cl.Name)
	if err != nil || !out.Done {
		t.Fatalf("re-run after crashes: %+v %v", out, err)
	}
	if n := e.terminateCalls(cl.Status.InstanceID); n != 1 {
		t.Errorf("TerminateInstances calls = %d after the re-run, want exactly 1", n)
	}
	if e.nodeExists(node.Name) || !e.gone(cl.Name) {
		t.Error("node or claim left behind")
	}
	// A further run (a duplicate message) is a no-op.
	if out, err := c3.Reconcile(e.ctx, cl.Name); err != nil || out.Action != lifecycle.ActionNotFound {
		t.Errorf("duplicate work item: %+v %v", out, err)
	}
}

// A do-not-disrupt pod holds the drain until the claim's
// terminationGracePeriod runs out, then it is deleted; a VolumeAttachment
// holds the instance's termination until it is gone.
func TestDoNotDisruptAndVolumesHoldTermination(t *testing.T) {
	e := newEnv(t)
	c := e.newController(e.deps())
	a := e.launchClaim("hold-dnd")
	b := e.launchClaim("hold-volume")
	a, nodeA := e.initialized(c, a.Name)
	b, nodeB := e.initialized(c, b.Name)

	e.runningPod("web-1", nodeA.Name, nil)
	e.runningPod("guarded", nodeA.Name, func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "guarded"}
		p.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "true"}
	})
	pvName := "pv-" + e.ns
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0123"}},
		},
	}
	if _, err := e.cs.CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.cs.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "va-" + e.ns},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: nodeB.Name,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}},
	}
	if _, err := e.cs.StorageV1().VolumeAttachments().Create(e.ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	e.mark(a.Name, apis.DeletionReasonDrifted)
	e.mark(b.Name, apis.DeletionReasonDrifted)
	e.reconcileUntil(c, a.Name, "drained of its ordinary pod", func(o lifecycle.Outcome, _ *apis.NodeClaim) bool {
		_, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "web-1", metav1.GetOptions{})
		return err != nil && o.Action == lifecycle.ActionTerminating
	})
	if p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "guarded", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("do-not-disrupt pod evicted before the grace period (err %v)", err)
	}
	for range 3 {
		if out, err := c.Reconcile(e.ctx, b.Name); err != nil || out.Done {
			t.Fatalf("claim with an attached volume: %+v %v", out, err)
		}
	}
	cur, _ := e.st.GetNodeClaim(e.ctx, b.Name)
	if cond := cur.Condition(termination.ConditionVolumesDetached); cond == nil || cond.Status != metav1.ConditionFalse || !cur.IsTrue(termination.ConditionDrained) {
		t.Errorf("volume-held claim conditions: %+v", cur.Status.Conditions)
	}
	if e.terminateCalls(b.Status.InstanceID) != 0 || e.terminateCalls(a.Status.InstanceID) != 0 {
		t.Fatal("an instance was terminated while its drain was held")
	}

	// The volume detaches: b finishes.
	if err := e.cs.StorageV1().VolumeAttachments().Delete(e.ctx, va.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.reconcileUntil(c, b.Name, "terminated", func(_ lifecycle.Outcome, cl *apis.NodeClaim) bool { return cl == nil })
	if e.terminateCalls(b.Status.InstanceID) != 1 || e.nodeExists(nodeB.Name) {
		t.Error("volume-held claim did not finish")
	}

	// The grace period (1h) runs out: the guarded pod is deleted and a goes.
	e.clock.Advance(time.Hour + time.Second)
	e.reconcileUntil(c, a.Name, "terminated", func(_ lifecycle.Outcome, cl *apis.NodeClaim) bool { return cl == nil })
	if p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "guarded", metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
		t.Error("do-not-disrupt pod survived the grace period")
	}
	if e.terminateCalls(a.Status.InstanceID) != 1 || e.nodeExists(nodeA.Name) {
		t.Error("grace-period claim did not finish")
	}
}
