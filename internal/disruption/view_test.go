package disruption

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
)

// meeting counts the reads in flight and holds each until want are in
// flight together (or a second passes), recording the most seen at once.
type meeting struct {
	want           int32
	inFlight, most atomic.Int32
	all            chan struct{}
	once           sync.Once
}

func newMeeting(want int32) *meeting { return &meeting{want: want, all: make(chan struct{})} }

func (m *meeting) attend() {
	now := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	for most := m.most.Load(); now > most && !m.most.CompareAndSwap(most, now); most = m.most.Load() {
	}
	if now >= m.want {
		m.once.Do(func() { close(m.all) })
	}
	select {
	case <-m.all:
	case <-time.After(time.Second):
	}
}

type meetingCluster struct {
	*fakeCluster
	m *meeting
}

func (c meetingCluster) Snapshot(ctx context.Context, o kube.SnapshotOptions) (*kube.Snapshot, error) {
	c.m.attend()
	return c.fakeCluster.Snapshot(ctx, o)
}

type meetingStore struct {
	*memStore
	m *meeting
}

func (s meetingStore) ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error) {
	s.m.attend()
	return s.memStore.ListNodeClaims(ctx)
}

// A pass's reads (the snapshot, the claims, the catalog) are made at once,
// not one after the other.
func TestReadsAreConcurrent(t *testing.T) {
	f := newFixture(t, fixOpt{})
	f.node("a", "m5.large")
	m := newMeeting(3)
	r := Reads{
		Cluster: meetingCluster{&fakeCluster{f: f}, m},
		Store:   meetingStore{newMemStore(func() time.Time { return f.now }, f.claims), m},
		Catalog: func(context.Context) (*catalog.Catalog, error) { m.attend(); return f.cat, nil },
		Config:  f.cfg, Log: slog.New(slog.DiscardHandler),
	}
	cl, _, err := r.Read(ctx, kube.SnapshotOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cl.Node("a"); !ok {
		t.Fatal("the read cluster lacks node a")
	}
	if most := m.most.Load(); most != 3 {
		t.Errorf("at most %d of the 3 reads in flight at once, want all", most)
	}
}
