package provisioning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
