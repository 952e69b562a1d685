package disruption

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/store"
)

// loadCommand reads the pending command and its version (nil when none).
func (c *Controller) loadCommand(ctx context.Context) (*Command, int64, error) {
	kv, err := c.d.Store.GetKV(ctx, CommandKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("disruption: read pending command: %w", err)
	}
	var cmd Command
	if err := json.Unmarshal(kv.Value, &cmd); err != nil {
		// Unreadable: drop it rather than block disruption forever.
		c.log.ErrorContext(ctx, "pending disruption command unreadable; dropped", "error", err)
		return nil, 0, c.dropCommand(ctx, kv.Version)
	}
	return &cmd, kv.Version, nil
}

// saveCommand writes the command at version (0: create) and returns its
// new version.
func (c *Controller) saveCommand(ctx context.Context, cmd *Command, version int64) (int64, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return version, fmt.Errorf("disruption: encode command: %w", err)
	}
	// The TTL outlives any command, so a lost one cannot block forever.
	v, err := c.d.Store.PutKV(ctx, CommandKey, body, version, c.s.ReplacementTimeout+c.s.ValidationDelay+time.Hour)
	if err != nil {
		return version, fmt.Errorf("disruption: save command: %w", err)
	}
	return v, nil
}

// dropCommand deletes the command at version (0: it was never saved).
func (c *Controller) dropCommand(ctx context.Context, version int64) error {
	if version == 0 {
		return nil
	}
	if err := c.d.Store.DeleteKV(ctx, CommandKey, version); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("disruption: clear command: %w", err)
	}
	return nil
}

// history reads the recent replacements (flip-flop protection); unreadable
// history is logged and treated as none.
func (c *Controller) history(ctx context.Context) []HistoryEntry {
	kv, err := c.d.Store.GetKV(ctx, HistoryKey)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			c.log.WarnContext(ctx, "reading disruption history", "error", err)
		}
		return nil
	}
	var h []HistoryEntry
	if err := json.Unmarshal(kv.Value, &h); err != nil {
		c.log.WarnContext(ctx, "disruption history unreadable", "error", err)
		return nil
	}
	return h
}

// remember records a finished replacement for flip-flop protection.
func (c *Controller) remember(ctx context.Context, cmd *Command, now time.Time) {
	if len(cmd.ReplacementClaims) == 0 {
		return
	}
	for range 3 {
		var h []HistoryEntry
		var version int64
		if kv, err := c.d.Store.GetKV(ctx, HistoryKey); err == nil {
			version = kv.Version
			_ = json.Unmarshal(kv.Value, &h)
		}
		kept := h[:0]
		for _, e := range h {
			if now.Sub(e.At) <= c.s.FlipFlopWindow {
				kept = append(kept, e)
			}
		}
		var from []string
		for _, n := range cmd.Candidates {
			from = append(from, n.InstanceType)
		}
		kept = append(kept, HistoryEntry{At: now, FromTypes: from, Replacements: cmd.ReplacementClaims})
		body, _ := json.Marshal(kept)
		_, err := c.d.Store.PutKV(ctx, HistoryKey, body, version, c.s.FlipFlopWindow)
		if err == nil || !errors.Is(err, store.ErrConflict) {
			if err != nil {
				c.log.WarnContext(ctx, "recording disruption history", "error", err)
			}
			return
		}
	}
}
