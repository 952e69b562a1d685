package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
)

// Liveness: a claim must launch within LaunchTimeout of its creation, its
// Node must register within RegistrationTTL of the launch, and a
// registered claim must keep its Node. A claim that fails any of these is
// marked for deletion and its instance (if any) terminated.

// launchLiveness waits for a claim that has not launched yet and deletes
// it once LaunchTimeout has passed since its creation.
func (c *Controller) launchLiveness(ctx context.Context, s *claimState) (bool, error) {
	if s.launched {
		return false, nil
	}
	age := s.now.Sub(s.cl.CreationTimestamp.Time)
	if age >= c.s.LaunchTimeout {
		s.log.WarnContext(ctx, "nodeclaim not launched in time; deleting it", "age", age.Round(time.Second).String())
		return s.finish(c.markAndTerminate(ctx, s.cl, ReasonLaunchTimeout, fmt.Sprintf("not launched within %s", c.s.LaunchTimeout), ActionLiveness))
	}
	s.out.Action, s.out.RequeueAfter = ActionWaiting, c.s.LaunchTimeout-age
	return true, nil
}

// awaitRegistration waits for a launched claim's Node and terminates the
// claim once RegistrationTTL has passed since the launch without one.
func (c *Controller) awaitRegistration(ctx context.Context, s *claimState) (bool, error) {
	if waited := s.now.Sub(s.launchedAt); waited >= c.s.RegistrationTTL {
		s.log.WarnContext(ctx, "node did not register in time; terminating", "waited", waited.Round(time.Second).String())
		return s.finish(c.markAndTerminate(ctx, s.cl, ReasonRegistrationTimeout, fmt.Sprintf("no node registered within %s of launch", c.s.RegistrationTTL), ActionLiveness))
	}
	s.out.Action, s.out.RequeueAfter = ActionWaiting, c.poll(s.launchedAt, s.now)
	return true, nil
}

// nodeDeleting terminates a claim whose Node someone is deleting (`kubectl
// delete node`): the finalizer registration put on the Node holds it while
// the termination drains it as any other disruption does (taint, evictions
// that respect PodDisruptionBudgets, terminationGracePeriod), terminates the
// instance and finally takes the finalizer off, as Karpenter's does.
func (c *Controller) nodeDeleting(ctx context.Context, s *claimState) (bool, error) {
	if s.node == nil || s.node.DeletionTimestamp == nil {
		return false, nil
	}
	s.log.InfoContext(ctx, "the node is being deleted; draining it and terminating its instance", "node", s.node.Name)
	return s.finish(c.markAndTerminate(ctx, s.cl, ReasonNodeDeleted, "node "+s.node.Name+" is being deleted", ActionNodeDeleted))
}

// nodeLiveness ends a registered claim whose Node is gone while the
// instance lives: someone deleted the Node. Karpenter deletes the NodeClaim
// then (its Node finalizer); an instance left without a Node would cost
// money and serve nothing. A grace period covers a Node being re-created
// under the same name.
func (c *Controller) nodeLiveness(ctx context.Context, s *claimState) (bool, error) {
	if s.node != nil {
		return false, nil
	}
	reg := s.cl.Condition(apis.ConditionRegistered).LastTransitionTime.Time
	if s.now.Sub(reg) < c.s.GCGrace {
		s.out.Action, s.out.RequeueAfter = ActionWaiting, c.s.GCGrace-s.now.Sub(reg)
		return true, nil
	}
	s.log.WarnContext(ctx, "the node of a registered nodeclaim was deleted; terminating its instance", "node", s.cl.Status.NodeName)
	return s.finish(c.markAndTerminate(ctx, s.cl, ReasonNodeDeleted, "node "+s.cl.Status.NodeName+" was deleted", ActionNodeDeleted))
}
