package disruption

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
)

// Simulation is the answer to "where would these nodes' pods go?".
type Simulation struct {
	// Schedulable: every pod of the candidates has a place.
	Schedulable bool
	// Reason says why not (a pod and the solver's reason).
	Reason string
	// Replacements are the new nodes the candidates' pods need (none: the
	// rest of the cluster takes them all).
	Replacements []*scheduling.NodeClaimPlan
	// Cost is the replacements' summed price per hour.
	Cost float64
}

// Simulate asks the solver where the candidates' pods would go if the
// candidates were gone, with the same solver and cluster view the
// provisioner uses. Pending pods and the pods of nodes already being
// deleted are placed too (they compete for the same room), but only new
// nodes holding a candidate's pod count as replacements. Candidates of
// static NodePools are each replaced by a node of their own pool instead
// (see staticDrift).
func Simulate(ctx context.Context, c *state.Cluster, cands []*Candidate) (Simulation, error) {
	if allStatic(cands) {
		return staticReplacements(ctx, c, cands)
	}
	without := make([]string, len(cands))
	moving := map[string]bool{}
	for i, cd := range cands {
		without[i] = cd.Name()
		for _, p := range cd.Pods {
			moving[podKey(p)] = true
		}
	}
	pods := append([]*corev1.Pod{}, c.Pending...)
	in, err := c.Input(state.InputOptions{Pods: pods, Without: without, IncludeDeletingPods: true})
	if err != nil {
		return Simulation{}, fmt.Errorf("disruption: simulate: %w", err)
	}
	plan, err := scheduling.Solve(ctx, in)
	if err != nil {
		return Simulation{}, fmt.Errorf("disruption: simulate: solve: %w", err)
	}
	return fromPlan(plan, moving), nil
}

func fromPlan(plan *scheduling.Plan, moving map[string]bool) Simulation {
	for _, u := range plan.Unschedulable {
		if moving[u.Pod] || (u.PodRef != nil && moving[podKey(u.PodRef)]) {
			return Simulation{Reason: fmt.Sprintf("pod %s would not schedule: %s", u.Pod, u.Reason)}
		}
	}
	sim := Simulation{Schedulable: true}
	for _, cp := range plan.NodeClaims {
		holds := false
		for _, p := range cp.PodRefs {
			if moving[podKey(p)] {
				holds = true
				break
			}
		}
		if !holds {
			for _, name := range cp.Pods {
				if moving[name] {
					holds = true
					break
				}
			}
		}
		if holds {
			sim.Replacements = append(sim.Replacements, cp)
			// What the replacement is expected to cost, not its cheapest
			// option: a spot fleet may launch a pricier one.
			sim.Cost += cp.ExpectedPricePerHour
		}
	}
	return sim
}

// ReadyToDrain reports whether the candidates' pods now fit on initialized
// nodes that are not going away — i.e. the replacements are up — so the
// candidates may be drained without leaving a pod pending.
func ReadyToDrain(ctx context.Context, c *state.Cluster, nodes []string) (bool, string, error) {
	moving := map[string]bool{}
	var without []string
	for _, name := range nodes {
		n, ok := c.Node(name)
		if !ok {
			continue
		}
		without = append(without, name)
		for _, p := range n.ReschedulablePods() {
			moving[podKey(p)] = true
		}
	}
	if len(moving) == 0 {
		return true, "", nil
	}
	in, err := c.Input(state.InputOptions{Pods: []*corev1.Pod{}, Without: without})
	if err != nil {
		return false, "", fmt.Errorf("disruption: readiness: %w", err)
	}
	kept := in.Nodes[:0:0]
	for _, en := range in.Nodes {
		if en.Initialized && !en.InFlight && !en.MarkedForDeletion {
			kept = append(kept, en)
		}
	}
	in.Nodes = kept
	// Only existing room counts: no pool may open a node in this question.
	in.NodePools = nil
	plan, err := scheduling.Solve(ctx, in)
	if err != nil {
		return false, "", fmt.Errorf("disruption: readiness: solve: %w", err)
	}
	for _, u := range plan.Unschedulable {
		return false, fmt.Sprintf("pod %s has no initialized node to go to yet", u.Pod), nil
	}
	if len(plan.NodeClaims) > 0 {
		return false, "replacement capacity is not initialized yet", nil
	}
	return true, "", nil
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
