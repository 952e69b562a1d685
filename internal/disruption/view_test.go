package disruption

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/meettest"
)

type meetingCluster struct {
	*fakeCluster
	m *meettest.Meeting
}

func (c meetingCluster) Snapshot(ctx context.Context, o kube.SnapshotOptions) (*kube.Snapshot, error) {
	c.m.Attend()
	return c.fakeCluster.Snapshot(ctx, o)
}

type meetingStore struct {
	*memStore
	m *meettest.Meeting
}

func (s meetingStore) ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error) {
	s.m.Attend()
	return s.memStore.ListNodeClaims(ctx)
}

// A pass's reads (the snapshot, the claims, the catalog) are made at once,
// not one after the other.
func TestReadsAreConcurrent(t *testing.T) {
	f := newFixture(t, fixOpt{})
	f.node("a", "m5.large")
	m := meettest.New(3)
	r := Reads{
		Cluster: meetingCluster{&fakeCluster{f: f}, m},
		Store:   meetingStore{newMemStore(func() time.Time { return f.now }, f.claims), m},
		Catalog: func(context.Context) (*catalog.Catalog, error) { m.Attend(); return f.cat, nil },
		Config:  f.cfg, Log: slog.New(slog.DiscardHandler),
	}
	cl, _, err := r.Read(ctx, kube.SnapshotOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cl.Node("a"); !ok {
		t.Fatal("the read cluster lacks node a")
	}
	if most := m.Most(); most != 3 {
		t.Errorf("at most %d of the 3 reads in flight at once, want all", most)
	}
}
