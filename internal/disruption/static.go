package disruption

import (
	"context"
	"fmt"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
)

// staticDrift replaces the drifted nodes of static NodePools (spec.replicas),
// Karpenter's StaticDrift: each is replaced by a new node of its own pool,
// planned from the pool's template; its pods are not re-planned (they follow
// the replacement or go wherever the scheduler puts them). The command
// marks the candidates Disrupting, which takes them out of the pool's
// replica count, so the provisioning pass it runs launches the
// replacements through the provisioner's static phase. Per pool it waits
// while a scale-down is due (more active claims than replicas) and keeps
// to the budget and to limits.nodes, which the replacements are charged
// against before the old nodes go.
func staticDrift(ctx context.Context, v *View, cands []*Candidate, b Budgets, d *Decision) (*Command, error) {
	byPool := map[string][]*Candidate{}
	n := 0
	for _, c := range cands {
		if c.Drift != "" && c.NodePool.Static() {
			byPool[c.NodePool.Name] = append(byPool[c.NodePool.Name], c)
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	var chosen []*Candidate
	for _, np := range v.Cluster.Config.NodePools {
		list := byPool[np.Name]
		if len(list) == 0 {
			continue
		}
		s := v.Cluster.StaticScale(np, v.Now)
		if int64(len(s.Active)) > s.Replicas {
			continue // the provisioner removes the surplus first
		}
		room := len(list)
		if limit, ok := np.Spec.Limits["nodes"]; ok {
			room = int(min(int64(room), max(limit.Value()-int64(s.Held), 0)))
		}
		sortOldestFirst(list)
		list = withinBudget(list, b, apis.DisruptionReasonDrifted, d)
		chosen = append(chosen, list[:min(room, len(list))]...)
	}
	d.Eligible[MethodDrift] += n
	if len(chosen) == 0 {
		return nil, nil
	}
	sim, err := Simulate(ctx, v.Cluster, chosen)
	if err != nil {
		return nil, err
	}
	if !sim.Schedulable {
		return nil, nil
	}
	return newCommand(MethodDrift, apis.DisruptionReasonDrifted, driftDetail(chosen), chosen, sim, v.Now), nil
}

// allStatic reports whether every candidate belongs to a static NodePool.
func allStatic(cands []*Candidate) bool {
	for _, c := range cands {
		if c.NodePool == nil || !c.NodePool.Static() {
			return false
		}
	}
	return len(cands) > 0
}

// staticReplacements is Simulate's answer for static candidates: one node of
// the candidate's pool each, from the pool's template.
func staticReplacements(ctx context.Context, c *state.Cluster, cands []*Candidate) (Simulation, error) {
	sim := Simulation{Schedulable: true}
	plans := map[string]*scheduling.NodeClaimPlan{}
	for _, cd := range cands {
		pool := cd.NodePool.Name
		cp, ok := plans[pool]
		if !ok {
			in, err := c.StaticInput(pool)
			if err != nil {
				return Simulation{}, fmt.Errorf("disruption: simulate: %w", err)
			}
			plan, err := scheduling.Solve(ctx, in)
			if err != nil {
				return Simulation{}, fmt.Errorf("disruption: simulate: solve: %w", err)
			}
			if len(plan.NodeClaims) != 1 {
				return Simulation{Reason: fmt.Sprintf("no node of static NodePool %s can be planned", pool)}, nil
			}
			cp = plan.NodeClaims[0]
			plans[pool] = cp
		}
		sim.Replacements = append(sim.Replacements, cp)
		sim.Cost += cp.ExpectedPricePerHour
	}
	return sim, nil
}
