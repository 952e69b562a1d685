// Package storetest is an in-memory stand-in for internal/store's DynamoDB
// repository, for the controllers' unit tests. It keeps the real store's
// contract: the same sentinel errors, conditional writes on versions, lease
// fencing and expiry, TTL-bounded tombstones, ICE and KV expiry, all on an
// injected clock, and it copies values in and out (claims through the same
// JSON encoding the real store keeps them in) so a caller can never mutate
// stored state.
//
// RunContract is the suite both implementations pass: internal/store runs it
// against dynalite, this package against the fake. A behaviour a controller
// relies on belongs in that suite, so the fake cannot drift from the store.
package storetest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

// Repository is every operation of *store.Store a controller or adapter may
// consume; both *store.Store and *Store implement it.
type Repository interface {
	CreateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error
	GetNodeClaim(ctx context.Context, name string) (*apis.NodeClaim, error)
	GetTombstone(ctx context.Context, name string) (*store.Tombstone, error)
	UpdateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error
	MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error)
	DeleteNodeClaim(ctx context.Context, nc *apis.NodeClaim) error
	ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error)
	ListNodeClaimsReport(ctx context.Context) ([]*apis.NodeClaim, []store.Undecodable, error)
	ListTombstones(ctx context.Context) ([]store.Tombstone, error)
	ListNodeClaimsByNodePool(ctx context.Context, nodePool string) ([]*apis.NodeClaim, error)
	GetNodeClaimByInstanceID(ctx context.Context, instanceID string) (*apis.NodeClaim, error)

	AcquireLease(ctx context.Context, name, holder string, d time.Duration) (*store.Lease, error)
	RenewLease(ctx context.Context, l *store.Lease, d time.Duration) error
	ReleaseLease(ctx context.Context, l *store.Lease) error
	GetLease(ctx context.Context, name string) (*store.Lease, error)

	GetKV(ctx context.Context, k string) (*store.KV, error)
	ListKV(ctx context.Context, prefix string) ([]*store.KV, error)
	PutKV(ctx context.Context, k string, value []byte, expectedVersion int64, ttl time.Duration) (int64, error)
	DeleteKV(ctx context.Context, k string, expectedVersion int64) error

	MarkUnavailable(ctx context.Context, o store.Offering, until time.Time, reason string) error
	UnavailableOfferings(ctx context.Context) (map[store.Offering]store.Unavailable, error)
	RecordObservedCapacity(ctx context.Context, o store.ObservedCapacity) error
	ObservedCapacities(ctx context.Context) ([]store.ObservedCapacity, error)

	PutBlob(ctx context.Context, name string, data []byte, fetchedAt time.Time) error
	GetBlob(ctx context.Context, name string) ([]byte, store.BlobInfo, error)
	PutJSON(ctx context.Context, name string, v any, fetchedAt time.Time) error
	GetJSON(ctx context.Context, name string, v any) (time.Time, error)
}

var (
	_ Repository = (*store.Store)(nil)
	_ Repository = (*Store)(nil)
)

// Store is the in-memory repository. It is safe for concurrent use. The
// zero value is not usable; call New.
type Store struct {
	mu           sync.Mutex
	now          func() time.Time
	tombstoneTTL time.Duration
	observe      func(method string)

	claims map[string]*claimRec
	leases map[string]*leaseRec
	kv     map[string]*kvRec
	ice    map[store.Offering]store.Unavailable
	alloc  map[string]*allocRec
	blobs  map[string]*blobRec
}

// Option configures a Store.
type Option func(*Store)

// WithClock replaces time.Now, as store.WithClock does.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithTombstoneTTL sets how long a deleted claim stays readable as a
// tombstone (default 7 days, as in store.WithTombstoneTTL).
func WithTombstoneTTL(d time.Duration) Option { return func(s *Store) { s.tombstoneTTL = d } }

// WithObserver calls observe with the method name at the start of every
// Repository call (tests assert which calls a controller made).
func WithObserver(observe func(method string)) Option {
	return func(s *Store) { s.observe = observe }
}

// New returns an empty Store.
func New(opts ...Option) *Store {
	s := &Store{
		now: time.Now, tombstoneTTL: 7 * 24 * time.Hour,
		claims: map[string]*claimRec{}, leases: map[string]*leaseRec{}, kv: map[string]*kvRec{},
		ice: map[store.Offering]store.Unavailable{}, alloc: map[string]*allocRec{}, blobs: map[string]*blobRec{},
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// begin reports the call to the observer and refuses a finished context,
// as every DynamoDB request would.
func (s *Store) begin(ctx context.Context, method, what string) error {
	if s.observe != nil {
		s.observe(method)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// Seed stores copies of claims as live claims, replacing any stored claim
// or tombstone of the same name, without the create-if-absent condition (a
// test's starting state). A claim keeps a valid ResourceVersion, else gets
// version 1; the arguments are not modified.
func (s *Store) Seed(claims ...*apis.NodeClaim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, nc := range claims {
		v, err := versionOf(nc)
		if err != nil {
			v = 1
		}
		rec, err := encodeClaim(nc, v)
		if err != nil {
			panic(fmt.Sprintf("storetest: seed %s: %v", nc.Name, err))
		}
		s.claims[nc.Name] = rec
	}
}

// Claim returns a copy of the live claim name, or nil when there is none
// (a test's peek, bypassing the observer and the context).
func (s *Store) Claim(name string) *apis.NodeClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.claims[name]
	if rec == nil || rec.deleted || s.expired(rec.expiresAt) {
		return nil
	}
	return rec.decode()
}

// expired is the real store's rule for second-resolution TTL attributes.
func (s *Store) expired(expiresAt int64) bool {
	return expiresAt != 0 && expiresAt <= s.now().Unix()
}
