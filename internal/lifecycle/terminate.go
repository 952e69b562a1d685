package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/nodewright/nodewright/internal/apis"
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
	marked, _, err := termination.Mark(ctx, c.d.Store, cl.Name, reason, msg, c.d.Now())
	if errors.Is(err, store.ErrNotFound) {
		return Outcome{Claim: cl.Name, Action: ActionNotFound, Done: true}, nil
	}
	if err != nil {
		return Outcome{Claim: cl.Name}, fmt.Errorf("lifecycle: %w", err)
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
