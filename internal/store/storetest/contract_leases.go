package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/store"
)

const leaseFor = 30 * time.Second

func (c *contract) acquire(t *testing.T, name, holder string) *store.Lease {
	t.Helper()
	l, err := c.s.AcquireLease(c.ctx, name, holder, leaseFor)
	must(t, err)
	return l
}

// wantHeldBy fails unless err says holder holds the lease until expires.
func wantHeldBy(t *testing.T, what string, err error, holder string, expires time.Time) {
	t.Helper()
	wantIs(t, what, err, store.ErrLeaseHeld)
	var held *store.LeaseHeldError
	if !errors.As(err, &held) || held.Holder != holder || !held.Expires.Equal(expires) {
		t.Fatalf("%s: %v does not name holder %s until %v", what, err, holder, expires)
	}
}

// leaseAcquire: one holder at a time; every acquisition, even the holder's
// own, increments the fencing token; names are independent.
func leaseAcquire(t *testing.T, c *contract) {
	l := c.acquire(t, "p", "a")
	if l.Name != "p" || l.Holder != "a" || l.Token != 1 || !l.Expires.Equal(c.clock.Now().Add(leaseFor)) || !l.Valid(c.clock.Now()) {
		t.Fatalf("first lease %+v", l)
	}
	_, err := c.s.AcquireLease(c.ctx, "p", "b", leaseFor)
	wantHeldBy(t, "acquire a held lease", err, "a", l.Expires)
	again := c.acquire(t, "p", "a")
	if again.Token != 2 {
		t.Fatalf("re-acquired token %d, want 2", again.Token)
	}
	wantIs(t, "renew the superseded lease", c.s.RenewLease(c.ctx, l, leaseFor), store.ErrLeaseLost)
	if got, err := c.s.GetLease(c.ctx, "p"); err != nil || got.Holder != "a" || got.Token != 2 || !got.Expires.Equal(again.Expires) {
		t.Fatalf("get lease %+v %v", got, err)
	}
	if q := c.acquire(t, "q", "b"); q.Token != 1 {
		t.Fatalf("another name's token %d, want 1", q.Token)
	}
	_, err = c.s.GetLease(c.ctx, "never")
	wantIs(t, "get a lease never acquired", err, store.ErrNotFound)
	_, err = c.s.AcquireLease(c.ctx, "", "a", leaseFor)
	wantInvalid(t, "acquire without a name", err)
	_, err = c.s.AcquireLease(c.ctx, "p", "", leaseFor)
	wantInvalid(t, "acquire without a holder", err)
	_, err = c.s.AcquireLease(c.ctx, "p", "a", 0)
	wantInvalid(t, "acquire for no time", err)
}

// leaseRenew: renewal extends from now and keeps the token; it works after
// expiry as long as nobody else acquired the lease.
func leaseRenew(t *testing.T, c *contract) {
	l := c.acquire(t, "p", "a")
	c.clock.Advance(20 * time.Second)
	must(t, c.s.RenewLease(c.ctx, l, leaseFor))
	if l.Token != 1 || !l.Expires.Equal(c.clock.Now().Add(leaseFor)) {
		t.Fatalf("renewed lease %+v", l)
	}
	c.clock.Advance(20 * time.Second) // past the first expiry, within the renewed one
	_, err := c.s.AcquireLease(c.ctx, "p", "b", leaseFor)
	wantHeldBy(t, "acquire a renewed lease", err, "a", l.Expires)
	c.clock.Advance(time.Minute)
	must(t, c.s.RenewLease(c.ctx, l, leaseFor)) // expired, but nobody took it
	if !l.Valid(c.clock.Now()) {
		t.Fatalf("renewed after expiry: %+v", l)
	}
	other := *l
	other.Holder = "b"
	wantIs(t, "renew by another holder", c.s.RenewLease(c.ctx, &other, leaseFor), store.ErrLeaseLost)
	wantIs(t, "renew a lease never acquired", c.s.RenewLease(c.ctx, &store.Lease{Name: "q", Holder: "a", Token: 1}, leaseFor), store.ErrLeaseLost)
}

// leaseExpiryHandsOver: at its expiry a lease can be taken, with a larger
// token, and the old holder can neither renew nor release it.
func leaseExpiryHandsOver(t *testing.T, c *contract) {
	l := c.acquire(t, "p", "a")
	c.clock.Advance(leaseFor - time.Millisecond)
	_, err := c.s.AcquireLease(c.ctx, "p", "b", leaseFor)
	wantHeldBy(t, "acquire a millisecond before expiry", err, "a", l.Expires)
	c.clock.Advance(time.Millisecond)
	if l.Valid(c.clock.Now()) {
		t.Fatal("lease valid at its expiry")
	}
	b := c.acquire(t, "p", "b")
	if b.Token != 2 {
		t.Fatalf("taken-over token %d, want 2", b.Token)
	}
	wantIs(t, "renew a lost lease", c.s.RenewLease(c.ctx, l, leaseFor), store.ErrLeaseLost)
	wantIs(t, "release a lost lease", c.s.ReleaseLease(c.ctx, l), store.ErrLeaseLost)
	if got, err := c.s.GetLease(c.ctx, "p"); err != nil || got.Holder != "b" || got.Token != 2 {
		t.Fatalf("lease after takeover %+v %v", got, err)
	}
}

// leaseRelease: a released lease is free at once, keeps its token, and
// cannot be released twice.
func leaseRelease(t *testing.T, c *contract) {
	l := c.acquire(t, "p", "a")
	must(t, c.s.ReleaseLease(c.ctx, l))
	if !l.Expires.IsZero() {
		t.Fatalf("released lease expires %v", l.Expires)
	}
	got, err := c.s.GetLease(c.ctx, "p")
	if err != nil || got.Holder != "" || got.Token != 1 || got.Valid(c.clock.Now()) {
		t.Fatalf("released lease reads %+v %v", got, err)
	}
	wantIs(t, "second release", c.s.ReleaseLease(c.ctx, l), store.ErrLeaseLost)
	if b := c.acquire(t, "p", "b"); b.Token != 2 {
		t.Fatalf("token after release %d, want 2", b.Token)
	}
}
