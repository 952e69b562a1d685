package lifecycle_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/lifecycle"
)

// An empty node of a WhenEmpty pool is deleted once consolidateAfter has
// passed since its last pod left; daemon-only nodes count as empty;
// do-not-disrupt and a zero budget keep it.
func TestEmptinessScaleDown(t *testing.T) {
	e, c, h := newEnvWithController(t)
	cl, node := e.busyClaim(c, "empty-a")
	if out, err := c.Reconcile(e.ctx, cl.Name); err != nil || out.Action != "" {
		t.Fatalf("busy node: %+v %v", out, err)
	}
	e.clock.Advance(time.Minute)
	if out, err := c.Reconcile(e.ctx, cl.Name); err != nil || out.Done {
		t.Fatalf("busy node deleted: %+v %v", out, err)
	}

	if err := e.cs.CoreV1().Pods(e.ns).Delete(e.ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(t, e, "web-1")
	out, err := c.Reconcile(e.ctx, cl.Name)
	if err != nil || out.Done || out.RequeueAfter <= 0 || out.RequeueAfter > 6*time.Second { // 5s + rounding up to the second
		t.Fatalf("just emptied: %+v %v (want a requeue within consolidateAfter)", out, err)
	}
	cur, _ := e.st.GetNodeClaim(e.ctx, cl.Name)
	if cur.Status.LastPodEventTime.IsZero() {
		t.Fatal("last pod event not recorded")
	}

	// do-not-disrupt on the node keeps it.
	if _, err := e.kc.PatchNodeAnnotations(e.ctx, node.Name, map[string]string{apis.DoNotDisruptAnnotKey: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(6 * time.Second)
	if out, err := c.Reconcile(e.ctx, cl.Name); err != nil || out.Done {
		t.Fatalf("do-not-disrupt node deleted: %+v %v", out, err)
	}
	if _, err := e.kc.PatchNodeAnnotations(e.ctx, node.Name, nil, []string{apis.DoNotDisruptAnnotKey}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.send(cl.Name)
	e.pump(h, "the empty node deleted", func() bool { return e.gone(cl.Name) })
	t.Logf("empty node removed %v after its work item", time.Since(start).Round(time.Millisecond))
	ts, err := e.st.GetTombstone(e.ctx, cl.Name)
	if err != nil || ts.Claim.DeletionReason() != apis.DeletionReasonEmpty {
		t.Fatalf("tombstone %+v %v", ts, err)
	}
	if e.nodeExists(node.Name) || e.terminateCalls(cl.Status.InstanceID) != 1 {
		t.Error("node left behind or instance not terminated once")
	}
}

func TestEmptinessRespectsBudget(t *testing.T) {
	e := newEnv(t, withBudget("0"))
	c := e.newController(e.deps())
	cl, node := e.initializedClaim(c, "budget-a")
	e.clock.Advance(time.Minute)
	out, err := c.Reconcile(e.ctx, cl.Name)
	if err != nil || out.Done || out.Action != lifecycle.ActionBudgetBlocks {
		t.Fatalf("budget 0: %+v %v", out, err)
	}
	if !hasEvent(e, node.Name, "DisruptionBlocked") {
		t.Error("no DisruptionBlocked event")
	}
}

// One scheduled pass deletes no more empty nodes of a pool than its budget
// allows, even though each empty node terminates within one step.
func TestEmptinessBudgetAcrossAPass(t *testing.T) {
	e := newEnv(t, withBudget("1"))
	d := e.deps()
	c := e.newController(d)
	var names []string
	for _, n := range []string{"pass-a", "pass-b", "pass-c"} {
		names = append(names, e.launchClaim(n).Name)
	}
	for _, n := range names {
		e.initialized(c, n)
	}
	e.clock.Advance(time.Minute)
	res := e.tick(e.handler(d))
	left, err := e.st.ListNodeClaims(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Actions[lifecycle.ActionEmpty] != 1 || len(left) != 2 {
		t.Fatalf("budget 1: pass %+v left %d claims, want exactly one deleted", res, len(left))
	}
	// The next pass may take the next one.
	res = e.tick(e.handler(d))
	if left, _ = e.st.ListNodeClaims(e.ctx); res.Actions[lifecycle.ActionEmpty] != 1 || len(left) != 1 {
		t.Fatalf("second pass %+v left %d claims", res, len(left))
	}
}

// staleCluster's snapshots miss the pods of one node, as a watch cache a
// moment behind or an earlier pass's reused pods may: the node looks empty.
type staleCluster struct {
	lifecycle.Cluster
	node string
}

func (s staleCluster) Snapshot(ctx context.Context, opts kube.SnapshotOptions) (*kube.Snapshot, error) {
	snap, err := s.Cluster.Snapshot(ctx, opts)
	if err == nil {
		delete(snap.PodsByNode, s.node)
	}
	return snap, err
}

// A node that a pass's snapshot shows empty for longer than consolidateAfter
// is removed only if a fresh read of its pods agrees: a busy node is kept.
func TestEmptinessRereadsPodsBeforeRemoving(t *testing.T) {
	e := newEnv(t)
	d := e.deps()
	cl, node := e.busyClaim(e.newController(d), "stale-a")
	d.Cluster = staleCluster{Cluster: d.Cluster, node: node.Name}
	c := e.newController(d)
	for range 2 {
		e.clock.Advance(time.Minute)
		res, err := c.ReconcileAll(e.ctx)
		if err != nil || res.Actions[lifecycle.ActionEmpty] != 0 {
			t.Fatalf("pass over a stale snapshot: %+v %v", res, err)
		}
	}
	cur, err := e.st.GetNodeClaim(e.ctx, cl.Name)
	if err != nil || cur.Deleting() {
		t.Fatalf("the busy node's claim: %+v %v", cur, err)
	}
}
