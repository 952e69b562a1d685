package lifecycle

import (
	"slices"
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/termination"
)

// A NodePool taken out of the configuration takes its nodes with it, as a
// deleted NodePool's NodeClaims go in Karpenter: through the termination
// drain, a tenth of the pool (rounded up) at a time, counting nodes already
// leaving; the claims of a pool still configured are left alone.
func TestStateMachineRemovedNodePoolDrains(t *testing.T) {
	kept := smPool("0")
	kept.Name = "kept"
	w := newWorld(t, smPool("0"), kept)
	for _, name := range []string{"a", "b", "c"} {
		w.initialized(name)
	}
	w.initialized("k", func(cl *apis.NodeClaim) { cl.Labels[apis.NodePoolLabelKey] = "kept" })

	// The user deletes NodePool "default" from the configuration directory.
	w.c.d.Config = &apis.Config{NodePools: []*apis.NodePool{kept}}
	if _, _, err := termination.Mark(w.ctx, w.store, "a", apis.DeletionReasonManual, "test", w.now()); err != nil {
		t.Fatal(err)
	}
	// "a" is leaving: 10 % of 3 nodes rounds up to 1, so "b" and "c" wait.
	w.want(w.reconcile("b"), Outcome{Claim: "b", Action: ActionBudgetBlocks})
	w.want(w.reconcile("c"), Outcome{Claim: "c", Action: ActionBudgetBlocks})
	if w.get("b").Deleting() || w.get("c").Deleting() {
		t.Fatal("a claim was marked beyond the removal budget")
	}
	w.want(w.reconcile("a"), Outcome{Claim: "a", Action: ActionTerminated, Done: true})
	w.want(w.reconcile("b"), Outcome{Claim: "b", Action: ActionPoolRemoved, Done: true})
	w.wantGone("b", ReasonNodePoolRemoved)
	w.want(w.reconcile("c"), Outcome{Claim: "c", Action: ActionPoolRemoved, Done: true})
	w.wantTerminated("i-a", "i-b", "i-c")

	// The configured pool's claim is not touched, whatever its budget.
	if out := w.reconcile("k"); out.Action != ActionNone || out.Done || w.get("k").Deleting() {
		t.Errorf("claim of a configured pool: %+v", out)
	}
	if !slices.Contains(w.cluster.events, "DisruptionBlocked") {
		t.Errorf("no DisruptionBlocked event for the nodes kept waiting: %v", w.cluster.events)
	}
}

// A claim without a NodePool label cannot be attributed to a removed pool:
// it is kept.
func TestStateMachineClaimWithoutNodePoolIsKept(t *testing.T) {
	w := newWorld(t, smPool("10"))
	w.initialized("u", func(cl *apis.NodeClaim) { delete(cl.Labels, apis.NodePoolLabelKey) })
	w.c.d.Config = &apis.Config{}
	if out := w.reconcile("u"); out.Done || w.get("u").Deleting() {
		t.Errorf("claim without a pool: %+v", out)
	}
	w.wantTerminated()
}
