package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
)

// ReasonNodePoolRemoved: the claim's NodePool is no longer in the
// configuration, so its node leaves as Karpenter's NodeClaims leave when
// their NodePool is deleted.
const ReasonNodePoolRemoved = "NodePoolRemoved"

// ActionPoolRemoved is the Outcome of a claim marked for deletion because
// its NodePool left the configuration.
const ActionPoolRemoved = "nodepool-removed"

// RemovedPoolBudget bounds how many of a removed NodePool's nodes leave at
// once (a budget's nodes value): Karpenter's default disruption budget. The pool's own budgets went
// with it, and Karpenter (which deletes every NodeClaim of a deleted
// NodePool at once) has no bound here at all; this one keeps a mistaken
// configuration from draining a whole pool in one go.
const RemovedPoolBudget = "10%"

// poolRemoved marks an initialized claim whose NodePool is no longer
// configured for deletion (the NodePools in the configuration are the ones
// nodewright owns, as the NodePool objects in the cluster are Karpenter's),
// within RemovedPoolBudget of that pool's claims, counting those already
// leaving. The node then goes through the termination drain: taint, then
// PDB-respecting evictions. Only this stack's claims reach here; a Node
// without one (Karpenter's, a node group's) is never looked at.
func (c *Controller) poolRemoved(ctx context.Context, s *claimState) (bool, error) {
	pool := s.cl.NodePoolName()
	if pool == "" || c.d.Config.NodePool(pool) != nil || s.node == nil || !s.cl.IsTrue(apis.ConditionInitialized) || s.cl.IsTrue(apis.ConditionDisrupting) {
		return false, nil
	}
	release, held, err := c.budgetLease(ctx, s)
	if err != nil || !held {
		return true, err
	}
	defer release()
	claims, err := s.v.poolClaims(ctx, pool)
	if err != nil {
		return true, fmt.Errorf("lifecycle: claims of removed nodepool %s: %w", pool, err)
	}
	gone := &apis.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}
	gone.Spec.Disruption.Budgets = []apis.Budget{{Nodes: RemovedPoolBudget}}
	// The budget names no reason, so any applies.
	allowed, err := AllowedDisruptions(gone, claims, func(x *apis.NodeClaim) bool { return s.v.nodeReady(ctx, x) }, "", c.d.Now())
	if err != nil {
		return true, fmt.Errorf("lifecycle: %w", err)
	}
	if allowed <= 0 {
		s.log.InfoContext(ctx, "node of a removed nodepool kept for now: the removal budget is taken", "node", s.node.Name,
			"budget", RemovedPoolBudget, "claims", len(claims))
		if err := c.d.Cluster.NodeEvent(ctx, s.node, kube.EventNormal, "DisruptionBlocked",
			"Cannot disrupt Node yet: NodePool %q is no longer configured and %s of its nodes are already leaving", pool, RemovedPoolBudget); err != nil {
			s.log.DebugContext(ctx, "node event", "error", err)
		}
		s.out.Action = ActionBudgetBlocks
		return true, nil
	}
	s.log.WarnContext(ctx, "nodepool no longer configured: draining its node", "node", s.node.Name)
	c.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": ReasonNodePoolRemoved, "nodepool": pool})
	return s.finish(c.markAndTerminate(ctx, s.cl, ReasonNodePoolRemoved,
		fmt.Sprintf("its NodePool %q is no longer configured", pool), ActionPoolRemoved))
}

// budgetLease serialises the decisions that take from a pool's budget
// (emptiness, a removed pool's drain) across this process (emptyMu: the
// lease is re-entrant for one holder) and invocations (the emptiness lease
// the disruption function shares). held is false when another invocation
// holds it: the claim is looked at again after a poll interval.
func (c *Controller) budgetLease(ctx context.Context, s *claimState) (release func(), held bool, err error) {
	c.emptyMu.Lock()
	lease, err := c.d.Store.AcquireLease(ctx, store.EmptinessLease, c.d.Holder, 30*time.Second)
	if err != nil {
		c.emptyMu.Unlock()
		if errors.Is(err, store.ErrLeaseHeld) {
			s.out.RequeueAfter = c.s.Poll
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("lifecycle: emptiness lease: %w", err)
	}
	return func() {
		if err := c.d.Store.ReleaseLease(context.WithoutCancel(ctx), lease); err != nil {
			s.log.WarnContext(ctx, "releasing the emptiness lease", "error", err)
		}
		c.emptyMu.Unlock()
	}, true, nil
}
