package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// terminateMarked takes the next termination step (internal/termination)
// for a claim marked for deletion.
func (c *Controller) terminateMarked(ctx context.Context, s *claimState) (bool, error) {
	if !s.cl.Deleting() {
		return false, nil
	}
	return s.finish(c.terminate(ctx, s.cl, s.out))
}

// markAndTerminate marks the claim and takes the first termination step.
func (c *Controller) markAndTerminate(ctx context.Context, cl *apis.NodeClaim, reason, msg, action string) (Outcome, error) {
	marked, newly, err := termination.Mark(ctx, c.d.Store, cl.Name, reason, msg, c.d.Now())
	if errors.Is(err, store.ErrNotFound) {
		return Outcome{Claim: cl.Name, Action: ActionNotFound, Done: true}, nil
	}
	if err != nil {
		return Outcome{Claim: cl.Name}, fmt.Errorf("lifecycle: %w", err)
	}
	if newly {
		c.replaceStatic(ctx, marked) // a removed pool is not in the config: no nudge
	}
	// The outcome names why the claim went (Done says whether it is gone).
	out, err := c.terminate(ctx, marked, Outcome{Claim: cl.Name})
	if err == nil {
		out.Action = action
	}
	return out, err
}

func (c *Controller) terminate(ctx context.Context, cl *apis.NodeClaim, out Outcome) (Outcome, error) {
	res, err := c.term.Step(ctx, cl)
	if err != nil {
		return out, err
	}
	if res.Done {
		out.Action, out.Done = ActionTerminated, true
		return out, nil
	}
	out.Action, out.RequeueAfter = ActionTerminating, res.RequeueAfter
	return out, nil
}

// replaceStatic nudges the provisioner when a static NodePool's claim has
// just been marked: the mark takes it out of the pool's replica count, and
// the provisioner's static phase launches its replacement now rather than
// on its next scheduled run (Karpenter replaces at once). Best effort: the
// schedule still catches a lost nudge.
func (c *Controller) replaceStatic(ctx context.Context, cl *apis.NodeClaim) {
	if c.d.Provision == nil || c.d.Config == nil {
		return
	}
	np := c.d.Config.NodePool(cl.NodePoolName())
	if np == nil || !np.Static() {
		return
	}
	msg := queue.Message{Kind: queue.KindProvision, Subject: "nodepool/" + np.Name, Reason: "static-replacement"}
	if err := c.d.Provision(ctx, msg, 0); err != nil {
		c.log.WarnContext(ctx, "provisioner not nudged; the static replacement waits for its schedule",
			"nodeclaim", cl.Name, "nodepool", np.Name, "error", err)
	}
}
