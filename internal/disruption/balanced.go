package disruption

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/pods"
)

// Balanced consolidation (consolidationPolicy: Balanced, Karpenter v1.14):
// a Balanced pool consolidates underutilized nodes as WhenEmptyOrUnderutilized
// does, but only moves whose savings are worth their disruption. A move is
// scored per Balanced pool it touches:
//
//	score = (savings / pool cost) / (move disruption / pool disruption)
//
// and taken only when every such pool scores at least 1/balancedK. A
// node's disruption is 1 plus its reschedulable pods' eviction costs (each
// at least 0); the pool's totals sum every node of the pool, candidate or
// not. Empty nodes go through emptiness, unscored, under every policy.

// balancedK is Karpenter's scoring parameter (v1.BalancedK): the threshold is 1/k.
const balancedK = 2

// poolTotals are a Balanced pool's cost ($/h) and disruption cost.
type poolTotals struct {
	cost, disruption float64
}

// balancedDisruptionCost is a node's disruption cost under Balanced.
func balancedDisruptionCost(ps []*corev1.Pod) float64 {
	cost := 1.0
	for _, p := range ps {
		cost += math.Max(0, pods.EvictionCost(p))
	}
	return cost
}

func isBalanced(np *apis.NodePool) bool {
	return np != nil && np.Spec.Disruption.ConsolidationPolicy == apis.ConsolidationPolicyBalanced
}

// balancedTotals sums the cost and disruption of every node of each
// Balanced pool.
func balancedTotals(v *View) map[string]poolTotals {
	out := map[string]poolTotals{}
	c := v.Cluster
	for _, n := range c.Nodes {
		if n.Claim == nil || !isBalanced(c.Config.NodePool(n.NodePool())) {
			continue
		}
		label := func(key string) string {
			if n.Node != nil && n.Node.Labels[key] != "" {
				return n.Node.Labels[key]
			}
			return n.Claim.Labels[key]
		}
		t := out[n.NodePool()]
		t.cost += offeringPrice(c.Catalog, label(catalog.LabelInstanceType), label(catalog.LabelTopologyZone), label(apis.CapacityTypeLabelKey))
		t.disruption += balancedDisruptionCost(n.ReschedulablePods())
		out[n.NodePool()] = t
	}
	return out
}

// balancedScore is a move's score for one pool (0 when it saves nothing
// or the pool's totals are unknown).
func balancedScore(savings, disruption float64, t poolTotals) float64 {
	if t.cost <= 0 || t.disruption <= 0 || savings <= 0 {
		return 0
	}
	if disruption <= 0 {
		return math.Inf(1)
	}
	return (savings / t.cost) / (disruption / t.disruption)
}

// balancedVerdict says why a move that saves savings ($/h) is not worth
// its disruption to one of its Balanced pools ("" when it is, or when it
// touches none). A move across pools credits each pool with the savings
// in proportion to its share of the move's cost.
func balancedVerdict(v *View, cands []*Candidate, savings float64) string {
	byPool := map[string][]*Candidate{}
	total := 0.0
	for _, c := range cands {
		byPool[c.NodePool.Name] = append(byPool[c.NodePool.Name], c)
		total += c.Price
	}
	var totals map[string]poolTotals
	for name, list := range byPool {
		if !isBalanced(list[0].NodePool) {
			continue
		}
		if totals == nil {
			totals = balancedTotals(v)
		}
		cost, disruption := 0.0, 0.0
		for _, c := range list {
			cost += c.Price
			disruption += c.BalancedCost
		}
		share := savings
		if len(byPool) > 1 && total > 0 {
			share = savings * cost / total
		}
		if score := balancedScore(share, disruption, totals[name]); score < 1.0/balancedK {
			return fmt.Sprintf("Balanced: NodePool %q would save %.1f%% of its cost for %.1f%% of its disruption (score %.2f, below %.2f)",
				name, 100*share/math.Max(totals[name].cost, 1e-9), 100*disruption/math.Max(totals[name].disruption, 1e-9), score, 1.0/balancedK)
		}
	}
	return ""
}
