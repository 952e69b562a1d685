package store_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/store"
)

func TestLeaseIsExclusiveAndFenced(t *testing.T) {
	e := newEnv(t)
	s := e.store(t)
	const racers = 16
	const d = 30 * time.Second

	type result struct {
		holder string
		lease  *store.Lease
		err    error
	}
	results := make([]result, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			h := fmt.Sprintf("fn-%02d", i)
			l, err := s.AcquireLease(e.ctx, "provisioner", h, d)
			results[i] = result{h, l, err}
		}()
	}
	close(start)
	wg.Wait()

	var winner *store.Lease
	for _, r := range results {
		switch {
		case r.err == nil:
			if winner != nil {
				t.Fatalf("two holders: %s and %s", winner.Holder, r.holder)
			}
			winner = r.lease
		case errors.Is(r.err, store.ErrLeaseHeld):
		default:
			t.Fatalf("%s: unexpected error %v", r.holder, r.err)
		}
	}
	if winner == nil {
		t.Fatal("no racer acquired the lease")
	}
	if winner.Token != 1 || !winner.Valid(e.clock.Now()) {
		t.Fatalf("winner %+v", winner)
	}
	for _, r := range results {
		var held *store.LeaseHeldError
		if r.err != nil && (!errors.As(r.err, &held) || held.Holder != winner.Holder) {
			t.Fatalf("loser %s: error %v does not name holder %s", r.holder, r.err, winner.Holder)
		}
	}

	// Renewal keeps the token; others are still refused.
	e.clock.Advance(20 * time.Second)
	if err := s.RenewLease(e.ctx, winner, d); err != nil {
		t.Fatal(err)
	}
	if !winner.Expires.Equal(e.clock.Now().Add(d)) {
		t.Fatalf("renewed expiry %v", winner.Expires)
	}
	e.clock.Advance(20 * time.Second) // past the original expiry, within the renewed one
	if _, err := s.AcquireLease(e.ctx, "provisioner", "late", d); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("acquire of a renewed lease: want ErrLeaseHeld, got %v", err)
	}

	// Expiry hands over, with a larger fencing token; the old holder is out.
	e.clock.Advance(d)
	next, err := s.AcquireLease(e.ctx, "provisioner", "successor", d)
	if err != nil {
		t.Fatalf("acquire after expiry: %v", err)
	}
	if next.Token <= winner.Token {
		t.Fatalf("fencing token did not increase: %d then %d", winner.Token, next.Token)
	}
	if err := s.RenewLease(e.ctx, winner, d); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("renew by the expired holder: want ErrLeaseLost, got %v", err)
	}
	if err := s.ReleaseLease(e.ctx, winner); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("release by the expired holder: want ErrLeaseLost, got %v", err)
	}

	// Release lets the next caller in at once, again with a larger token.
	if err := s.ReleaseLease(e.ctx, next); err != nil {
		t.Fatal(err)
	}
	third, err := s.AcquireLease(e.ctx, "provisioner", "third", d)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if third.Token <= next.Token {
		t.Fatalf("fencing token did not increase after release: %d then %d", next.Token, third.Token)
	}
	got, err := s.GetLease(e.ctx, "provisioner")
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder != "third" || got.Token != third.Token {
		t.Fatalf("stored lease %+v", got)
	}
	// Leases are independent by name.
	if _, err := s.AcquireLease(e.ctx, "disruption", "fn-00", d); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireLease(e.ctx, "", "x", d); err == nil {
		t.Fatal("empty lease name accepted")
	}
}

// Real-clock handover under contention: holders take turns as leases expire,
// and at no instant do two holders believe they hold it with the same token.
func TestLeaseHandoverUnderContention(t *testing.T) {
	e := newEnv(t)
	s, err := store.New(e.api, e.table)
	if err != nil {
		t.Fatal(err)
	}
	const d = 150 * time.Millisecond
	deadline := time.Now().Add(1500 * time.Millisecond)
	var mu sync.Mutex
	tokens := map[int64]string{}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := fmt.Sprintf("worker-%d", i)
			for time.Now().Before(deadline) {
				l, err := s.AcquireLease(e.ctx, "disruption", h, d)
				if errors.Is(err, store.ErrLeaseHeld) {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if prev, dup := tokens[l.Token]; dup {
					t.Errorf("token %d handed to %s and %s", l.Token, prev, h)
				}
				tokens[l.Token] = h
				mu.Unlock()
				// Hold without renewing: the lease must expire, then move on.
				time.Sleep(d + 30*time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if len(tokens) < 3 {
		t.Fatalf("only %d acquisitions in 1.5 s with 150 ms leases", len(tokens))
	}
	for tok := int64(1); tok <= int64(len(tokens)); tok++ {
		if _, ok := tokens[tok]; !ok {
			t.Fatalf("tokens not contiguous from 1: %v", tokens)
		}
	}
}
