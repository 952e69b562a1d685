package aws

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/catalog"
)

// OfferingKey identifies an EC2 capacity pool (catalog.OfferingKey, the key
// the solver and the store use too).
type OfferingKey = catalog.OfferingKey

// OfferingKeyOf is the key of a type's catalog offering.
func OfferingKeyOf(instanceType string, o catalog.Offering) OfferingKey {
	return OfferingKey{InstanceType: instanceType, Zone: o.Zone, CapacityType: o.CapacityType, ReservationID: o.ReservationID}
}

// unavailableIn reports whether set holds k, or, for one reservation's
// key, the entry without a reservation that covers them all.
func unavailableIn[V any](set map[OfferingKey]V, k OfferingKey) bool {
	if _, ok := set[k]; ok {
		return true
	}
	if k.ReservationID == "" {
		return false
	}
	k.ReservationID = ""
	_, ok := set[k]
	return ok
}

// ICEStore persists the unavailable-offerings set so every function sees it
// (internal/store implements it on DynamoDB). Expired entries must not be
// returned: DynamoDB's TTL deletion is lazy.
type ICEStore interface {
	// PutUnavailable records key as unavailable until expires (extending, never shortening, an entry).
	PutUnavailable(ctx context.Context, key OfferingKey, expires time.Time, reason string) error
	// ListUnavailable returns every entry that has not expired.
	ListUnavailable(ctx context.Context) (map[OfferingKey]time.Time, error)
}

// ICECache is the unavailable-offerings set: a local copy of the shared
// store, written through on every capacity error. Without a store it is
// process-local, which is what Karpenter has.
type ICECache struct {
	store ICEStore
	ttl   time.Duration
	now   func() time.Time

	syncMu   sync.Mutex // serializes store reads
	mu       sync.Mutex
	entries  map[OfferingKey]time.Time
	lastSync time.Time
}

// NewICECache returns an ICE set whose entries last ttl. store may be nil.
func NewICECache(store ICEStore, ttl time.Duration, now func() time.Time) *ICECache {
	if ttl <= 0 {
		ttl = 3 * time.Minute
	}
	if now == nil {
		now = time.Now
	}
	return &ICECache{store: store, ttl: ttl, now: now, entries: map[OfferingKey]time.Time{}}
}

// MarkUnavailable keeps key out of launches for the TTL. The local set is
// updated even when the store write fails (the error is returned so the
// caller can log it; the launch itself goes on).
func (c *ICECache) MarkUnavailable(ctx context.Context, key OfferingKey, reason string) error {
	expires := c.now().Add(c.ttl)
	c.mu.Lock()
	if cur, ok := c.entries[key]; !ok || cur.Before(expires) {
		c.entries[key] = expires
	}
	c.mu.Unlock()
	if c.store == nil {
		return nil
	}
	if err := c.store.PutUnavailable(ctx, key, expires, reason); err != nil {
		return fmt.Errorf("record unavailable offering %s: %w", key, err)
	}
	return nil
}

// IsUnavailable reports whether k (or, for one reservation, every
// reservation of its type and zone) is in the set and not expired.
func (c *ICECache) IsUnavailable(k OfferingKey) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	maps.DeleteFunc(c.entries, func(_ OfferingKey, exp time.Time) bool { return !now.Before(exp) })
	return unavailableIn(c.entries, k)
}

// Snapshot returns the unexpired entries.
func (c *ICECache) Snapshot() map[OfferingKey]time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	maps.DeleteFunc(c.entries, func(_ OfferingKey, exp time.Time) bool { return !now.Before(exp) })
	return maps.Clone(c.entries)
}

// Sync merges the shared store's entries into the local set. maxAge > 0
// skips the read when the last sync is younger than that.
func (c *ICECache) Sync(ctx context.Context, maxAge time.Duration) error {
	if c.store == nil {
		return nil
	}
	// Concurrent launches share one read: the first reads, the rest wait
	// and then find the set fresh.
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	c.mu.Lock()
	fresh := maxAge > 0 && c.now().Sub(c.lastSync) < maxAge
	c.mu.Unlock()
	if fresh {
		return nil
	}
	remote, err := c.store.ListUnavailable(ctx)
	if err != nil {
		return fmt.Errorf("read unavailable offerings: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for k, exp := range remote {
		if now.Before(exp) {
			if cur, ok := c.entries[k]; !ok || cur.Before(exp) {
				c.entries[k] = exp
			}
		}
	}
	c.lastSync = now
	return nil
}
