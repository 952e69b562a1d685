package disruption

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/pods"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
)

// WakeupKey holds the time of the wake-up message last sent (coalescing:
// a pass sends none while an earlier or equal one is still on its way).
const WakeupKey = "disruption/wakeup"

// Wake-ups. The schedule runs a pass every Settings.SchedulePeriod; a
// consolidateAfter or validation delay shorter than that would otherwise
// be honoured only on the next tick. So after each pass the controller
// works out when the next pass is due (Result.WakeAt) and, when that is
// before the schedule is sure to run one, sends itself a message with that
// delay through Deps.Wakeup (the disruption queue, which invokes the
// function). The woken pass is an ordinary pass: it re-reads everything
// and runs every check.

// NextEligible is the earliest time after now at which a candidate that
// emptiness or consolidation waits for becomes eligible, and that
// candidate's node: consolidateAfter (not Never) still running since its
// last pod event, not protected, and empty or in a pool that consolidates
// underutilized nodes. Zero when no candidate is waiting.
func NextEligible(cands []*Candidate, now time.Time) (time.Time, string) {
	var at time.Time
	node := ""
	for _, c := range cands {
		if c.Protected != "" || c.NodePool == nil || c.Claim == nil {
			continue
		}
		if !c.Empty && c.NodePool.Spec.Disruption.ConsolidationPolicy != apis.ConsolidationPolicyWhenEmptyOrUnderutilized && !isBalanced(c.NodePool) {
			continue
		}
		after, ok := c.NodePool.Spec.Disruption.ConsolidateAfter.Get()
		if !ok {
			continue
		}
		t := pods.LastPodEvent(c.Claim).Add(after)
		if t.After(now) && (at.IsZero() || t.Before(at)) {
			at, node = t, c.Name()
		}
	}
	return at, node
}

// WakeDelay is how long a wake-up for a pass due at at should be delayed,
// and whether one is worth sending at all: only when at comes before now +
// period, the latest the schedule's next tick can come (that tick's pass
// looks again). The delay is at most what SQS allows (the pass woken then
// sends the next one).
func WakeDelay(at, now time.Time, period time.Duration) (time.Duration, bool) {
	if at.IsZero() {
		return 0, false
	}
	d := at.Sub(now)
	if d >= period {
		return 0, false
	}
	return min(max(d, 0), queue.MaxDelay), true
}

// pendingCovers says whether the wake-up last sent, due at pending, makes
// one for at unnecessary: it is still to come (due after now) and no later
// than at. One already due was delivered (or is being): its pass may be
// this one.
func pendingCovers(pending, at, now time.Time) bool {
	return !pending.IsZero() && pending.After(now) && !pending.After(at)
}

// wakeAt sets the result's wake-up to at when that is earlier (or none is
// set), saying why and for which nodes.
func (r *Result) wakeAt(at time.Time, why string, nodes ...string) {
	if at.IsZero() || (!r.WakeAt.IsZero() && !at.Before(r.WakeAt)) {
		return
	}
	r.WakeAt, r.WakeFor, r.WakeNodes = at, why, nodes
}

// nextEligible fills the result's wake-up from the candidates of v, for a
// pass that did not run Decide (which computes the same).
func (c *Controller) nextEligible(ctx context.Context, v *View, res *Result) {
	cands, _, err := Candidates(ctx, v)
	if err != nil {
		c.log.WarnContext(ctx, "disruption wake-up: candidates", "error", err)
		return
	}
	at, node := NextEligible(cands, v.Now)
	res.wakeAt(at, "consolidateAfter", node)
}

// pendingWakeup is WakeupKey's value.
type pendingWakeup struct {
	At time.Time `json:"at"`
}

// wake sends the wake-up the pass asked for (Result.WakeAt) unless the
// schedule comes first or one no later is pending. Failures only cost the
// wait until the next tick, so they are logged, never returned. The send
// comes before the record: a crash between the two costs one extra pass,
// never a lost wake-up.
func (c *Controller) wake(ctx context.Context, res *Result) {
	if c.d.Wakeup == nil {
		return
	}
	now := c.d.Now()
	delay, ok := WakeDelay(res.WakeAt, now, c.s.SchedulePeriod)
	if !ok {
		return
	}
	log := c.log.With("wake-at", res.WakeAt.UTC().Format(time.RFC3339), "for", res.WakeFor, "nodes", res.WakeNodes)
	var pending pendingWakeup
	var version int64
	kv, err := c.d.Store.GetKV(ctx, WakeupKey)
	switch {
	case err == nil:
		version = kv.Version
		if json.Unmarshal(kv.Value, &pending) != nil {
			pending = pendingWakeup{}
		}
	case !errors.Is(err, store.ErrNotFound):
		log.WarnContext(ctx, "disruption wake-up: reading the pending one; sending anyway", "error", err)
	}
	if pendingCovers(pending.At, res.WakeAt, now) {
		log.DebugContext(ctx, "disruption wake-up already pending", "pending", pending.At.UTC().Format(time.RFC3339))
		return
	}
	msg := queue.Message{Kind: queue.KindDisruption, Reason: res.WakeFor}
	if err := c.d.Wakeup(ctx, msg, delay); err != nil {
		log.WarnContext(ctx, "disruption wake-up not sent; the next scheduled pass covers it", "error", err)
		return
	}
	res.WakeSent = true
	log.InfoContext(ctx, "disruption wake-up sent", "delay", delay.String())
	body, err := json.Marshal(pendingWakeup{At: res.WakeAt})
	if err == nil {
		_, err = c.d.Store.PutKV(ctx, WakeupKey, body, version, delay+c.s.SchedulePeriod)
	}
	if err != nil {
		log.WarnContext(ctx, "disruption wake-up sent but not recorded (a later pass may send another)", "error", err)
	}
}
