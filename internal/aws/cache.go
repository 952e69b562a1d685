package aws

import (
	"context"
	"sync"
	"time"
)

// ttlCache memoizes one lookup per key for ttl. Errors are never cached, and a
// caller that saw an error downstream (a launch failing on a resolved subnet,
// say) calls invalidate so the next call asks AWS again.
type ttlCache[V any] struct {
	mu      sync.Mutex
	ttl     time.Duration
	now     func() time.Time
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	val     V
	expires time.Time
}

func newTTLCache[V any](ttl time.Duration, now func() time.Time) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, now: now, entries: map[string]ttlEntry[V]{}}
}

// get returns the cached value for key or computes it with fill. Concurrent
// misses may both call fill; the results are equivalent so the last one wins.
func (c *ttlCache[V]) get(ctx context.Context, key string, fill func(context.Context) (V, error)) (V, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok && c.now().Before(e.expires) {
		c.mu.Unlock()
		return e.val, nil
	}
	c.mu.Unlock()
	v, err := fill(ctx)
	if err != nil {
		c.invalidate(key)
		var zero V
		return zero, err
	}
	c.mu.Lock()
	c.entries[key] = ttlEntry[V]{val: v, expires: c.now().Add(c.ttl)}
	c.mu.Unlock()
	return v, nil
}

func (c *ttlCache[V]) invalidate(key string) {
	c.mu.Lock()
	delete(c.entries, key)
	c.mu.Unlock()
}

func (c *ttlCache[V]) invalidateAll() {
	c.mu.Lock()
	clear(c.entries)
	c.mu.Unlock()
}
