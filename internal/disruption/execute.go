package disruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// execute acts on a validated command. Deletions are handed to termination
// at once; replacements first mark the candidates disrupting (no new pods,
// the provisioner moves their pods to new capacity) and wait.
func (c *Controller) execute(ctx context.Context, v *View, cmd *Command, version int64, res *Result, log *slog.Logger) error {
	// The lifecycle spends emptiness budget under this lease; holding it
	// while marking keeps the two from spending the same budget.
	el, err := c.d.Store.AcquireLease(ctx, store.EmptinessLease, c.d.Holder, 30*time.Second)
	if errors.Is(err, store.ErrLeaseHeld) {
		res.Waiting = "emptiness lease"
		if version == 0 {
			_, err = c.saveCommand(ctx, cmd, 0)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("disruption: emptiness lease: %w", err)
	}
	defer func() {
		if err := c.d.Store.ReleaseLease(context.WithoutCancel(ctx), el); err != nil {
			log.WarnContext(ctx, "releasing the emptiness lease", "error", err)
		}
	}()
	res.Executed = true
	for _, n := range cmd.Candidates {
		c.d.Metrics.Add(metrics.DisruptionActions, 1, metrics.Dimensions{"method": cmd.Method, "action": cmd.Action(), "nodepool": n.NodePool})
	}
	if cmd.Action() == ActionDelete {
		log.InfoContext(ctx, cmd.Message)
		if err := c.markForDeletion(ctx, v, cmd); err != nil {
			return err
		}
		res.Done = true
		return c.dropCommand(ctx, version)
	}

	// Write-ahead: the command is Replacing before any candidate is marked,
	// so a pass killed in between resumes the marking (replacing) instead
	// of finding marked candidates and dropping the command as invalid.
	cmd.Phase = PhaseReplacing
	cmd.ReplacingSince = v.Now
	version, err = c.saveCommand(ctx, cmd, version)
	if err != nil {
		return err
	}
	res.Phase = cmd.Phase
	if err := c.ensureDisrupting(ctx, v, cmd, log); err != nil {
		return err
	}
	log.InfoContext(ctx, cmd.Message, "phase", PhaseReplacing)
	c.provision(ctx, cmd, log)
	_, err = c.saveCommand(ctx, cmd, version)
	res.Waiting = "replacements"
	return err
}

// ensureDisrupting marks the candidates Disrupting and taints them
// karpenter.sh/disrupted:NoSchedule (idempotent), as Karpenter does before
// launching replacements: no new pods land on them, and the provisioner
// moves their pods to new capacity while the lifecycle leaves them running.
func (c *Controller) ensureDisrupting(ctx context.Context, v *View, cmd *Command, log *slog.Logger) error {
	now := metav1.NewTime(v.Now)
	for _, n := range cmd.Candidates {
		if node, ok := v.Cluster.NodeForClaim(n.Claim); ok && node.Claim != nil && node.Claim.IsTrue(apis.ConditionDisrupting) && node.MarkedForDeletion() &&
			node.Node != nil && slices.ContainsFunc(node.Node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == apis.DisruptedTaintKey }) {
			continue
		}
		var newly bool
		_, err := c.d.Store.MutateNodeClaim(ctx, n.Claim, func(x *apis.NodeClaim) error {
			newly = false
			if !x.Deleting() && !x.IsTrue(apis.ConditionDisrupting) {
				x.SetCondition(apis.ConditionDisrupting, metav1.ConditionTrue, string(cmd.Reason), cmd.Message, now)
				newly = true
			}
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("disruption: mark nodeclaim %s disrupting: %w", n.Claim, err)
		}
		if _, err := c.d.Cluster.AddTaint(ctx, n.Node, termination.DisruptedTaint()); err != nil {
			log.WarnContext(ctx, "tainting candidate node", "node", n.Node, "error", err)
		}
		if newly {
			c.event(ctx, v, n.Node, kube.EventNormal, ReasonDisrupting, "%s", cmd.Message)
		}
	}
	return nil
}

// replacing waits for the replacements to be initialized, then hands the
// candidates to termination; past ReplacementTimeout it rolls back.
func (c *Controller) replacing(ctx context.Context, v *View, cmd *Command, version int64, res *Result, log *slog.Logger) error {
	if err := c.ensureDisrupting(ctx, v, cmd, log); err != nil {
		return err
	}
	var live []string
	for _, n := range cmd.Candidates {
		if node, ok := v.Cluster.NodeForClaim(n.Claim); ok && node.Node != nil {
			live = append(live, node.Name)
		}
	}
	ready, why, err := ReadyToDrain(ctx, v.Cluster, live)
	if err != nil {
		return err
	}
	if ready {
		log.InfoContext(ctx, "replacements initialized; draining candidates", "message", cmd.Message, "replacements", cmd.ReplacementClaims)
		if err := c.markForDeletion(ctx, v, cmd); err != nil {
			return err
		}
		c.remember(ctx, cmd, v.Now)
		res.Done = true
		return c.dropCommand(ctx, version)
	}
	if v.Now.Sub(cmd.ReplacingSince) > c.s.ReplacementTimeout {
		log.WarnContext(ctx, "replacements not initialized in time; rolling back", "why", why, "timeout", c.s.ReplacementTimeout.String())
		c.rollback(ctx, v, cmd, "replacements were not initialized within "+c.s.ReplacementTimeout.String()+": "+why)
		c.d.Metrics.Add(metrics.DisruptionDecisions, 1, metrics.Dimensions{"method": cmd.Method, "decision": "rolled-back"})
		res.Dropped = "replacement timeout: " + why
		return c.dropCommand(ctx, version)
	}
	res.Waiting = why
	// Idempotent: an in-flight replacement already takes the pods, so the
	// pass launches nothing more; it matters when the last one was skipped
	// (provisioner lease held) or a launch failed.
	c.provision(ctx, cmd, log)
	_, err = c.saveCommand(ctx, cmd, version)
	return err
}

func (c *Controller) provision(ctx context.Context, cmd *Command, log *slog.Logger) {
	pr, err := c.d.Provision(ctx)
	if err != nil {
		log.WarnContext(ctx, "replacement provisioning pass failed; retried on the next pass", "error", err)
		return
	}
	for _, name := range pr.Launched {
		if !slices.Contains(cmd.ReplacementClaims, name) {
			cmd.ReplacementClaims = append(cmd.ReplacementClaims, name)
		}
	}
	log.InfoContext(ctx, "replacement provisioning pass", "skipped", pr.Skipped, "launched", pr.Launched, "failed", len(pr.Failed))
}

// markForDeletion hands the candidates to the termination workflow (the
// deletion mark, then a lifecycle message so the drain starts at once).
func (c *Controller) markForDeletion(ctx context.Context, v *View, cmd *Command) error {
	for _, n := range cmd.Candidates {
		updated, first, err := termination.Mark(ctx, c.d.Store, n.Claim, string(cmd.Reason), cmd.Message, v.Now)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("disruption: %w", err)
		}
		if first {
			c.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": string(cmd.Reason), "nodepool": updated.NodePoolName()})
			if cmd.Action() == ActionDelete {
				c.event(ctx, v, n.Node, kube.EventNormal, ReasonDisrupting, "%s", cmd.Message)
			}
			c.log.InfoContext(ctx, "nodeclaim marked for deletion", "nodeclaim", n.Claim, "node", n.Node, "nodepool", n.NodePool,
				"reason", cmd.Reason, "method", cmd.Method)
		}
		if c.d.Requeue != nil {
			msg := queue.Message{Kind: queue.KindLifecycle, Subject: n.Claim, Reason: "disruption:" + cmd.Method, SentAt: v.Now}
			if err := c.d.Requeue(ctx, msg, 0); err != nil {
				c.log.WarnContext(ctx, "handing the claim to the lifecycle", "nodeclaim", n.Claim, "error", err)
			}
		}
	}
	return nil
}

