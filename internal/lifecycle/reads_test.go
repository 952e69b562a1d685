package lifecycle_test

import (
	"context"
	"testing"

	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/meettest"
)

type meetingCluster struct {
	lifecycle.Cluster
	m *meettest.Meeting
}

func (c meetingCluster) Snapshot(ctx context.Context, opts kube.SnapshotOptions) (*kube.Snapshot, error) {
	c.m.Attend()
	return c.Cluster.Snapshot(ctx, opts)
}

type meetingCloud struct {
	lifecycle.Cloud
	m *meettest.Meeting
}

func (c meetingCloud) ListClusterInstances(ctx context.Context) ([]nwaws.Instance, error) {
	c.m.Attend()
	return c.Cloud.ListClusterInstances(ctx)
}

// A scheduled pass reads the cluster while it lists the instances (and
// then the claims), not after: at 2,000 nodes each read is a wait of a
// second or more.
func TestPassReadsTheClusterWhileListingInstances(t *testing.T) {
	e := newEnv(t)
	d := e.deps()
	e.initializedClaim(e.newController(d), "reads")
	m := meettest.New(2)
	d.Cluster, d.Cloud = meetingCluster{d.Cluster, m}, meetingCloud{d.Cloud, m}
	res, err := e.newController(d).ReconcileAll(e.ctx)
	if err != nil || res.Claims != 1 || res.Nodes < 1 {
		t.Fatalf("pass: %+v %v", res, err)
	}
	if !m.Met() {
		t.Error("the pass read the cluster and listed the instances one after the other")
	}
}
