package lifecycle

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/termination"
)

// Node repair, Karpenter's (behind the NodeRepair feature gate): a Node
// whose condition has been in an unhealthy state longer than that state's
// toleration is replaced, forcefully (its pods are not being served), and
// budgets do not apply. It never repairs in a NodePool where more than
// repairMaxUnhealthyShare of the nodes are unhealthy: that is a wider
// outage (a bad AMI, a network fault) that replacing nodes would only
// make worse.

// repairPolicy is one unhealthy state of a node condition and how long it
// is tolerated.
type repairPolicy struct {
	condition  corev1.NodeConditionType
	status     corev1.ConditionStatus
	toleration time.Duration
}

// repairPolicies are Karpenter's for AWS: the kubelet's Ready condition,
// and the conditions the EKS node monitoring agent sets.
var repairPolicies = []repairPolicy{
	{corev1.NodeReady, corev1.ConditionFalse, 30 * time.Minute},
	{corev1.NodeReady, corev1.ConditionUnknown, 30 * time.Minute},
	{"AcceleratedHardwareReady", corev1.ConditionFalse, 10 * time.Minute},
	{"StorageReady", corev1.ConditionFalse, 30 * time.Minute},
	{"NetworkingReady", corev1.ConditionFalse, 30 * time.Minute},
	{"KernelReady", corev1.ConditionFalse, 30 * time.Minute},
	{"ContainerRuntimeReady", corev1.ConditionFalse, 30 * time.Minute},
}

// repairMaxUnhealthyShare is Karpenter's cap: 20 % of a NodePool's nodes
// (rounded up) may be unhealthy for repair to act.
const repairMaxUnhealthyShare = 0.20

// unhealthy returns the condition of n matching a repair policy, and when
// it has been in that state for longer than the toleration.
func unhealthy(n *corev1.Node) (cond *corev1.NodeCondition, due time.Time, ok bool) {
	for _, p := range repairPolicies {
		for i := range n.Status.Conditions {
			c := &n.Status.Conditions[i]
			if c.Type == p.condition && c.Status == p.status {
				return c, c.LastTransitionTime.Add(p.toleration), true
			}
		}
	}
	return nil, time.Time{}, false
}

// repair replaces the claim's Node once a condition has been unhealthy for
// longer than its toleration, unless too much of the NodePool is unhealthy.
func (c *Controller) repair(ctx context.Context, s *claimState) (bool, error) {
	if !c.s.NodeRepair || s.node == nil {
		return false, nil
	}
	cond, due, ok := unhealthy(s.node)
	if !ok || s.now.Before(due) {
		return false, nil
	}
	blocked, err := c.repairBlocked(ctx, s)
	if err != nil || blocked != "" {
		if blocked != "" {
			s.log.WarnContext(ctx, "node repair blocked", "node", s.node.Name, "reason", blocked)
			_ = c.d.Cluster.NodeEvent(ctx, s.node, kube.EventWarning, "NodeRepairBlocked", "Cannot repair Node: %s", blocked)
		}
		return false, err
	}
	msg := fmt.Sprintf("node %s: %s is %s since %s", s.node.Name, cond.Type, cond.Status, cond.LastTransitionTime.UTC().Format(time.RFC3339))
	s.log.WarnContext(ctx, "repairing unhealthy node", "node", s.node.Name, "condition", string(cond.Type), "status", string(cond.Status))
	marked, newly, err := termination.MarkForceful(ctx, c.d.Store, s.cl.Name, ReasonUnhealthy, msg, s.now)
	if err != nil {
		return true, fmt.Errorf("lifecycle: repair nodeclaim %s: %w", s.cl.Name, err)
	}
	if newly {
		c.replaceStatic(ctx, marked)
	}
	out, err := c.terminate(ctx, marked, Outcome{Claim: s.cl.Name})
	if err == nil {
		out.Action = ActionRepaired
	}
	return s.finish(out, err)
}

// repairBlocked says why the NodePool is too unhealthy to repair in ("":
// it is not): more than repairMaxUnhealthyShare of its nodes (rounded up)
// are unhealthy, whatever their tolerations.
func (c *Controller) repairBlocked(ctx context.Context, s *claimState) (string, error) {
	claims, err := s.v.poolClaims(ctx, s.cl.NodePoolName())
	if err != nil {
		return "", fmt.Errorf("lifecycle: repair nodeclaim %s: %w", s.cl.Name, err)
	}
	total, bad := 0, 0
	for _, cl := range claims {
		n, err := s.v.node(ctx, cl)
		if err != nil {
			return "", fmt.Errorf("lifecycle: repair nodeclaim %s: %w", s.cl.Name, err)
		}
		if n == nil {
			continue
		}
		total++
		if _, _, ok := unhealthy(n); ok {
			bad++
		}
	}
	if limit := int(math.Ceil(repairMaxUnhealthyShare * float64(total))); bad > limit {
		return fmt.Sprintf("%d of the %d nodes of NodePool %s are unhealthy, more than %.0f%%", bad, total, s.cl.NodePoolName(), repairMaxUnhealthyShare*100), nil
	}
	return "", nil
}
