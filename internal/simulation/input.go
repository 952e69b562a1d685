package simulation

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/workload"
)

// input turns the loaded configuration, catalog and manifests into
// the solver's input.
func input(cfg *apis.Config, cat *catalog.Catalog, wl *workload.Workload) (scheduling.Input, error) {
	in := scheduling.Input{
		Pods:                   wl.Pods,
		DaemonSets:             wl.DaemonSets,
		PersistentVolumes:      wl.PersistentVolumes,
		PersistentVolumeClaims: wl.PersistentVolumeClaims,
		StorageClasses:         wl.StorageClasses,
	}
	optsByPool := map[string]catalog.AllocatableOptions{}
	for _, np := range cfg.NodePools {
		opts := cat.OptionsFor(cfg.NodeClassFor(np))
		if err := opts.Validate(); err != nil {
			return in, fmt.Errorf("NodePool %s: node class: %w", np.Name, err)
		}
		optsByPool[np.Name] = opts
	}
	if err := scheduling.InputFromConfig(cfg, cat, &in); err != nil {
		return in, err
	}
	in.NodePools = scheduling.DynamicPools(cfg, in.NodePools)
	for _, n := range wl.Nodes {
		en, err := existingNode(n, cat, optsByPool)
		if err != nil {
			return in, err
		}
		in.Nodes = append(in.Nodes, en)
	}
	return in, nil
}

// existingNode converts a Node from the --nodes file. A node without
// status.allocatable (a hand-written file) gets the allocatable of its
// instance type from the catalog, computed with its NodePool's node class.
func existingNode(n *workload.NodeWithPods, cat *catalog.Catalog, optsByPool map[string]catalog.AllocatableOptions) (*scheduling.ExistingNode, error) {
	node := n.Node
	en := &scheduling.ExistingNode{
		Name:              node.Name,
		Labels:            node.Labels,
		Taints:            node.Spec.Taints,
		Allocatable:       node.Status.Allocatable,
		Capacity:          node.Status.Capacity,
		Pods:              n.Pods,
		Initialized:       nodeReady(node),
		MarkedForDeletion: node.DeletionTimestamp != nil,
	}
	for _, t := range node.Spec.Taints {
		if t.Key == apis.DisruptedTaintKey {
			en.MarkedForDeletion = true
		}
	}
	if len(en.Allocatable) == 0 {
		typ := node.Labels[catalog.LabelInstanceType]
		it, ok := cat.Get(typ)
		if !ok {
			return nil, fmt.Errorf("node %s: no status.allocatable and instance type %q is not in the catalog", node.Name, typ)
		}
		opts := optsByPool[node.Labels[catalog.LabelNodePool]]
		alloc, err := it.Allocatable(opts)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node.Name, err)
		}
		en.Allocatable = alloc
		if len(en.Capacity) == 0 {
			en.Capacity = it.Capacity(opts)
		}
	}
	return en, nil
}

// nodeReady treats a node as initialized when its Ready condition is True; a
// node without conditions (hand-written input) is taken as ready.
func nodeReady(n *corev1.Node) bool {
	if len(n.Status.Conditions) == 0 {
		return true
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// claimLabels is the full label set of a planned node: the catalog's labels
// for the chosen offering, the solver's (NodePool template labels and
// single-valued requirements) on top, and the NodePool/node class labels.
func claimLabels(cat *catalog.Catalog, c *scheduling.NodeClaimPlan) map[string]string {
	out := map[string]string{}
	if it, ok := cat.Get(c.InstanceType); ok {
		o, found := it.Offering(c.Zone, c.CapacityType)
		if !found {
			z, _ := cat.Zone(c.Zone)
			o = catalog.Offering{Zone: c.Zone, ZoneID: z.ID, CapacityType: c.CapacityType}
		}
		out = it.NodeLabels(o)
	}
	for k, v := range c.Labels {
		out[k] = v
	}
	out[catalog.LabelNodePool] = c.NodePool
	if c.NodeClass != "" {
		out[apis.NodeClassLabelKey] = c.NodeClass
	}
	return out
}
