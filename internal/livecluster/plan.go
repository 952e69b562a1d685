package livecluster

import (
	"context"
	"fmt"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/simulation"
	"github.com/nodewright/nodewright/internal/state"
)

// Sources are what `simulate --kubeconfig` reads.
type Sources struct {
	Kubeconfig, Context string
	// Config is a file or folder of NodePools and EC2NodeClasses; empty
	// means the cluster's own (Karpenter's CRDs).
	Config string
	// Catalog and Region as simulation.Sources takes them; an empty Region
	// is the nodes' topology.kubernetes.io/region, else the NodePools'.
	Catalog, Region string
	// Repack asks for the from-scratch plan of every pod the cluster runs,
	// with no existing node, and the current fleet's cost next to it.
	Repack bool
}

// Setup is a solve's input read from a cluster.
type Setup struct {
	Config  *apis.Config
	Catalog *catalog.Catalog
	Input   *scheduling.Input
	Options scheduling.Options
	// Fleet is what the nodes cost now (Repack only).
	Fleet *simulation.FleetOutput
	// Warnings are one line each: configuration warnings (file:line: field:
	// message) and the pods left out of the plan with why.
	Warnings []string
}

// snapshotParts are what a plan reads: no PDBs, a plan evicts nothing.
const snapshotParts = kube.PartPendingPods | kube.PartBoundPods | kube.PartNodes | kube.PartDaemonSets |
	kube.PartVolumes | kube.PartNamespaces

// Load reads the cluster and the configuration and builds the solver's
// input. Warnings collected before an error are returned with it.
func Load(ctx context.Context, src Sources) (*Setup, error) {
	c, err := Connect(src.Kubeconfig, src.Context)
	if err != nil {
		return &Setup{}, err
	}
	s := &Setup{}
	if s.Config, err = config(ctx, c, src.Config, &s.Warnings); err != nil {
		return s, err
	}
	snap, err := c.Kube.Snapshot(ctx, kube.SnapshotOptions{Parts: snapshotParts})
	if err != nil {
		return s, fmt.Errorf("read cluster %s: %w", c.Host, err)
	}
	claims, warnings, err := ReadNodeClaims(ctx, c.Dynamic)
	s.Warnings = append(s.Warnings, warnings...)
	if err != nil {
		return s, err
	}
	region := src.Region
	if region == "" {
		region = Region(snap)
	}
	if region == "" {
		region = simulation.InferRegion(s.Config)
	}
	if s.Catalog, err = simulation.LoadCatalog(src.Catalog, region); err != nil {
		return s, err
	}
	return s, s.input(snap, claims, src.Repack)
}

// config loads --config, or the cluster's NodePools and EC2NodeClasses.
func config(ctx context.Context, c *Clients, dir string, warnings *[]string) (*apis.Config, error) {
	var cfg *apis.Config
	var err error
	what := "--config " + dir
	if dir != "" {
		cfg, err = apis.Load(dir)
	} else {
		what = "the cluster's NodePools and EC2NodeClasses"
		objs, rerr := ReadKarpenter(ctx, c.Dynamic)
		if rerr != nil {
			return nil, fmt.Errorf("%w (--config DIR plans with NodePools from files instead)", rerr)
		}
		cfg, err = LoadObjects(objs)
	}
	for _, w := range cfg.Warnings {
		*warnings = append(*warnings, w.String())
	}
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", what, err)
	}
	if len(cfg.NodePools) == 0 {
		return nil, fmt.Errorf("%s: no NodePool found", what)
	}
	return cfg, nil
}

// input asks the solver's question of the joined cluster view (nodes and
// Karpenter's NodeClaims): the pending pods against the existing nodes and
// the claims still launching, or every reschedulable pod with no node.
func (s *Setup) input(snap *kube.Snapshot, claims []*apis.NodeClaim, repack bool) error {
	cl, err := state.Build(state.Sources{Snapshot: snap, Claims: claims, Config: s.Config, Catalog: s.Catalog})
	if err != nil {
		return err
	}
	s.Warnings = append(s.Warnings, cl.Warnings...)
	for _, sk := range cl.Skipped {
		s.Warnings = append(s.Warnings, fmt.Sprintf("pod %s/%s left out: %s", sk.Pod.Namespace, sk.Pod.Name, sk.Reason))
	}
	if snap.OtherPendingPods > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d pending pod(s) left out: the scheduler has not found them unschedulable (yet)", snap.OtherPendingPods))
	}
	var opts state.InputOptions
	if repack {
		for _, n := range cl.Nodes {
			opts.Without = append(opts.Without, n.Name)
		}
		counts := map[string]int{}
		for name, pods := range snap.PodsByNode {
			counts[name] = len(pods)
		}
		s.Fleet = simulation.Fleet(s.Catalog, snap.Nodes, counts)
		s.Fleet.PendingPods = len(cl.Pending)
	}
	if s.Input, err = cl.Input(opts); err != nil {
		return err
	}
	s.Options = scheduling.Options{NamespaceLabels: snap.NamespaceLabels}
	return nil
}

// Region is the region the nodes' topology.kubernetes.io/region label
// names, when they name exactly one.
func Region(snap *kube.Snapshot) string {
	regions := map[string]bool{}
	for _, n := range snap.Nodes {
		if r := n.Labels[catalog.LabelTopologyRegion]; r != "" {
			regions[r] = true
		}
	}
	if len(regions) == 1 {
		for r := range regions {
			return r
		}
	}
	return ""
}
