package state_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/state"
)

// A pod listed pending and then found bound by the later read of the bound
// pods (the scheduler bound it between the two) is counted once, on its
// node: placed again, it launched a second node for capacity it already has.
func TestPodBoundSinceListedPendingIsNotPlacedAgain(t *testing.T) {
	cfg, cat := loadConfig(t, nil), builtin(t)
	cl := launchedClaim("default-fffff", "m5.large", "us-west-2a", "i-4")
	node := registeredNode("ip-10-0-0-4", "us-west-2a", "i-4")
	// a is bound since it was listed; b is still pending. Together they fill
	// the node's 1930m; a counted twice would not leave b room.
	listed := []*corev1.Pod{pendingPod("a", "1"), pendingPod("b", "900m")}
	c, err := state.Build(state.Sources{Snapshot: snapshot(listed, []*corev1.Node{node}, boundPod("a", "ip-10-0-0-4", "1")),
		Config: cfg, Catalog: cat, Claims: []*apis.NodeClaim{cl}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pending) != 1 || c.Pending[0].Name != "b" {
		t.Fatalf("pending = %v, want b only", podNames(c.Pending))
	}
	if len(c.Skipped) != 1 || c.Skipped[0].Pod.Name != "a" || !strings.Contains(c.Skipped[0].Reason, "ip-10-0-0-4") {
		t.Fatalf("skipped = %+v, want a, bound to ip-10-0-0-4", c.Skipped)
	}
	plan := solve(t, c, state.InputOptions{})
	if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 0 {
		t.Fatalf("want b on the node and no new claim, got %d claims, unschedulable %v", len(plan.NodeClaims), plan.Unschedulable)
	}
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestProvisionableFilter(t *testing.T) {
	cfg, cat := loadConfig(t, nil), builtin(t)
	ds := pendingPod("ds", "100m")
	ds.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent"}}
	term := pendingPod("term", "100m")
	term.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pre := pendingPod("pre", "100m")
	pre.Status.NominatedNodeName = "n1"
	ok := pendingPod("ok", "100m")
	c, err := state.Build(state.Sources{Snapshot: snapshot([]*corev1.Pod{ds, term, pre, ok}, nil), Config: cfg, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Pending) != 1 || c.Pending[0].Name != "ok" || len(c.Skipped) != 3 {
		t.Fatalf("pending %d skipped %+v", len(c.Pending), c.Skipped)
	}
}
