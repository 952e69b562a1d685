package lifecycle

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
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

// statusCheckToleration is how long an EC2 status check may have failed
// before the node is repaired (Karpenter v1.14.1
// pkg/providers/instancestatus UnhealthyThreshold).
const statusCheckToleration = 120 * time.Second

// healthProblem is why a node needs repair and when repair is due.
type healthProblem struct {
	what string
	due  time.Time
}

// problemOf is n's first unhealthy condition, else its instance's failed
// EC2 status check (impaired: instance ID -> failing since).
func problemOf(n *corev1.Node, cl *apis.NodeClaim, impaired map[string]time.Time) (healthProblem, bool) {
	if cond, due, ok := unhealthy(n); ok {
		since := cond.LastTransitionTime.UTC().Format(time.RFC3339)
		return healthProblem{what: fmt.Sprintf("%s is %s since %s", cond.Type, cond.Status, since), due: due}, true
	}
	if _, id, err := nwaws.ParseProviderID(cl.Status.ProviderID); err == nil {
		if since, ok := impaired[id]; ok {
			return healthProblem{what: "instance " + id + " fails its EC2 status check since " + since.UTC().Format(time.RFC3339),
				due: since.Add(statusCheckToleration)}, true
		}
	}
	return healthProblem{}, false
}

// repair replaces the claim's Node once a condition has been unhealthy, or
// its instance has failed an EC2 status check, for longer than the
// toleration, unless too much of the NodePool is unhealthy. Karpenter acts
// on status checks always and outside its repair gate and share guard
// (its interruption controller); nodewright keeps both behind NodeRepair
// and its 20 % guard, since the replacement is forceful.
func (c *Controller) repair(ctx context.Context, s *claimState) (bool, error) {
	if !c.s.NodeRepair || s.node == nil {
		return false, nil
	}
	impaired, err := s.v.impaired(ctx)
	if err != nil {
		// Conditions still repair; the checks are read again next pass.
		s.log.WarnContext(ctx, "node repair without status checks", "error", err)
	}
	p, ok := problemOf(s.node, s.cl, impaired)
	if !ok || s.now.Before(p.due) {
		return false, nil
	}
	blocked, err := c.repairBlocked(ctx, s, impaired)
	if err != nil || blocked != "" {
		if blocked != "" {
			s.log.WarnContext(ctx, "node repair blocked", "node", s.node.Name, "reason", blocked)
			_ = c.d.Cluster.NodeEvent(ctx, s.node, kube.EventWarning, "NodeRepairBlocked", "Cannot repair Node: %s", blocked)
		}
		return false, err
	}
	msg := fmt.Sprintf("node %s: %s", s.node.Name, p.what)
	s.log.WarnContext(ctx, "repairing unhealthy node", "node", s.node.Name, "problem", p.what)
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
// are unhealthy or fail a status check, whatever their tolerations.
func (c *Controller) repairBlocked(ctx context.Context, s *claimState, impaired map[string]time.Time) (string, error) {
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
		if _, ok := problemOf(n, cl, impaired); ok {
			bad++
		}
	}
	if limit := int(math.Ceil(repairMaxUnhealthyShare * float64(total))); bad > limit {
		return fmt.Sprintf("%d of the %d nodes of NodePool %s are unhealthy, more than %.0f%%", bad, total, s.cl.NodePoolName(), repairMaxUnhealthyShare*100), nil
	}
	return "", nil
}