// sweepOrphans releases claims this controller marked Disrupting whose
// command is gone (expired or lost): with no command to finish them they
// would stay tainted and out of use forever. Disrupting marks of others
// (the interruption controller's rebalance replacements) are left alone.
func (c *Controller) sweepOrphans(ctx context.Context, v *View) int {
	var orphans []CommandNode
	for _, n := range v.Cluster.Nodes {
		cl := n.Claim
		if cl == nil || cl.Deleting() || !cl.IsTrue(apis.ConditionDisrupting) || n.Node == nil {
			continue
		}
		switch apis.DisruptionReason(cl.Condition(apis.ConditionDisrupting).Reason) {
		case apis.DisruptionReasonEmpty, apis.DisruptionReasonDrifted, apis.DisruptionReasonUnderutilized:
			orphans = append(orphans, CommandNode{Claim: cl.Name, Node: n.Name, NodePool: n.NodePool()})
		}
	}
	if len(orphans) == 0 {
		return 0
	}
	c.log.WarnContext(ctx, "nodes disrupting without a pending command; releasing them", "nodes", len(orphans))
	c.rollback(ctx, v, &Command{Candidates: orphans}, "its disruption command was lost before the replacement was ready")
	return len(orphans)
}

// rollback clears the Disrupting condition and the taint so the nodes take
// pods again.
func (c *Controller) rollback(ctx context.Context, v *View, cmd *Command, why string) {
	for _, n := range cmd.Candidates {
		_, err := c.d.Store.MutateNodeClaim(ctx, n.Claim, func(x *apis.NodeClaim) error {
			if !x.Deleting() {
				x.ClearCondition(apis.ConditionDisrupting)
			}
			return nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			c.log.WarnContext(ctx, "clearing Disrupting", "nodeclaim", n.Claim, "error", err)
		}
		if node, ok := v.Cluster.NodeForClaim(n.Claim); ok && node.Claim != nil && !node.Claim.Deleting() && node.Node != nil {
			if _, err := c.d.Cluster.RemoveTaints(ctx, node.Name, apis.DisruptedTaintKey, corev1.TaintEffectNoSchedule); err != nil {
				c.log.WarnContext(ctx, "removing the disrupted taint", "node", node.Name, "error", err)
			}
		}
		c.event(ctx, v, n.Node, kube.EventWarning, ReasonBlocked, "Disruption rolled back: %s", why)
	}
}
