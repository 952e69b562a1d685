package lifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/pods"
)

// emptiness keeps the claim's pod-event clock and deletes empty nodes of
// WhenEmpty pools once consolidateAfter has passed, within budgets.
// WhenEmptyOrUnderutilized pools are the disruption function's (it reuses
// EmptyCandidate), so their emptiness is not acted on here. It is the last
// phase: it always settles the reconcile.
func (c *Controller) emptiness(ctx context.Context, s *claimState) (bool, error) {
	pods, err := s.v.pods(ctx, s.node.Name)
	if err != nil {
		return true, fmt.Errorf("lifecycle: pods of node %s: %w", s.node.Name, err)
	}
	now := c.d.Now()
	if err := c.recordPodEvents(ctx, s, pods, now); err != nil {
		return true, err
	}
	np := c.d.Config.NodePool(s.cl.NodePoolName())
	if np == nil || np.Spec.Disruption.ConsolidationPolicy != apis.ConsolidationPolicyWhenEmpty {
		return true, nil
	}
	check := EmptyCandidate(s.cl, np, s.node, pods, now)
	if !check.Candidate {
		if check.Wait > 0 {
			// Look again when consolidateAfter runs out (the schedule would
			// too, but up to a minute late).
			s.out.RequeueAfter = check.Wait
		}
		return true, nil
	}
	return s.finish(c.deleteEmpty(ctx, s, np))
}

// recordPodEvents stores the digest of the node's pods on the claim and,
// when the set changed since the last look, restarts its pod-event clock.
func (c *Controller) recordPodEvents(ctx context.Context, s *claimState, pods []*corev1.Pod, now time.Time) error {
	digest := PodSetDigest(pods)
	if s.cl.Annotations[AnnotationPodSet] == digest {
		return nil
	}
	first := s.cl.Annotations[AnnotationPodSet] == ""
	updated, err := c.d.Store.MutateNodeClaim(ctx, s.cl.Name, func(x *apis.NodeClaim) error {
		if x.Annotations == nil {
			x.Annotations = map[string]string{}
		}
		x.Annotations[AnnotationPodSet] = digest
		// The first look establishes the baseline; the initialization
		// time already stands for "last pod event" until then.
		if !first {
			// Stored with second precision: round up, so the clock
			// never starts before the change was seen.
			x.Status.LastPodEventTime = metav1.NewTime(ceilSecond(now))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("lifecycle: record pod events of nodeclaim %s: %w", s.cl.Name, err)
	}
	s.cl = updated
	return nil
}

func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// deleteEmpty marks an empty node's claim for deletion if the pool's
// budgets allow, under the emptiness lease.
func (c *Controller) deleteEmpty(ctx context.Context, s *claimState, np *apis.NodePool) (Outcome, error) {
	release, held, err := c.budgetLease(ctx, s)
	if err != nil || !held {
		return s.out, err
	}
	defer release()
	cl, node, out, log := s.cl, s.node, s.out, s.log
	// The pass's pods may come from the watch cache or an earlier pass:
	// the node is removed only if a fresh read still finds it empty.
	fresh, err := c.d.Cluster.PodsOnNode(ctx, node.Name)
	if err != nil {
		return out, fmt.Errorf("lifecycle: pods of node %s: %w", node.Name, err)
	}
	if check := EmptyCandidate(cl, np, node, fresh, c.d.Now()); !check.Candidate {
		log.InfoContext(ctx, "empty node kept: a fresh read of its pods disagrees", "node", node.Name, "reason", check.Reason)
		out.RequeueAfter = check.Wait
		return out, nil
	}
	claims, err := s.v.poolClaims(ctx, np.Name)
	if err != nil {
		return out, fmt.Errorf("lifecycle: claims of nodepool %s: %w", np.Name, err)
	}
	now := c.d.Now()
	allowed, err := AllowedDisruptions(np, claims, func(x *apis.NodeClaim) bool { return s.v.nodeReady(ctx, x) }, apis.DisruptionReasonEmpty, now)
	if err != nil {
		return out, fmt.Errorf("lifecycle: %w", err)
	}
	if allowed <= 0 {
		log.InfoContext(ctx, "empty node kept: disruption budget exhausted", "node", node.Name)
		if err := c.d.Cluster.NodeEvent(ctx, node, kube.EventNormal, "DisruptionBlocked",
			"Cannot disrupt Node: NodePool %q has no disruption budget left for reason Empty", np.Name); err != nil {
			log.DebugContext(ctx, "node event", "error", err)
		}
		out.Action, out.RequeueAfter = ActionBudgetBlocks, 0
		return out, nil
	}
	after, _ := np.Spec.Disruption.ConsolidateAfter.Get()
	log.InfoContext(ctx, "empty node: deleting", "node", node.Name, "consolidate-after", after.String(),
		"last-pod-event", pods.LastPodEvent(cl).UTC().Format(time.RFC3339))
	c.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": apis.DeletionReasonEmpty, "nodepool": np.Name})
	c.d.Metrics.Add(metrics.DisruptionActions, 1, metrics.Dimensions{"method": "emptiness", "action": "delete", "nodepool": np.Name})
	return c.markAndTerminate(ctx, cl, apis.DeletionReasonEmpty,
		fmt.Sprintf("empty for consolidateAfter %s", after), ActionEmpty)
}
