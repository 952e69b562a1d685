package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

// claimRec is one stored claim: its JSON body (as the real store keeps it,
// so a round trip loses what a DynamoDB round trip loses, e.g. sub-second
// timestamps) and the attributes the real item carries beside it.
type claimRec struct {
	body       []byte
	version    int64
	deleted    bool
	deletedAt  int64 // unix seconds
	expiresAt  int64 // unix seconds; 0: never (live claims)
	instanceID string
	nodePool   string
}

func encodeClaim(nc *apis.NodeClaim, version int64) (*claimRec, error) {
	body, err := store.ClaimBody(nc, version)
	if err != nil {
		return nil, err
	}
	return &claimRec{body: body, version: version, instanceID: nc.Status.InstanceID, nodePool: nc.NodePoolName()}, nil
}

func (r *claimRec) decode() *apis.NodeClaim {
	nc := &apis.NodeClaim{}
	if err := json.Unmarshal(r.body, nc); err != nil {
		panic(fmt.Sprintf("storetest: decode a claim it encoded: %v", err))
	}
	return nc
}

func (r *claimRec) tombstone() store.Tombstone {
	return store.Tombstone{Claim: r.decode(), DeletedAt: time.Unix(r.deletedAt, 0), ExpiresAt: time.Unix(r.expiresAt, 0)}
}

// CreateNodeClaim is store.Store.CreateNodeClaim: create-if-absent, where an
// expired tombstone counts as absent.
func (s *Store) CreateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	if err := s.begin(ctx, "CreateNodeClaim", "create nodeclaim "+nc.Name); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if nc.CreationTimestamp.IsZero() {
		nc.CreationTimestamp = metav1.NewTime(s.now().UTC().Truncate(time.Second))
	}
	rec, err := encodeClaim(nc, 1)
	if err != nil {
		return err
	}
	if cur := s.claims[nc.Name]; cur != nil && (!cur.deleted || cur.expiresAt >= s.now().Unix()) {
		return fmt.Errorf("create nodeclaim %s: %w", nc.Name, store.ErrAlreadyExists)
	}
	s.claims[nc.Name] = rec
	nc.ResourceVersion = "1"
	return nil
}

// record returns the unexpired record of name (live or tombstone). Callers
// hold s.mu.
func (s *Store) record(name string) (*claimRec, error) {
	rec := s.claims[name]
	if rec == nil {
		return nil, fmt.Errorf("get nodeclaim %s: %w", name, store.ErrNotFound)
	}
	if s.expired(rec.expiresAt) {
		return nil, fmt.Errorf("get nodeclaim %s: %w (expired)", name, store.ErrNotFound)
	}
	return rec, nil
}

// GetNodeClaim is store.Store.GetNodeClaim.
func (s *Store) GetNodeClaim(ctx context.Context, name string) (*apis.NodeClaim, error) {
	if err := s.begin(ctx, "GetNodeClaim", "get nodeclaim "+name); err != nil {
		return nil, err
	}
	return s.getLive(name)
}

func (s *Store) getLive(name string) (*apis.NodeClaim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.record(name)
	if err != nil {
		return nil, err
	}
	if rec.deleted {
		return nil, fmt.Errorf("get nodeclaim %s: %w (deleted)", name, store.ErrNotFound)
	}
	return rec.decode(), nil
}

// GetTombstone is store.Store.GetTombstone.
func (s *Store) GetTombstone(ctx context.Context, name string) (*store.Tombstone, error) {
	if err := s.begin(ctx, "GetTombstone", "get nodeclaim "+name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := s.record(name)
	if err != nil {
		return nil, err
	}
	if !rec.deleted {
		return nil, fmt.Errorf("get tombstone %s: %w (claim is live)", name, store.ErrNotFound)
	}
	ts := rec.tombstone()
	return &ts, nil
}

// UpdateNodeClaim is store.Store.UpdateNodeClaim: a write conditional on the
// stored version.
func (s *Store) UpdateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	if err := s.begin(ctx, "UpdateNodeClaim", "update nodeclaim "+nc.Name); err != nil {
		return err
	}
	return s.update(nc)
}

func (s *Store) update(nc *apis.NodeClaim) error { return s.putNext("update", nc, nil) }

// putNext stores nc as its next version while the stored claim is live at
// nc's version; mark, when set, adjusts the record first (under s.mu). op
// names the call in errors.
func (s *Store) putNext(op string, nc *apis.NodeClaim, mark func(*claimRec)) error {
	v, err := store.VersionOf(nc)
	if err != nil {
		return fmt.Errorf("%s nodeclaim: %w", op, err)
	}
	rec, err := encodeClaim(nc, v+1)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if mark != nil {
		mark(rec)
	}
	return s.putIfCurrent(op, nc, v, rec)
}

