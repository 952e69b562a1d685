package provisioning

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/queue"
)

// ReasonThrottled is the Launched=Unknown reason of a claim EC2 throttled.
const ReasonThrottled = "Throttled"

// errPassThrottled is the cause recorded on the claims a throttled pass
// did not try.
var errPassThrottled = fmt.Errorf("%w: an earlier launch of this run was throttled, so this claim waits for a later run", nwaws.ErrThrottled)

// throttledWait keeps a claim whose launch EC2 throttled, or that a
// throttled pass did not try. A throttle is no answer about capacity:
// nothing launched and no attempt is settled, so the claim keeps its name
// (its next launch sends the same ClientToken) and its pods are not
// re-planned; the pass's nudge brings it back after a backoff.
func (pa *pass) throttledWait(ctx context.Context, log *slog.Logger, o outcome, err error) outcome {
	o.err = err
	cl := o.job.claim
	pa.appendResult(&pa.res.Throttled, cl.Name)
	pa.mu.Lock()
	if created := cl.CreationTimestamp.Time; created.After(pa.youngest) {
		pa.youngest = created
	}
	pa.mu.Unlock()
	log.WarnContext(ctx, "EC2 throttled the launch path; the nodeclaim waits for a later run", "error", err)
	if ctx.Err() == nil {
		pa.launchUnknown(ctx, log, cl, ReasonThrottled, err)
	}
	return o
}

// throttleDelay is the backoff before the run a throttled one asks for:
// the youngest throttled claim's age, within the settings' bounds.
func (pa *pass) throttleDelay() time.Duration {
	s := pa.p.s
	pa.mu.Lock()
	age := pa.p.d.Now().Sub(pa.youngest)
	pa.mu.Unlock()
	return min(max(age, s.ThrottleBackoff), s.MaxThrottleBackoff)
}

// nudgeThrottled asks for another run after the backoff when this one
// kept throttled claims (best effort: the schedule's tick retries too).
func (pa *pass) nudgeThrottled(ctx context.Context) {
	if len(pa.res.Throttled) == 0 || pa.p.d.Nudge == nil {
		return
	}
	delay := pa.throttleDelay()
	msg := queue.Message{Kind: queue.KindProvision, Subject: pa.res.Throttled[0], Reason: "throttled"}
	if err := pa.p.d.Nudge(ctx, msg, delay); err != nil {
		pa.p.log.WarnContext(ctx, "asking for a run after the throttle backoff", "delay", delay, "error", err)
	}
}
