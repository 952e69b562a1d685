package disruption

import (
	"context"
	"fmt"
)

// Validate re-checks a decided command against the current view before it
// is acted on (Karpenter's validation after 15 s): every node must still
// be a candidate for the command's method, the budgets must still allow it,
// and a fresh simulation must still reach the same action at no higher
// cost. why says what changed.
func Validate(ctx context.Context, v *View, cmd *Command) (bool, string, error) {
	v.Settings.Defaults()
	cands, _, err := Candidates(ctx, v)
	if err != nil {
		return false, "", err
	}
	byClaim := map[string]*Candidate{}
	for _, c := range cands {
		byClaim[c.Claim.Name] = c
	}
	var set []*Candidate
	for _, n := range cmd.Candidates {
		c := byClaim[n.Claim]
		if c == nil {
			return false, fmt.Sprintf("node %s is no longer a disruption candidate", n.Node), nil
		}
		switch cmd.Method {
		case MethodEmptiness:
			if !c.Empty || !c.EmptyEligible {
				return false, fmt.Sprintf("node %s is no longer empty", n.Node), nil
			}
		case MethodDrift:
			if c.Drift == "" {
				return false, fmt.Sprintf("node %s is no longer drifted", n.Node), nil
			}
		default:
			if !c.Consolidatable {
				return false, fmt.Sprintf("node %s is no longer consolidatable", n.Node), nil
			}
		}
		set = append(set, c)
	}
	budgets, err := ComputeBudgets(v.Cluster, v.Now)
	if err != nil {
		return false, "", err
	}
	if ok, pool := budgets.Fits(set, cmd.Reason); !ok {
		return false, fmt.Sprintf("NodePool %q has no disruption budget left for reason %s", pool, cmd.Reason), nil
	}
	if cmd.Method == MethodEmptiness {
		return true, "", nil
	}
	sim, err := Simulate(ctx, v.Cluster, set)
	if err != nil {
		return false, "", err
	}
	if !sim.Schedulable {
		return false, "pods would no longer schedule: " + sim.Reason, nil
	}
	if cmd.Method == MethodDrift {
		return true, "", nil
	}
	if why := consolidationStillOK(v, cmd, set, sim); why != "" {
		return false, why, nil
	}
	return true, "", nil
}

// consolidationStillOK re-applies a consolidation's rules to the fresh
// simulation: the same number of replacements at no higher cost, the
// replacement (or re-pack step) rules, and for Balanced pools the score of
// the move as it is now, deletes included: pods that arrived since the
// decision raise its disruption and may sink it below the threshold.
func consolidationStillOK(v *View, cmd *Command, set []*Candidate, sim Simulation) string {
	if len(sim.Replacements) != len(cmd.Replacements) {
		return fmt.Sprintf("the simulation now needs %d new nodes, decided %d", len(sim.Replacements), len(cmd.Replacements))
	}
	if sim.Cost > cmd.NewCost()+1e-9 {
		return fmt.Sprintf("replacements now cost $%.3f/h, decided $%.3f/h", sim.Cost, cmd.NewCost())
	}
	if cmd.Method == MethodRepack {
		if len(sim.Replacements) == 0 {
			return ""
		}
		return repackStepOK(v, set, sim) // scores Balanced pools itself
	}
	if len(sim.Replacements) > 0 {
		if why := replacementOK(v, set, sim); why != "" {
			return why
		}
	}
	cost := 0.0
	for _, c := range set {
		cost += c.Price
	}
	return balancedVerdict(v, set, cost-sim.Cost)
}
