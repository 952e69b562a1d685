package provisioning

import (
	"context"
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/meettest"
)

// meetingCluster holds the pass's snapshot (not the batch window's polls of
// pending pods) until the claims are being listed too.
type meetingCluster struct {
	*fakeCluster
	m *meettest.Meeting
}

func (c meetingCluster) Snapshot(ctx context.Context, o kube.SnapshotOptions) (*kube.Snapshot, error) {
	if o.Parts != kube.PartPendingPods {
		c.m.Attend()
	}
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

// TestPassListsClaimsWhileTakingTheSnapshot: once the batch window closes,
// the snapshot and the claims are read at once (one after the other they
// were most of a 2,000-node cluster's time before the first launch), and
// the pass still places every pod from them.
func TestPassListsClaimsWhileTakingTheSnapshot(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 3, "1", "1Gi"))
	m := meettest.New(2)
	p, err := New(Deps{
		Store: meetingStore{e.store, m}, Cluster: meetingCluster{e.cluster, m}, Launcher: e.launcher,
		Catalog:     func(context.Context) (*catalog.Catalog, error) { return e.cat, nil },
		Unavailable: e.launcher.unavailable,
		Config:      e.cfg, Now: e.clock.Now, Sleep: e.clock.Sleep, Settings: e.settings,
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Run(context.Background(), Trigger{})
	if err != nil {
		t.Fatal(err)
	}
	if !m.Met() {
		t.Error("the pass took its snapshot and listed the claims one after the other")
	}
	if len(res.Launched) == 0 || res.Unschedulable != 0 {
		t.Errorf("launched %v, %d unschedulable; want the pods placed", res.Launched, res.Unschedulable)
	}
}
