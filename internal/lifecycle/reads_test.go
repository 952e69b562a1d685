package lifecycle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/lifecycle"
)

// meetingReads holds a pass's snapshot and its instance listing until both
// are in flight together, or a second passes; together says whether they
// met.
type meetingReads struct {
	mu       sync.Mutex
	inFlight int
	together bool
	met      chan struct{}
}

func (m *meetingReads) attend() {
	m.mu.Lock()
	m.inFlight++
	if m.inFlight == 2 && !m.together {
		m.together = true
		close(m.met)
	}
	m.mu.Unlock()
	select {
	case <-m.met:
	case <-time.After(time.Second):
	}
	m.mu.Lock()
	m.inFlight--
	m.mu.Unlock()
}

type meetingCluster struct {
	lifecycle.Cluster
	m *meetingReads
}

func (c meetingCluster) Snapshot(ctx context.Context, opts kube.SnapshotOptions) (*kube.Snapshot, error) {
	c.m.attend()
	return c.Cluster.Snapshot(ctx, opts)
}

type meetingCloud struct {
	lifecycle.Cloud
	m *meetingReads
}

func (c meetingCloud) ListClusterInstances(ctx context.Context) ([]nwaws.Instance, error) {
	c.m.attend()
	return c.Cloud.ListClusterInstances(ctx)
}

// A scheduled pass reads the cluster while it lists the instances (and
// then the claims), not after: at 2,000 nodes each read is a wait of a
// second or more.
func TestPassReadsTheClusterWhileListingInstances(t *testing.T) {
	e := newEnv(t)
	d := e.deps()
	e.initializedClaim(e.newController(d), "reads")
	m := &meetingReads{met: make(chan struct{})}
	d.Cluster, d.Cloud = meetingCluster{d.Cluster, m}, meetingCloud{d.Cloud, m}
	res, err := e.newController(d).ReconcileAll(e.ctx)
	if err != nil || res.Claims != 1 || res.Nodes < 1 {
		t.Fatalf("pass: %+v %v", res, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.together {
		t.Error("the pass read the cluster and listed the instances one after the other")
	}
}
