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

func validateLeaseArgs(name, holder string, d time.Duration) error {
	if name == "" || holder == "" {
		return fmt.Errorf("lease name %q and holder %q must both be non-empty", name, holder)
	}
	if d <= 0 {
		return fmt.Errorf("lease %s: duration %s must be positive", name, d)
	}
	return nil
}

// AcquireLease is store.Store.AcquireLease: free, expired, released or
// already held by holder; every acquisition increments the token.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, d time.Duration) (*store.Lease, error) {
	if err := s.begin(ctx, "AcquireLease", "acquire lease "+name); err != nil {
		return nil, err
	}
	if err := validateLeaseArgs(name, holder, d); err != nil {
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

// held returns the lease record l still owns (same holder and token), or
// ErrLeaseLost. Callers hold s.mu.
func (s *Store) held(op string, l *store.Lease) (*leaseRec, error) {
	cur := s.leases[l.Name]
	if cur == nil || cur.holder != l.Holder || cur.token != l.Token {
		return nil, fmt.Errorf("%s lease %s (token %d): %w", op, l.Name, l.Token, store.ErrLeaseLost)
	}
	return cur, nil
}

// RenewLease is store.Store.RenewLease: it succeeds even after expiry while
// nobody else acquired the lease.
func (s *Store) RenewLease(ctx context.Context, l *store.Lease, d time.Duration) error {
	if err := s.begin(ctx, "RenewLease", "renew lease "+l.Name); err != nil {
		return err
	}
	if err := validateLeaseArgs(l.Name, l.Holder, d); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.held("renew", l)
	if err != nil {
		return err
	}
	cur.untilMs = s.now().Add(d).UnixMilli()
	l.Expires = time.UnixMilli(cur.untilMs)
	return nil
}

// ReleaseLease is store.Store.ReleaseLease: the holder is cleared, the
// token kept.
func (s *Store) ReleaseLease(ctx context.Context, l *store.Lease) error {
	if err := s.begin(ctx, "ReleaseLease", "release lease "+l.Name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.held("release", l)
	if err != nil {
		return err
	}
	cur.holder, cur.untilMs = "", 0
	l.Expires = time.Time{}
	return nil
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
