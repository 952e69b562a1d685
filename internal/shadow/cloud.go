package shadow

import (
	"context"
	"time"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// Cloud is an *aws.Provider whose writes do nothing: Launch plans the
// launch (aws.Provider.PlanLaunch, reads only), tells the recorder and
// answers with an instance that does not exist; Terminate refuses; no
// launch template is deleted.
type Cloud struct {
	*nwaws.Provider
	Recorder *Recorder
}

// ShadowInstancePrefix starts the ID of every instance Launch answers
// with: no EC2 instance ID looks like it.
const ShadowInstancePrefix = "shadow-"

// Launch plans the claim's launch and launches nothing.
func (c *Cloud) Launch(ctx context.Context, req nwaws.LaunchRequest) (nwaws.Instance, error) {
	inst, price, err := c.PlanLaunch(ctx, req)
	if err != nil {
		return nwaws.Instance{}, err
	}
	inst.ID = ShadowInstancePrefix + req.NodeClaim.Name
	inst.State = "running"
	inst.LaunchTime = time.Now()
	if c.Recorder != nil {
		inst.LaunchTime = c.Recorder.now()
		c.Recorder.launched(req.NodeClaim, inst, price)
	}
	return inst, nil
}

// Terminate refuses.
func (c *Cloud) Terminate(context.Context, ...string) error { return ErrShadow }

// DeleteUnusedLaunchTemplates deletes nothing.
func (c *Cloud) DeleteUnusedLaunchTemplates(context.Context, func(string) bool, time.Duration) ([]string, error) {
	return nil, nil
}
