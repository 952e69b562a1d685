package disruption

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
)

// view reads one pass's truth. A cached view lists from the API server's
// watch cache and reuses unchanged nodes' pods (kube.SnapshotOptions.Cached):
// good enough to decide, never to act; a command is validated, and its
// candidates handed to termination, against a fresh one. The reads are
// independent, so they run at once: at 2,000 nodes each is a wait of a
// second or more on a different server, and a pass waited for their sum.
func (c *Controller) view(ctx context.Context, cached bool) (*View, error) {
	var insts []nwaws.Instance
	var history []HistoryEntry
	var wg sync.WaitGroup
	wg.Go(func() { insts = c.clusterInstances(ctx) })
	wg.Go(func() { history = c.history(ctx) })
	r := Reads{Cluster: c.d.Cluster, Store: c.d.Store, Catalog: c.d.Catalog, Unavailable: c.d.Unavailable, Config: c.d.Config, Log: c.log, Policy: c.s.Policy}
	cl, snap, err := r.Read(ctx, kube.SnapshotOptions{Cached: cached}, nil)
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("disruption: %w", err)
	}
	v := &View{Cluster: cl, PDBs: snap.PDBs, Now: c.d.Now(), Settings: c.s, CloudDrift: c.cloudDrift(ctx, cl, insts)}
	v.History = history
	return v, nil
}

// Reads are the sources a pass over the fleet builds its cluster from: the
// disruption function's, and shadow mode's fleet pass, which adds claims
// for the nodes other autoscalers launched.
type Reads struct {
	Cluster interface {
		Snapshot(ctx context.Context, opts kube.SnapshotOptions) (*kube.Snapshot, error)
	}
	Store interface {
		ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error)
	}
	Catalog     func(ctx context.Context) (*catalog.Catalog, error)
	Unavailable func(ctx context.Context) (map[scheduling.OfferingKey]bool, error)
	Config      *apis.Config
	Log         *slog.Logger
	Policy      scheduling.Policy
}

// Read snapshots the cluster and builds its state from the snapshot, the
// table's claims, the priced catalog and the ICE set. extra (optional)
// returns claims to add, derived from the snapshot and the table's claims.
func (r Reads) Read(ctx context.Context, opts kube.SnapshotOptions,
	extra func(*kube.Snapshot, []*apis.NodeClaim) []*apis.NodeClaim) (*state.Cluster, *kube.Snapshot, error) {
	var (
		snap        *kube.Snapshot
		claims      []*apis.NodeClaim
		cat         *catalog.Catalog
		unavailable map[scheduling.OfferingKey]bool
	)
	// Independent reads of different servers: wait for the slowest, not
	// their sum.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		snap, err = r.Cluster.Snapshot(gctx, opts)
		return err
	})
	g.Go(func() (err error) {
		if claims, err = r.Store.ListNodeClaims(gctx); err != nil {
			return fmt.Errorf("list nodeclaims: %w", err)
		}
		return nil
	})
	g.Go(func() (err error) {
		if cat, err = r.Catalog(gctx); err != nil {
			return fmt.Errorf("instance types: %w", err)
		}
		return nil
	})
	g.Go(func() error {
		unavailable = provisioning.ReadICE(gctx, r.Unavailable, r.Log)
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	if extra != nil {
		claims = append(claims, extra(snap, claims)...)
	}
	cl, err := state.Build(state.Sources{Snapshot: snap, Claims: claims, Config: r.Config, Catalog: cat, Unavailable: unavailable, Policy: r.Policy})
	if err != nil {
		return nil, nil, err
	}
	return cl, snap, nil
}

// clusterInstances lists the cluster's instances for the drift check; nil
// (drift not checked this pass) when there is no cloud or EC2 cannot be read.
func (c *Controller) clusterInstances(ctx context.Context) []nwaws.Instance {
	if c.d.Cloud == nil {
		return nil
	}
	insts, err := c.d.Cloud.ListClusterInstances(ctx)
	if err != nil {
		c.log.WarnContext(ctx, "listing instances for drift; AMI/subnet/security-group drift not checked this pass", "error", err)
		return nil
	}
	return insts
}

// cloudDrift asks EC2 which registered claims' instances (insts, from
// clusterInstances) drifted.
func (c *Controller) cloudDrift(ctx context.Context, cl *state.Cluster, insts []nwaws.Instance) map[string]string {
	out := map[string]string{}
	byID := map[string]nwaws.Instance{}
	for _, i := range insts {
		byID[i.ID] = i
	}
	for _, n := range cl.Nodes {
		if n.Claim == nil || n.Node == nil || n.Claim.Deleting() {
			continue
		}
		inst, ok := byID[n.Claim.Status.InstanceID]
		if !ok {
			continue
		}
		np := c.d.Config.NodePool(n.NodePool())
		if np == nil {
			continue
		}
		nc := c.d.Config.NodeClassFor(np)
		if nc == nil {
			continue
		}
		reason, err := c.d.Cloud.Drift(ctx, nc, inst)
		if err != nil {
			c.log.WarnContext(ctx, "checking drift", "nodeclaim", n.Claim.Name, "instance-id", inst.ID, "error", err)
			continue
		}
		if reason != "" {
			out[n.Claim.Name] = reason
		}
	}
	return out
}

// poolCosts is clusterCost by NodePool (the dashboard's cost per pool).
func poolCosts(cl *state.Cluster) map[string]float64 {
	out := map[string]float64{}
	for _, n := range cl.Nodes {
		if n.Claim != nil {
			out[n.Claim.NodePoolName()] += nodePrice(cl, n)
		}
	}
	return out
}

// clusterCost is what the managed nodes cost per hour.
func clusterCost(cl *state.Cluster) float64 {
	sum := 0.0
	for _, n := range cl.Nodes {
		if n.Claim != nil {
			sum += nodePrice(cl, n)
		}
	}
	return sum
}

// nodePrice is the hourly price of a managed node's offering, read from its
// Node's labels once registered, else from its claim's.
func nodePrice(cl *state.Cluster, n *state.Node) float64 {
	labels := n.Claim.Labels
	if n.Node != nil {
		labels = n.Node.Labels
	}
	return offeringPrice(cl.Catalog, labels[catalog.LabelInstanceType], labels[catalog.LabelTopologyZone], labels[apis.CapacityTypeLabelKey])
}
