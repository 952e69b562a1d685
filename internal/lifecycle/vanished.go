package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// collectVanished removes a claim whose instance is gone. An instance that
// is gone takes its pods with it: nothing to drain, whether or not the
// claim was marked (an interruption's state-change, a person in the
// console). Claims whose termination already terminated the instance
// finish through their Step instead; claims launched less than GCGrace ago
// are not looked at (the listing may lag the launch).
func (c *Controller) collectVanished(ctx context.Context, s *claimState) (bool, error) {
	id := s.cl.Status.InstanceID
	if !s.launched || id == "" || s.now.Sub(s.launchedAt) < c.s.GCGrace || s.cl.IsTrue(termination.ConditionInstanceTerminating) {
		return false, nil
	}
	inst, gone, err := s.v.instance(ctx, id)
	if err != nil {
		return true, fmt.Errorf("lifecycle: nodeclaim %s: %w", s.cl.Name, err)
	}
	if !gone {
		return false, nil
	}
	// EC2's reason says why an instance died young: a key EBS may not use
	// (Client.InvalidKMSKey.InvalidState), a spot interruption, a person.
	return s.finish(c.removeVanished(ctx, s.log.With("statereason", inst.StateReason), s.cl, s.v, s.out))
}

// removeVanished removes a claim whose instance no longer exists, and its
// Node: the pods are gone with the instance, so there is nothing to drain.
func (c *Controller) removeVanished(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, v view, out Outcome) (Outcome, error) {
	node, err := v.node(ctx, cl)
	if err != nil {
		return out, fmt.Errorf("lifecycle: nodeclaim %s: %w", cl.Name, err)
	}
	if node != nil {
		if err := c.d.Cluster.ReleaseNode(ctx, node.Name, node.UID); err != nil {
			return out, fmt.Errorf("lifecycle: delete node %s of vanished instance %s: %w", node.Name, cl.Status.InstanceID, err)
		}
	}
	for attempt := 0; ; attempt++ {
		cur, err := c.d.Store.GetNodeClaim(ctx, cl.Name)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("lifecycle: nodeclaim %s: %w", cl.Name, err)
		}
		cur.SetCondition(termination.ConditionInstanceTerminating, metav1.ConditionTrue, "InstanceNotFound",
			"instance "+cur.Status.InstanceID+" no longer exists", metav1.NewTime(c.d.Now()))
		err = c.d.Store.DeleteNodeClaim(ctx, cur)
		if err == nil || errors.Is(err, store.ErrNotFound) {
			break
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= 7 {
			return out, fmt.Errorf("lifecycle: tombstone nodeclaim %s: %w", cl.Name, err)
		}
	}
	log.InfoContext(ctx, "garbage collected nodeclaim whose instance is gone", "node", nodeName(node))
	c.d.Metrics.Add(metrics.NodeClaimsTerminated, 1, metrics.Dimensions{"nodepool": cl.NodePoolName(), "reason": "InstanceNotFound"})
	out.Action, out.Done = ActionVanished, true
	return out, nil
}

func nodeName(n *corev1.Node) string {
	if n == nil {
		return ""
	}
	return n.Name
}
