package shadow

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

// ClaimLifetime is how long a NodeClaim a shadow pass created stays
// readable: long enough for the pass that made it (its batching window,
// solve and launches), shorter than the schedule's minute, so the next pass
// plans the still-pending pods afresh instead of counting on claims that
// will never have a node.
const ClaimLifetime = 45 * time.Second

// Claims is the store with NodeClaim writes kept in memory: creates,
// mutations and deletes change a local copy that expires after
// ClaimLifetime; reads see it over the table's records. Everything else
// (leases, checkpoints, caches, the ICE set) is the table's.
type Claims struct {
	*store.Store
	Now func() time.Time

	mu    sync.Mutex
	local map[string]localClaim
}

type localClaim struct {
	claim   *apis.NodeClaim
	deleted bool
	at      time.Time
}

func (c *Claims) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// get returns the live local copy of name (held under c.mu).
func (c *Claims) get(name string) (localClaim, bool) {
	l, ok := c.local[name]
	if !ok || c.now().Sub(l.at) > ClaimLifetime {
		delete(c.local, name)
		return localClaim{}, false
	}
	return l, true
}

func (c *Claims) put(name string, cl *apis.NodeClaim, deleted bool) {
	if c.local == nil {
		c.local = map[string]localClaim{}
	}
	at := c.now()
	if prev, ok := c.local[name]; ok {
		at = prev.at
	}
	c.local[name] = localClaim{claim: cl, deleted: deleted, at: at}
}

// CreateNodeClaim keeps nc in memory.
func (c *Claims) CreateNodeClaim(_ context.Context, nc *apis.NodeClaim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.get(nc.Name); ok {
		return fmt.Errorf("create nodeclaim %s: %w", nc.Name, store.ErrAlreadyExists)
	}
	c.put(nc.Name, nc.DeepCopy(), false)
	return nil
}

// GetNodeClaim reads the local copy, else the table's record.
func (c *Claims) GetNodeClaim(ctx context.Context, name string) (*apis.NodeClaim, error) {
	c.mu.Lock()
	l, ok := c.get(name)
	c.mu.Unlock()
	switch {
	case ok && l.deleted:
		return nil, fmt.Errorf("get nodeclaim %s: %w", name, store.ErrNotFound)
	case ok:
		return l.claim.DeepCopy(), nil
	}
	return c.Store.GetNodeClaim(ctx, name)
}

// MutateNodeClaim applies fn to a copy and keeps the result in memory.
func (c *Claims) MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error) {
	cur, err := c.GetNodeClaim(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := fn(cur); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.put(name, cur.DeepCopy(), false)
	c.mu.Unlock()
	return cur, nil
}

// UpdateNodeClaim keeps nc in memory.
func (c *Claims) UpdateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	_, err := c.MutateNodeClaim(ctx, nc.Name, func(cur *apis.NodeClaim) error {
		*cur = *nc.DeepCopy()
		return nil
	})
	return err
}

// DeleteNodeClaim forgets the claim for the rest of its lifetime.
func (c *Claims) DeleteNodeClaim(_ context.Context, nc *apis.NodeClaim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(nc.Name, nc.DeepCopy(), true)
	return nil
}

// ListNodeClaims is the table's claims with the local copies over them.
func (c *Claims) ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error) {
	claims, err := c.Store.ListNodeClaims(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[string]bool{}
	out := claims[:0]
	for _, cl := range claims {
		seen[cl.Name] = true
		l, ok := c.get(cl.Name)
		switch {
		case !ok:
			out = append(out, cl)
		case !l.deleted:
			out = append(out, l.claim.DeepCopy())
		}
	}
	for name := range c.local {
		if l, ok := c.get(name); ok && !seen[name] && !l.deleted {
			out = append(out, l.claim.DeepCopy())
		}
	}
	return out, nil
}
