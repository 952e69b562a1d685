package lifecycle_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
)

// launchedFleet launches n claims of e and returns them (instances only:
// no Node is needed for an instance to be listed).
func launchedFleet(e *env, prefix string, n int) []*apis.NodeClaim {
	out := make([]*apis.NodeClaim, n)
	for i := range out {
		out[i] = e.launchClaim(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func (e *env) assertRunning(ids ...string) {
	e.t.Helper()
	for _, id := range ids {
		if s := e.instanceState(id); s != "pending" && s != "running" {
			e.t.Errorf("instance %s is %s: garbage collection took it", id, s)
		}
		if n := e.terminateCalls(id); n != 0 {
			e.t.Errorf("%d TerminateInstances calls for %s", n, id)
		}
	}
}

// A second stack for the same cluster (or this stack after its table was
// replaced: a new table is a new owner) starts with no claims. Its first
// passes must take none of the other stack's running fleet.
func TestGCLeavesAnotherStacksFleet(t *testing.T) {
	first := newEnv(t)
	c := first.newController(first.deps())
	fleet := launchedFleet(first, "gc-first", 3)
	_, node := first.initialized(c, fleet[0].Name)
	first.runningPod("gc-first-web", node.Name, nil)

	second := newEnv(t)
	h := second.handler(second.deps())
	second.clock.Advance(time.Hour)
	for range 2 {
		res := second.tick(h)
		if len(res.TerminatedInstances)+len(res.DrainedOrphans) != 0 || len(res.Errors) != 0 {
			t.Fatalf("the second stack's pass collected the first's instances: %+v", res)
		}
	}
	ids := make([]string, len(fleet))
	for i, cl := range fleet {
		ids[i] = cl.Status.InstanceID
	}
	first.assertRunning(ids...)
	if n, err := first.cs.CoreV1().Nodes().Get(first.ctx, node.Name, metav1.GetOptions{}); err != nil || hasTaint(n, apis.DisruptedTaintKey) {
		t.Errorf("the first stack's node was touched: %v", err)
	}

	// The first stack's instance dies: its Node (karpenter.sh labels, an
	// AWS providerID, no claim of the second stack) is still not the
	// second stack's to delete.
	if err := first.cloud.AWS.EC2().Terminate(fleet[0].Status.InstanceID, "test"); err != nil {
		t.Fatal(err)
	}
	waitState(t, first, fleet[0].Status.InstanceID, "terminated")
	if res := second.tick(h); len(res.DeletedNodes) != 0 {
		t.Errorf("the second stack deleted the first's Nodes: %v", res.DeletedNodes)
	}
	if n, err := first.cs.CoreV1().Nodes().Get(first.ctx, node.Name, metav1.GetOptions{}); err != nil || n.DeletionTimestamp != nil {
		t.Errorf("the first stack's dead node was deleted by the second: %v", err)
	}
}

// The same owner with an empty table (a table restored under the same name,
// or claims lost) sees its whole fleet as orphans: more than the bounded
// share, so the pass collects nothing, warns and counts metrics.GCRefused.
func TestGCRefusesMoreThanItsShare(t *testing.T) {
	e := newEnv(t)
	var emf bytes.Buffer
	d := e.deps()
	d.Metrics = metrics.New(&emf, nil)
	d.Settings = lifecycle.Settings{GCMaxInstances: 2, GCMaxShare: 0.1}
	h := e.handler(d)
	fleet := launchedFleet(e, "gc-share", 3)
	for _, cl := range fleet {
		if err := e.st.DeleteNodeClaim(e.ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(time.Hour)
	res := e.tick(h)
	if res.GCRefused == "" || len(res.TerminatedInstances) != 0 || len(res.DrainedOrphans) != 0 || len(res.DeletedTemplates) != 0 {
		t.Fatalf("3 orphans of 3 with a limit of 2 were not refused: %+v", res)
	}
	if !strings.Contains(emf.String(), metrics.GCRefused) {
		t.Errorf("no %s metric in %s", metrics.GCRefused, emf.String())
	}
	for _, cl := range fleet {
		e.assertRunning(cl.Status.InstanceID)
	}
}

// An orphan whose Node runs pods leaves through the termination workflow
// (taint, PDB-respecting eviction, then TerminateInstances), never through
// a bare TerminateInstances.
func TestGCDrainsAnOrphanWithPods(t *testing.T) {
	e, c, h := newEnvWithController(t, withBudget("0"))
	cl, node := e.initializedClaim(c, "gc-busy")
	pod := e.runningPod("gc-busy-web", node.Name, nil)
	if err := e.st.DeleteNodeClaim(e.ctx, cl); err != nil {
		t.Fatal(err)
	}
	id := cl.Status.InstanceID
	e.clock.Advance(time.Hour)
	res := e.tick(h)
	if slices.Contains(res.TerminatedInstances, id) || !slices.Contains(res.DrainedOrphans, id) {
		t.Fatalf("orphan with a running pod: %+v, want it adopted for draining", res)
	}
	if n := e.terminateCalls(id); n != 0 {
		t.Fatalf("instance %s terminated before its pod was drained", id)
	}
	adopted, err := e.st.GetNodeClaim(e.ctx, "gc-"+id)
	if err != nil || !adopted.Deleting() || adopted.DeletionReason() != lifecycle.ReasonGarbageCollected {
		t.Fatalf("adopted claim: %+v %v", adopted, err)
	}
	e.pump(h, "the orphan drained and terminated", func() bool { return e.gone(adopted.Name) })
	if _, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, pod.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod %s not evicted: %v", pod.Name, err)
	}
	if e.terminateCalls(id) == 0 {
		t.Errorf("drained orphan %s never terminated", id)
	}
}

// nodelessCluster's cached snapshots miss one node and its pods, as a watch
// cache behind the API server may; fresh ones are whole.
type nodelessCluster struct {
	lifecycle.Cluster
	node string
}

func (s nodelessCluster) Snapshot(ctx context.Context, opts kube.SnapshotOptions) (*kube.Snapshot, error) {
	snap, err := s.Cluster.Snapshot(ctx, opts)
	if err == nil && opts.Cached {
		snap.Nodes = slices.DeleteFunc(snap.Nodes, func(n *corev1.Node) bool { return n.Name == s.node })
		delete(snap.PodsByNode, s.node)
	}
	return snap, err
}

// An orphan whose Node the pass's cached list does not show is looked up
// in a fresh list before it could be terminated without a drain: its pod
// is drained, not lost.
func TestGCLooksUpAnOrphansNodeFresh(t *testing.T) {
	e := newEnv(t, withBudget("0"))
	d := e.deps()
	cl, node := e.initializedClaim(e.newController(d), "gc-stale")
	e.runningPod("gc-stale-web", node.Name, nil)
	if err := e.st.DeleteNodeClaim(e.ctx, cl); err != nil {
		t.Fatal(err)
	}
	d.Cluster = nodelessCluster{Cluster: d.Cluster, node: node.Name}
	id := cl.Status.InstanceID
	e.clock.Advance(time.Hour)
	res := e.tick(e.handler(d))
	if slices.Contains(res.TerminatedInstances, id) || !slices.Contains(res.DrainedOrphans, id) || e.terminateCalls(id) != 0 {
		t.Fatalf("orphan missing from the cached node list: %+v, want it adopted for draining", res)
	}
}

// A claim record the listing cannot decode is an unknown claim: its
// instance is kept, not collected as an orphan.
func TestGCKeepsInstancesOfUndecodableClaims(t *testing.T) {
	e := newEnv(t)
	h := e.handler(e.deps())
	cl := e.launchClaim("gc-bad")
	damageClaim(e, cl.Name)
	e.clock.Advance(time.Hour)
	res := e.tick(h)
	if slices.Contains(res.TerminatedInstances, cl.Status.InstanceID) || slices.Contains(res.DrainedOrphans, cl.Status.InstanceID) {
		t.Fatalf("instance of an undecodable claim record collected: %+v", res)
	}
	e.assertRunning(cl.Status.InstanceID)
	if _, err := e.st.ListNodeClaims(e.ctx); err != nil {
		t.Errorf("listing with one bad record: %v", err)
	}
}

// damageClaim overwrites claim name's record body with bytes that are not
// gzip, as a newer version's record might look to an older one.
func damageClaim(e *env, name string) {
	e.t.Helper()
	db := dynamodb.NewFromConfig(mustCfg(e))
	out, err := db.Scan(e.ctx, &dynamodb.ScanInput{TableName: sdkaws.String(e.st.Table())})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, it := range out.Items {
		if sk, ok := it[store.AttrSK].(*dbtypes.AttributeValueMemberS); ok && sk.Value == name {
			it["body"] = &dbtypes.AttributeValueMemberB{Value: []byte("not gzip")}
			if _, err := db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: sdkaws.String(e.st.Table()), Item: it}); err != nil {
				e.t.Fatal(err)
			}
			return
		}
	}
	e.t.Fatalf("no record of %s", name)
}

// Garbage collection both ways: an instance without a claim is terminated
// after the grace period; a claim whose instance vanished is removed with
// its Node; the Node of a terminated instance without a claim is deleted.
func TestGarbageCollection(t *testing.T) {
	// Budget 0: the healthy empty node must not go for emptiness either.
	e, c, h := newEnvWithController(t, withBudget("0"))
	schedule := func() lifecycle.PassResult { return e.tick(h) }

	orphan := e.rawInstance(fmt.Sprintf("gc-orphan-%d", e.id))
	vanish, vanishNode := e.initializedClaim(c, "gc-vanish")
	stray, strayNode := e.initializedClaim(c, "gc-stray")
	keep, keepNode := e.initializedClaim(c, "gc-keep")

	// Young orphans are left alone (a launch may not have recorded yet).
	res := schedule()
	if slices.Contains(res.TerminatedInstances, orphan) {
		t.Fatal("orphan terminated inside the grace period")
	}

	// The vanished claim's instance dies outside nodewright; the stray
	// node's claim record is lost and its instance dies too.
	if err := e.cloud.AWS.EC2().Terminate(vanish.Status.InstanceID, "test"); err != nil {
		t.Fatal(err)
	}
	if err := e.st.DeleteNodeClaim(e.ctx, stray); err != nil {
		t.Fatal(err)
	}
	if err := e.cloud.AWS.EC2().Terminate(stray.Status.InstanceID, "test"); err != nil {
		t.Fatal(err)
	}
	waitState(t, e, vanish.Status.InstanceID, "terminated")
	waitState(t, e, stray.Status.InstanceID, "terminated")

	e.clock.Advance(31 * time.Second)
	res = schedule()
	t.Logf("pass: %+v", res)
	if !slices.Contains(res.TerminatedInstances, orphan) {
		t.Errorf("orphan %s not terminated: %v", orphan, res.TerminatedInstances)
	}
	if slices.Contains(res.TerminatedInstances, keep.Status.InstanceID) {
		t.Error("a claimed instance was garbage collected")
	}
	if !e.gone(vanish.Name) || e.nodeExists(vanishNode.Name) {
		t.Error("claim of the vanished instance or its node left behind")
	}
	if !slices.Contains(res.DeletedNodes, strayNode.Name) || e.nodeExists(strayNode.Name) {
		t.Errorf("node %s of a terminated instance not deleted: %v", strayNode.Name, res.DeletedNodes)
	}
	if e.gone(keep.Name) || !e.nodeExists(keepNode.Name) {
		t.Error("a healthy claim or node was collected")
	}
	if len(res.Errors) > 0 {
		t.Errorf("pass errors: %v", res.Errors)
	}
}
