package provisioning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
)

// lastRun is the record of the last completed run, which lets nudges sent
// before it started be dropped: that run already saw their pods.
type lastRun struct {
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Token      int64     `json:"token"`
}

// lastRun reads the record and its version (nil when no run completed yet).
func (p *Provisioner) lastRun(ctx context.Context) (*lastRun, int64, error) {
	kv, err := p.d.Store.GetKV(ctx, LastRunKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var lr lastRun
	if err := json.Unmarshal(kv.Value, &lr); err != nil {
		return nil, kv.Version, fmt.Errorf("decode %s: %w", LastRunKey, err)
	}
	return &lr, kv.Version, nil
}

// recordRun writes the record, keeping a newer one a run that lost the
// lease wrote meanwhile.
func (p *Provisioner) recordRun(ctx context.Context, rec lastRun, version int64) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := p.d.Store.PutKV(ctx, LastRunKey, body, version, 0); err != nil {
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		// Someone wrote it since we read it (we held the lease, so it was
		// a run that lost it): re-read and write ours only if newer.
		cur, v, rerr := p.lastRun(ctx)
		if rerr != nil {
			return rerr
		}
		if cur != nil && !cur.StartedAt.Before(rec.StartedAt) {
			return nil
		}
		_, err = p.d.Store.PutKV(ctx, LastRunKey, body, v, 0)
		return err
	}
	return nil
}

// allBefore reports whether every nudge was sent before t. A nudge without
// a send time can never be proved stale.
func allBefore(ts []time.Time, t time.Time) bool {
	for _, x := range ts {
		if x.IsZero() || !x.Before(t) {
			return false
		}
	}
	return true
}

// nudgeAfterHolder keeps a nudge that found the lease held: the run
// holding it may have taken its snapshot before the pods (or the marked
// nodes) the nudge is about, and dropping it would leave them to the
// next schedule tick, a minute later. The nudge comes back after
// LeaseHeldDelay with its own send time, so it is dropped as stale once
// a run that started after it completes. Best effort: the tick remains.
func (p *Provisioner) nudgeAfterHolder(ctx context.Context, tr Trigger) {
	if tr.Source != TriggerNudge || p.d.Nudge == nil {
		return
	}
	var latest time.Time
	for _, t := range tr.Nudges {
		if t.After(latest) {
			latest = t
		}
	}
	msg := queue.Message{Kind: queue.KindProvision, Subject: "after-lease", Reason: "lease-held", SentAt: latest}
	if err := p.d.Nudge(ctx, msg, p.s.LeaseHeldDelay); err != nil {
		p.log.WarnContext(ctx, "keeping a nudge that found the lease held", "error", err)
	}
}