// putIfCurrent stores rec (version v+1 of nc) only while the stored claim is
// live at version v, and moves nc to v+1. Callers hold s.mu.
func (s *Store) putIfCurrent(op string, nc *apis.NodeClaim, v int64, rec *claimRec) error {
	cur := s.claims[nc.Name]
	if cur == nil || cur.deleted || s.expired(cur.expiresAt) {
		return fmt.Errorf("%s nodeclaim %s: %w", op, nc.Name, store.ErrNotFound)
	}
	if cur.version != v {
		return fmt.Errorf("%s nodeclaim %s: %w (have version %d, stored %d)", op, nc.Name, store.ErrConflict, v, cur.version)
	}
	s.claims[nc.Name] = rec
	nc.ResourceVersion = strconv.FormatInt(v+1, 10)
	return nil
}

// MutateNodeClaim is store.Store.MutateNodeClaim, by the same algorithm
// (store.MutateWith); fn runs outside any lock, so it may call the store.
func (s *Store) MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error) {
	if err := s.begin(ctx, "MutateNodeClaim", "get nodeclaim "+name); err != nil {
		return nil, err
	}
	return store.MutateWith(ctx, name, fn,
		func(_ context.Context, name string) (*apis.NodeClaim, error) { return s.getLive(name) },
		func(_ context.Context, nc *apis.NodeClaim) error { return s.update(nc) })
}

// DeleteNodeClaim is store.Store.DeleteNodeClaim: a conditional write of a
// tombstone holding nc as given, readable until the tombstone TTL passes.
func (s *Store) DeleteNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	if err := s.begin(ctx, "DeleteNodeClaim", "delete nodeclaim "+nc.Name); err != nil {
		return err
	}
	return s.putNext("delete", nc, func(rec *claimRec) {
		now := s.now()
		rec.deleted, rec.deletedAt, rec.expiresAt = true, now.Unix(), now.Add(s.tombstoneTTL).Unix()
	})
}

// ListNodeClaims is store.Store.ListNodeClaims: live claims by name.
func (s *Store) ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error) {
	if err := s.begin(ctx, "ListNodeClaims", "list nodeclaims"); err != nil {
		return nil, err
	}
	live, _ := s.listClaims(func(*claimRec) bool { return true })
	return live, nil
}

// ListNodeClaimsReport is store.Store.ListNodeClaimsReport; the fake never
// holds an undecodable record, so the report is always empty.
func (s *Store) ListNodeClaimsReport(ctx context.Context) ([]*apis.NodeClaim, []store.Undecodable, error) {
	if err := s.begin(ctx, "ListNodeClaimsReport", "list nodeclaims"); err != nil {
		return nil, nil, err
	}
	live, _ := s.listClaims(func(*claimRec) bool { return true })
	return live, nil, nil
}

// ListTombstones is store.Store.ListTombstones: unexpired tombstones by name.
func (s *Store) ListTombstones(ctx context.Context) ([]store.Tombstone, error) {
	if err := s.begin(ctx, "ListTombstones", "list nodeclaims"); err != nil {
		return nil, err
	}
	_, dead := s.listClaims(func(*claimRec) bool { return true })
	return dead, nil
}

// ListNodeClaimsByNodePool is store.Store.ListNodeClaimsByNodePool.
func (s *Store) ListNodeClaimsByNodePool(ctx context.Context, nodePool string) ([]*apis.NodeClaim, error) {
	if err := s.begin(ctx, "ListNodeClaimsByNodePool", "list nodeclaims of nodepool "+nodePool); err != nil {
		return nil, err
	}
	live, _ := s.listClaims(func(r *claimRec) bool { return nodePool != "" && r.nodePool == nodePool })
	return live, nil
}

// GetNodeClaimByInstanceID is store.Store.GetNodeClaimByInstanceID.
func (s *Store) GetNodeClaimByInstanceID(ctx context.Context, instanceID string) (*apis.NodeClaim, error) {
	if err := s.begin(ctx, "GetNodeClaimByInstanceID", "get nodeclaim by instance "+instanceID); err != nil {
		return nil, err
	}
	out, _ := s.listClaims(func(r *claimRec) bool { return instanceID != "" && r.instanceID == instanceID })
	return store.OneClaimOfInstance(instanceID, out)
}

// listClaims returns copies of the unexpired records keep accepts, live
// and tombstoned, each sorted by name.
func (s *Store) listClaims(keep func(*claimRec) bool) ([]*apis.NodeClaim, []store.Tombstone) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.claims))
	for n := range s.claims {
		names = append(names, n)
	}
	sort.Strings(names)
	var live []*apis.NodeClaim
	var dead []store.Tombstone
	for _, n := range names {
		rec := s.claims[n]
		switch {
		case s.expired(rec.expiresAt) || !keep(rec):
		case rec.deleted:
			dead = append(dead, rec.tombstone())
		default:
			live = append(live, rec.decode())
		}
	}
	return live, dead
}
