package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// Static NodePools (spec.replicas) are kept at their replica count by the
// first round of every run, under the provisioner lease, from the claim
// records in the store (state.Cluster.StaticScale decides):
//   - a shortfall is launched through the same write-ahead path as pods'
//     claims, so a run killed mid-launch leaves records the next run
//     resumes and counts, never a second set of claims;
//   - a surplus is marked for deletion (termination.Mark) and drained by
//     the lifecycle's normal termination workflow.
//
// Both happen in one place and one lease, so a launch and a removal never
// race each other.

// staticPlaceholder stands for the pods in the name of a run's i-th claim
// of a static pool (real pod UIDs never look like it). Pods' UIDs make
// their claims' names unique for good; a static claim has none, and the
// lease token alone restarts with a new table (a redeployed stack), whose
// names must not meet the CreateFleet client tokens an earlier stack used
// for the same cluster. The provisioner's random holder id is constant
// within a run, so a retried write still finds its record, and differs
// across processes; a run killed mid-launch needs no equal name next time,
// since the next run counts the records it left.
func (pa *pass) staticPlaceholder(i int) string {
	return "static-replica/" + pa.p.holder + "/" + strconv.Itoa(i)
}

// scaleStatic scales every static NodePool toward its replicas. It returns the
// claims to launch this round, and whether it marked any claim for deletion
// (the caller then re-reads the cluster, so the pass neither resumes nor
// places pods on a claim it just gave up).
func (pa *pass) scaleStatic(ctx context.Context, c *state.Cluster) (jobs []*job, marked bool) {
	p := pa.p
	now := p.d.Now()
	for _, np := range p.d.Config.NodePools {
		if !np.Static() {
			continue
		}
		s := c.StaticScale(np, now)
		log := p.log.With("nodepool", np.Name, "replicas", s.Replicas, "active", len(s.Active))
		if len(s.Remove) > 0 {
			log.InfoContext(ctx, "deprovisioning nodeclaims to satisfy the replica count", "remove", len(s.Remove))
			marked = pa.removeStatic(ctx, np, s.Remove) || marked
		}
		if s.Limited {
			limit := np.Spec.Limits["nodes"]
			log.WarnContext(ctx, "nodepool node limit reached; the static pool stays below its replicas",
				"limit", limit.Value(), "held", s.Held, "launch", s.Launch)
		}
		if s.Launch == 0 {
			continue
		}
		log.InfoContext(ctx, "provisioning nodeclaims to satisfy the replica count", "launch", s.Launch)
		js, err := pa.staticJobs(ctx, c, np, s.Launch)
		if err != nil {
			log.ErrorContext(ctx, "planning static nodeclaims", "error", err)
			continue
		}
		jobs = append(jobs, js...)
	}
	return jobs, marked
}

// staticJobs plans n new claims of the static pool np from its template.
// Their names are a function of the run and the index (staticPlaceholder),
// so a retried write in this run finds its record; the next run counts
// them as the pool's.
func (pa *pass) staticJobs(ctx context.Context, c *state.Cluster, np *apis.NodePool, n int) ([]*job, error) {
	in, err := c.StaticInput(np.Name)
	if err != nil {
		return nil, err
	}
	plan, err := scheduling.Solve(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("solve: %w", err)
	}
	if len(plan.NodeClaims) != 1 {
		why := "no instance type fits"
		if len(plan.Unschedulable) > 0 {
			why = plan.Unschedulable[0].Reason
		}
		return nil, fmt.Errorf("no node can be planned from the template: %s", why)
	}
	cp := plan.NodeClaims[0]
	now := metav1.NewTime(pa.p.d.Now())
	jobs := make([]*job, 0, n)
	for i := range n {
		name := ClaimName(np.Name, pa.lease.Token, 0, []string{pa.staticPlaceholder(i)})
		cl := newClaim(name, cp, np, pa.p.d.Config.NodeClassFor(np), pa.run, now)
		jobs = append(jobs, &job{claim: cl, create: true, price: cp.PricePerHour})
		pa.p.log.InfoContext(ctx, "nodeclaim planned", "nodeclaim", name, "nodepool", np.Name, "instance-type", cp.InstanceType,
			"zone", cp.Zone, "capacity-type", cp.CapacityType, "price", cp.PricePerHour, "options", len(cp.InstanceTypeOptions), "static", true)
	}
	return jobs, nil
}

// removeStatic marks a static pool's surplus claims for deletion and hands
// them to the lifecycle, whose termination workflow drains them (PDBs
// respected) before their instances go. It reports whether it marked any.
func (pa *pass) removeStatic(ctx context.Context, np *apis.NodePool, remove []*state.Node) bool {
	p := pa.p
	msg := fmt.Sprintf("NodePool %s has more nodes than its %d replicas", np.Name, *np.Spec.Replicas)
	marked := false
	for _, n := range remove {
		name := n.Claim.Name
		_, first, err := termination.Mark(ctx, p.d.Store, name, apis.DeletionReasonOverprovisioned, msg, p.d.Now())
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			p.log.ErrorContext(ctx, "marking a surplus static nodeclaim", "nodeclaim", name, "error", err)
			continue
		}
		marked = true
		if first {
			p.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": apis.DeletionReasonOverprovisioned, "nodepool": np.Name})
			p.log.InfoContext(ctx, "nodeclaim marked for deletion", "nodeclaim", name, "node", n.Name, "nodepool", np.Name,
				"reason", apis.DeletionReasonOverprovisioned)
		}
		if p.d.Requeue != nil {
			m := queue.Message{Kind: queue.KindLifecycle, Subject: name, Reason: "static-scale-down", SentAt: p.d.Now()}
			if err := p.d.Requeue(ctx, m, 0); err != nil {
				p.log.WarnContext(ctx, "handing the claim to the lifecycle", "nodeclaim", name, "error", err)
			}
		}
	}
	return marked
}
