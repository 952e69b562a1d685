package lifecycle_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/lifecycle"
)

// `kubectl delete node` on a registered claim's Node, over the real API
// server: the karpenter.sh/termination finalizer registration put there
// holds the Node while the termination drains it (an eviction that a
// PodDisruptionBudget blocks waits, the instance keeps running), then the
// instance is terminated once and the finalizer released, as Karpenter's
// finalizer does. Before, the Node went at once and its pods with it.
func TestDeletedNodeDrainsGracefully(t *testing.T) {
	e := newEnv(t, withBudget("0"))
	c := e.newController(e.deps())
	cl := e.launchClaim("nodedel-a")
	cl, node := e.initialized(c, cl.Name)
	if !slices.Contains(node.Finalizers, apis.TerminationFinalizer) {
		t.Fatalf("registered node has no %s finalizer: %v", apis.TerminationFinalizer, node.Finalizers)
	}
	e.runningPod("web-1", node.Name, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "web"} })
	e.guard(t, "web", 1)
	if err := e.cs.CoreV1().Nodes().Delete(e.ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	out, err := c.Reconcile(e.ctx, cl.Name)
	if err != nil || out.Done || out.Action != lifecycle.ActionNodeDeleted {
		t.Fatalf("a drain blocked by the PDB: %+v %v", out, err)
	}
	n, err := e.cs.CoreV1().Nodes().Get(e.ctx, node.Name, metav1.GetOptions{})
	if err != nil || n.DeletionTimestamp == nil {
		t.Fatalf("the finalizer did not hold the node: %v", err)
	}
	if p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "web-1", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("the PDB-protected pod went: %v", err)
	}
	if e.terminateCalls(cl.Status.InstanceID) != 0 {
		t.Fatal("instance terminated before the drain")
	}

	if err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Delete(e.ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.reconcileUntil(c, cl.Name, "terminated", func(_ lifecycle.Outcome, cl *apis.NodeClaim) bool { return cl == nil })
	if e.terminateCalls(cl.Status.InstanceID) != 1 {
		t.Error("instance not terminated exactly once")
	}
	if e.nodeExists(node.Name) {
		t.Error("node still there: its finalizer was not released")
	}
	ts, err := e.st.GetTombstone(e.ctx, cl.Name)
	if err != nil || ts.Claim.DeletionReason() != lifecycle.ReasonNodeDeleted {
		t.Fatalf("tombstone %+v %v", ts, err)
	}
}
