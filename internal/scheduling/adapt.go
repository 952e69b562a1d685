package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// NodePoolFromAPI converts a karpenter.sh/v1 NodePool into the solver's view.
func NodePoolFromAPI(np *apis.NodePool) (*NodePool, error) {
	if np == nil {
		return nil, fmt.Errorf("nil nodepool")
	}
	spec := np.Spec.Template.Spec
	out := &NodePool{
		Name:          np.Name,
		Labels:        np.Spec.Template.ObjectMeta.Labels,
		Taints:        spec.Taints,
		StartupTaints: spec.StartupTaints,
	}
	if np.Spec.Weight != nil {
		out.Weight = *np.Spec.Weight
	}
	if spec.NodeClassRef != nil {
		out.NodeClass = spec.NodeClassRef.Name
	}
	if len(np.Spec.Limits) > 0 {
		out.Limits = corev1.ResourceList(np.Spec.Limits)
	}
	for _, r := range spec.Requirements {
		req, err := NewRequirement(r.Key, r.Operator, r.Values...)
		if err != nil {
			return nil, fmt.Errorf("nodepool %s: %w", np.Name, err)
		}
		if r.MinValues != nil {
			req.MinValues = *r.MinValues
		}
		out.Requirements = out.Requirements.Add(req)
	}
	return out, nil
}

// InstanceTypesFromCatalog prepares a catalog's types for pools using the
// node class (nil = defaults): allocatable is computed per node class
// because kubelet settings, AMI family and volumes change it, labels too
// (the AMI family sets the os, catalog LabelsForNodeClass), and types the
// class cannot run on (catalog SupportsNodeClass) are left out.
func InstanceTypesFromCatalog(cat *catalog.Catalog, nc *apis.EC2NodeClass, opts *catalog.AllocatableOptions) ([]*InstanceType, error) {
	o := cat.OptionsFor(nc)
	if opts != nil {
		o = *opts
	}
	partitions := 0
	if nc != nil {
		cat = cat.ForNodeClass(nc.Name) // the class's reserved offerings, its placement group
		if pg, ok := cat.PlacementGroup(nc.Name); ok && pg.Strategy == catalog.PlacementPartition {
			partitions = pg.Partitions
		}
	}
	out := make([]*InstanceType, 0, len(cat.Types))
	for _, it := range cat.Types {
		if !it.SupportsNodeClass(nc) {
			continue // e.g. no nested virtualization, too few EFA interfaces
		}
		alloc, err := it.Allocatable(o)
		if err != nil {
			return nil, fmt.Errorf("instance types: %w", err)
		}
		// The one place a type's labels meet its class: the os and
		// windows-build come from the class's AMI family.
		t := &InstanceType{Name: it.Name, Labels: it.LabelsForNodeClass(nc), Capacity: it.Capacity(o), Allocatable: alloc}
		for _, off := range it.Offerings {
			t.Offerings = append(t.Offerings, Offering{Zone: off.Zone, ZoneID: off.ZoneID, CapacityType: off.CapacityType, Price: off.Price,
				Available: off.Available, ReservationID: off.ReservationID, ReservationCapacity: off.ReservationCapacity,
				ReservationType: off.ReservationType, Interruptible: off.Interruptible})
		}
		t.Offerings = byPartition(t.Offerings, partitions)
		out = append(out, t)
	}
	return out, nil
}

// InputFromConfig fills an Input's NodePools and per-pool instance types from
// loaded configuration and a catalog. Pools sharing a node class share the
// prepared type list.
func InputFromConfig(cfg *apis.Config, cat *catalog.Catalog, in *Input) error {
	if in.InstanceTypes == nil {
		in.InstanceTypes = map[string][]*InstanceType{}
	}
	byClass := map[string][]*InstanceType{}
	for _, np := range cfg.NodePools {
		pool, err := NodePoolFromAPI(np)
		if err != nil {
			return err
		}
		nc := cfg.NodeClassFor(np)
		key := ""
		if nc != nil {
			key = nc.Name
		}
		its, ok := byClass[key]
		if !ok {
			its, err = InstanceTypesFromCatalog(cat, nc, nil)
			if err != nil {
				return fmt.Errorf("nodepool %s: %w", np.Name, err)
			}
			byClass[key] = its
		}
		in.NodePools = append(in.NodePools, pool)
		in.InstanceTypes[pool.Name] = its
	}
	return nil
}

// DynamicPools leaves out the static NodePools (spec.replicas): as in
// Karpenter, pending pods never open a node in a static pool; they may
// still land on its existing nodes.
func DynamicPools(cfg *apis.Config, pools []*NodePool) []*NodePool {
	out := make([]*NodePool, 0, len(pools))
	for _, p := range pools {
		if np := cfg.NodePool(p.Name); np != nil && np.Static() {
			continue
		}
		out = append(out, p)
	}
	return out
}

// byPartition repeats each offering once per partition of a partition
// placement group (partitions > 0), so a pod can require a partition and
// topology spread can use partitions as domains; the launch then names
// the partition the claim allows.
func byPartition(offs []Offering, partitions int) []Offering {
	if partitions <= 0 {
		return offs
	}
	out := make([]Offering, 0, len(offs)*partitions)
	for _, o := range offs {
		for p := 1; p <= partitions; p++ {
			o.Partition = p
			out = append(out, o)
		}
	}
	return out
}
