package disruption

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/state"
)

// Budgets holds, per NodePool and disruption reason, how many more nodes
// may be disrupted right now.
type Budgets map[string]map[apis.DisruptionReason]int

// Allowed is the pool's remaining budget for reason (0 for unknown pools).
func (b Budgets) Allowed(pool string, reason apis.DisruptionReason) int {
	return b[pool][reason]
}

// Fits reports whether disrupting cands for reason stays within every
// pool's budget, and names the first pool that would go over.
func (b Budgets) Fits(cands []*Candidate, reason apis.DisruptionReason) (bool, string) {
	per := map[string]int{}
	for _, c := range cands {
		per[c.NodePool.Name]++
	}
	for pool, n := range per {
		if n > b.Allowed(pool, reason) {
			return false, pool
		}
	}
	return true, ""
}

var reasons = []apis.DisruptionReason{apis.DisruptionReasonEmpty, apis.DisruptionReasonDrifted, apis.DisruptionReasonUnderutilized}

// ComputeBudgets evaluates every configured pool's budgets at now
// (Karpenter's rules): the minimum of the budgets active now that apply to
// the reason, over the pool's node count (percentages rounded up), minus the
// pool's nodes already being disrupted (deleting, or disrupting while their
// replacement comes up) and its NotReady nodes.
func ComputeBudgets(c *state.Cluster, now time.Time) (Budgets, error) {
	type counts struct{ total, busy int }
	per := map[string]*counts{}
	for _, np := range c.Config.NodePools {
		per[np.Name] = &counts{}
	}
	for _, n := range c.Nodes {
		if n.Claim == nil {
			continue
		}
		k := per[n.NodePool()]
		if k == nil {
			continue
		}
		k.total++
		switch {
		case n.MarkedForDeletion() || n.Claim.Deleting():
			k.busy++
		case n.Node != nil && n.Initialized() && !nodeReady(n.Node):
			k.busy++
		}
	}
	out := Budgets{}
	for _, np := range c.Config.NodePools {
		k := per[np.Name]
		out[np.Name] = map[apis.DisruptionReason]int{}
		for _, r := range reasons {
			allowed, err := np.Spec.Disruption.AllowedDisruptions(now, r, k.total)
			if err != nil {
				return nil, fmt.Errorf("disruption: budgets of nodepool %s: %w", np.Name, err)
			}
			out[np.Name][r] = max(allowed-k.busy, 0)
		}
	}
	return out, nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
