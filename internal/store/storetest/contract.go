package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

// Clock is a settable clock for WithClock and store.WithClock.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Opener returns a fresh, empty Repository whose clock is now.
type Opener func(t *testing.T, now func() time.Time) Repository

// contractStart is on a whole second: the real store keeps claim, KV and
// tombstone times in seconds, leases, ICE marks and blobs in milliseconds.
var contractStart = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

// contract is one case's world: a fresh store on a clock of its own.
type contract struct {
	ctx   context.Context
	s     Repository
	clock *Clock
}

// RunContract checks every behaviour of a Repository the controllers rely
// on, one subtest per behaviour, each on a store open returns afresh.
func RunContract(t *testing.T, open Opener) {
	cases := []struct {
		name string
		run  func(*testing.T, *contract)
	}{
		{"ClaimCreateAndGet", claimCreateAndGet},
		{"ClaimCopiesInAndOut", claimCopiesInAndOut},
		{"ClaimConditionalUpdate", claimConditionalUpdate},
		{"ClaimUpdateRaceHasOneWinner", claimUpdateRaceHasOneWinner},
		{"ClaimMutate", claimMutate},
		{"ClaimMutateRetriesConflict", claimMutateRetriesConflict},
		{"ClaimDeleteLeavesTombstone", claimDeleteLeavesTombstone},
		{"ClaimTombstoneExpires", claimTombstoneExpires},
		{"ClaimListsAndIndexes", claimListsAndIndexes},
		{"CanceledContext", canceledContext},
		{"LeaseAcquire", leaseAcquire},
		{"LeaseRenew", leaseRenew},
		{"LeaseExpiryHandsOver", leaseExpiryHandsOver},
		{"LeaseRelease", leaseRelease},
		{"KVVersions", kvVersions},
		{"KVExpiry", kvExpiry},
		{"KVDeleteAndList", kvDeleteAndList},
		{"ICEMarks", iceMarks},
		{"ObservedCapacity", observedCapacity},
		{"Blobs", blobs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock(contractStart)
			tc.run(t, &contract{ctx: context.Background(), s: open(t, clock.Now), clock: clock})
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantIs fails unless errors.Is(err, target).
func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: want %v, got %v", what, target, err)
	}
}

var sentinels = []error{store.ErrNotFound, store.ErrConflict, store.ErrAlreadyExists, store.ErrLeaseHeld, store.ErrLeaseLost}

// wantInvalid fails unless err is an error that is none of the sentinels
// (invalid arguments must not look like a state a caller would act on).
func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: want an error, got none", what)
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			t.Fatalf("%s: want a plain error, got %v (is %v)", what, err, s)
		}
	}
}

func testClaim(name, pool, instanceID string) *apis.NodeClaim {
	nc := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apis.NodePoolLabelKey: pool}}}
	nc.Status.InstanceID = instanceID
	return nc
}

// create stores a claim and returns it at version 1.
func (c *contract) create(t *testing.T, name, pool, instanceID string) *apis.NodeClaim {
	t.Helper()
	nc := testClaim(name, pool, instanceID)
	must(t, c.s.CreateNodeClaim(c.ctx, nc))
	return nc
}

func (c *contract) get(t *testing.T, name string) *apis.NodeClaim {
	t.Helper()
	nc, err := c.s.GetNodeClaim(c.ctx, name)
	must(t, err)
	return nc
}

// sameClaim compares claims as the store encodes them.
func sameClaim(t *testing.T, what string, got, want *apis.NodeClaim) {
	t.Helper()
	g, err1 := json.Marshal(got)
	w, err2 := json.Marshal(want)
	must(t, errors.Join(err1, err2))
	if string(g) != string(w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, g, w)
	}
}

func names(claims []*apis.NodeClaim) []string {
	out := make([]string, len(claims))
	for i, nc := range claims {
		out[i] = nc.Name
	}
	return out
}

// canceledContext: a finished context fails a call with its error.
func canceledContext(t *testing.T, c *contract) {
	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	_, err := c.s.GetNodeClaim(ctx, "any")
	wantIs(t, "get with a canceled context", err, context.Canceled)
	_, err = c.s.AcquireLease(ctx, "any", "me", time.Minute)
	wantIs(t, "acquire with a canceled context", err, context.Canceled)
	_, err = c.s.PutKV(ctx, "any", nil, 0, 0)
	wantIs(t, "put kv with a canceled context", err, context.Canceled)
}
