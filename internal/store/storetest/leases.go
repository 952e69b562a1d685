package storetest

import (
	"context"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/store"
)

// leaseRec is a lease item: it stays after release and expiry so the
// fencing token never restarts.
type leaseRec struct {
	holder  string
	token   int64
	untilMs int64
}

func (r *leaseRec) lease(name string) *store.Lease {
	return &store.Lease{Name: name, Holder: r.holder, Token: r.token, Expires: time.UnixMilli(r.untilMs)}
}

// AcquireLease is store.Store.AcquireLease: free, expired, released or
// already held by holder; every acquisition increments the token.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, d time.Duration) (*store.Lease, error) {
	if err := s.begin(ctx, "AcquireLease", "acquire lease "+name); err != nil {
		return nil, err
	}
	if err := store.ValidateLeaseArgs(name, holder, d); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	cur := s.leases[name]
	if cur == nil {
		cur = &leaseRec{}
		s.leases[name] = cur
	} else if cur.untilMs > now.UnixMilli() && cur.holder != holder && cur.holder != "" {
		held := &store.LeaseHeldError{Name: name, Holder: cur.holder, Expires: time.UnixMilli(cur.untilMs)}
		return nil, fmt.Errorf("acquire lease %s: %w", name, held)
	}
	cur.holder, cur.untilMs = holder, now.Add(d).UnixMilli()
	cur.token++
	return cur.lease(name), nil
}

// onHeld applies change, under s.mu, to the lease record l still owns
// (same holder and token), or fails with ErrLeaseLost (op names the call).
func (s *Store) onHeld(op string, l *store.Lease, change func(cur *leaseRec)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.leases[l.Name]
	if cur == nil || cur.holder != l.Holder || cur.token != l.Token {
		return fmt.Errorf("%s lease %s (token %d): %w", op, l.Name, l.Token, store.ErrLeaseLost)
	}
	change(cur)
	return nil
}

// RenewLease is store.Store.RenewLease: it succeeds even after expiry while
// nobody else acquired the lease.
func (s *Store) RenewLease(ctx context.Context, l *store.Lease, d time.Duration) error {
	if err := s.begin(ctx, "RenewLease", "renew lease "+l.Name); err != nil {
		return err
	}
	if err := store.ValidateLeaseArgs(l.Name, l.Holder, d); err != nil {
		return err
	}
	return s.onHeld("renew", l, func(cur *leaseRec) {
		cur.untilMs = s.now().Add(d).UnixMilli()
		l.Expires = time.UnixMilli(cur.untilMs)
	})
}

// ReleaseLease is store.Store.ReleaseLease: the holder is cleared, the
// token kept.
func (s *Store) ReleaseLease(ctx context.Context, l *store.Lease) error {
	if err := s.begin(ctx, "ReleaseLease", "release lease "+l.Name); err != nil {
		return err
	}
	return s.onHeld("release", l, func(cur *leaseRec) {
		cur.holder, cur.untilMs = "", 0
		l.Expires = time.Time{}
	})
}

// GetLease is store.Store.GetLease.
func (s *Store) GetLease(ctx context.Context, name string) (*store.Lease, error) {
	if err := s.begin(ctx, "GetLease", "get lease "+name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.leases[name]
	if cur == nil {
		return nil, fmt.Errorf("get lease %s: %w", name, store.ErrNotFound)
	}
	return cur.lease(name), nil
}
