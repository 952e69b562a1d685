package termination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

// Marker is the store call Mark needs (*store.Store).
type Marker interface {
	MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error)
}

// Mark marks the named claim for deletion in one conditional write (see
// apis.NodeClaim.MarkForDeletion): reason is an apis.DeletionReason* value,
// message says why in words. newly is false when the claim was already
// marked; the first mark (time and reason) stands. A missing claim gives
// an error wrapping store.ErrNotFound. Callers then send a lifecycle work
// message for the claim so its drain starts at once.
func Mark(ctx context.Context, st Marker, name, reason, message string, now time.Time) (claim *apis.NodeClaim, newly bool, err error) {
	return mark(ctx, st, name, reason, message, now, false)
}

// MarkForceful is Mark for a deletion that must not wait for the drain
// (node repair, as Karpenter's: the node is unhealthy, its pods are not
// serving): the claim's terminationGracePeriod becomes zero, so every pod
// still on the node is deleted at once, PDBs notwithstanding.
func MarkForceful(ctx context.Context, st Marker, name, reason, message string, now time.Time) (claim *apis.NodeClaim, newly bool, err error) {
	return mark(ctx, st, name, reason, message, now, true)
}

func mark(ctx context.Context, st Marker, name, reason, message string, now time.Time, forceful bool) (claim *apis.NodeClaim, newly bool, err error) {
	claim, err = st.MutateNodeClaim(ctx, name, func(c *apis.NodeClaim) error {
		newly = c.MarkForDeletion(reason, message, metav1.NewTime(now))
		if newly && forceful {
			c.Spec.TerminationGracePeriod = &metav1.Duration{}
		}
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("mark nodeclaim %s for deletion (%s): %w", name, reason, err)
	}
	return claim, newly, nil
}

// tombstone deletes the claim's latest version and reports whether this
// call did (false: another Step got there first).
func (t *Terminator) tombstone(ctx context.Context, name string) (bool, error) {
	for attempt := 0; ; attempt++ {
		cur, err := t.d.Store.GetNodeClaim(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("tombstone nodeclaim %s: %w", name, err)
		}
		err = t.d.Store.DeleteNodeClaim(ctx, cur)
		if err == nil {
			return true, nil
		}
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= 7 {
			return false, fmt.Errorf("tombstone nodeclaim %s: %w", name, err)
		}
	}
}

// setCondition records progress on the claim when it changes and reports
// whether the claim is gone (tombstoned by a concurrent Step elsewhere: the
// caller stops, the work is done). Other failures are logged, not returned:
// the condition is informational and the next Step derives the same state
// from the world.
func (t *Terminator) setCondition(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) (gone bool) {
	if c := cl.Condition(typ); c != nil && c.Status == status && c.Reason == reason {
		return false
	}
	updated, err := t.d.Store.MutateNodeClaim(ctx, cl.Name, func(c *apis.NodeClaim) error {
		c.SetCondition(typ, status, reason, msg, metav1.NewTime(now))
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		log.DebugContext(ctx, "nodeclaim tombstoned by another termination step meanwhile", "condition", typ)
		return true
	}
	if err != nil {
		log.WarnContext(ctx, "recording termination progress", "condition", typ, "error", err)
		return false
	}
	*cl = *updated
	return false
}
