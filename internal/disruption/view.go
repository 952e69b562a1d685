package disruption

import (
	"context"
	"fmt"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/state"
)

// view reads one pass's truth. A cached view lists from the API server's
// watch cache and reuses unchanged nodes' pods (kube.SnapshotOptions.Cached):
// good enough to decide, never to act; a command is validated, and its
// candidates handed to termination, against a fresh one.
func (c *Controller) view(ctx context.Context, cached bool) (*View, error) {
	snap, err := c.d.Cluster.Snapshot(ctx, kube.SnapshotOptions{Cached: cached})
	if err != nil {
		return nil, fmt.Errorf("disruption: %w", err)
	}
	claims, err := c.d.Store.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("disruption: list nodeclaims: %w", err)
	}
	cat, err := c.d.Catalog(ctx)
	if err != nil {
		return nil, fmt.Errorf("disruption: instance types: %w", err)
	}
	unavailable := provisioning.ReadICE(ctx, c.d.Unavailable, c.log)
	cl, err := state.Build(state.Sources{Snapshot: snap, Claims: claims, Config: c.d.Config, Catalog: cat, Unavailable: unavailable})
	if err != nil {
		return nil, fmt.Errorf("disruption: %w", err)
	}
	v := &View{Cluster: cl, PDBs: snap.PDBs, Now: c.d.Now(), Settings: c.s, CloudDrift: c.cloudDrift(ctx, cl)}
	v.History = c.history(ctx)
	return v, nil
}

// cloudDrift asks EC2 which registered claims' instances drifted.
func (c *Controller) cloudDrift(ctx context.Context, cl *state.Cluster) map[string]string {
	out := map[string]string{}
	if c.d.Cloud == nil {
		return out
	}
	insts, err := c.d.Cloud.ListClusterInstances(ctx)
	if err != nil {
		c.log.WarnContext(ctx, "listing instances for drift; AMI/subnet/security-group drift not checked this pass", "error", err)
		return out
	}
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
