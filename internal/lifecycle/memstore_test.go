package lifecycle

import (
	"context"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

// memStore is the smallest in-memory Store the state machine's unit tests
// need: claims (copied in and out), their tombstones, observed capacity and
// the emptiness lease. Calls it does not model hit the nil Store and panic.
type memStore struct {
	Store
	now      func() time.Time
	mu       sync.Mutex
	claims   map[string]*apis.NodeClaim
	gone     map[string]*apis.NodeClaim
	observed []store.ObservedCapacity
	lease    *store.Lease
}

func newMemStore(now func() time.Time) *memStore {
	return &memStore{now: now, claims: map[string]*apis.NodeClaim{}, gone: map[string]*apis.NodeClaim{}}
}

func (m *memStore) seed(cl *apis.NodeClaim) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.claims[cl.Name] = cl.DeepCopy()
}

func (m *memStore) tombstoned(name string) *apis.NodeClaim {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gone[name].DeepCopy()
}

func (m *memStore) GetNodeClaim(_ context.Context, name string) (*apis.NodeClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cl, ok := m.claims[name]
	if !ok {
		return nil, store.ErrNotFound
	}
	return cl.DeepCopy(), nil
}

func (m *memStore) MutateNodeClaim(_ context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.claims[name]
	if !ok {
		return nil, store.ErrNotFound
	}
	next := cur.DeepCopy()
	if err := fn(next); err != nil {
		return nil, err
	}
	m.claims[name] = next
	return next.DeepCopy(), nil
}

func (m *memStore) DeleteNodeClaim(_ context.Context, cl *apis.NodeClaim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.claims[cl.Name]; !ok {
		return store.ErrNotFound
	}
	delete(m.claims, cl.Name)
	m.gone[cl.Name] = cl.DeepCopy()
	return nil
}

func (m *memStore) ListNodeClaims(context.Context) ([]*apis.NodeClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*apis.NodeClaim, 0, len(m.claims))
	for _, cl := range m.claims {
		out = append(out, cl.DeepCopy())
	}
	return out, nil
}

func (m *memStore) RecordObservedCapacity(_ context.Context, o store.ObservedCapacity) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observed = append(m.observed, o)
	return nil
}

func (m *memStore) AcquireLease(_ context.Context, name, holder string, d time.Duration) (*store.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease != nil && m.lease.Holder != holder && m.lease.Valid(m.now()) {
		return nil, store.ErrLeaseHeld
	}
	m.lease = &store.Lease{Name: name, Holder: holder, Token: 1, Expires: m.now().Add(d)}
	return m.lease, nil
}

func (m *memStore) ReleaseLease(_ context.Context, l *store.Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == l {
		m.lease = nil
	}
	return nil
}
