package doctor

import (
	"slices"
	"sort"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// poolType is an instance type a NodePool may launch, with the capacity
// types of the offerings it allows.
type poolType struct {
	it            *catalog.InstanceType
	capacityTypes map[string]bool
}

// poolTypes are the catalog's types with an offering whose labels (and the
// pool's own) meet the NodePool's requirements, smallest first (vCPUs,
// then memory, then name), and that the pool's class can run.
func poolTypes(cat *catalog.Catalog, np *apis.NodePool, nc *apis.EC2NodeClass) []poolType {
	pool, err := scheduling.NodePoolFromAPI(np)
	if err != nil {
		return nil // validated when loaded
	}
	var out []poolType
	for _, it := range cat.Types {
		if nc != nil && !it.SupportsNodeClass(nc) {
			continue
		}
		pt := poolType{it: it, capacityTypes: map[string]bool{}}
		for _, o := range it.Offerings {
			if !o.Available || o.CapacityType == catalog.CapacityTypeReserved {
				continue
			}
			labels := it.NodeLabelsForNodeClass(o, nc)
			for k, v := range pool.Labels {
				labels[k] = v
			}
			labels[apis.NodePoolLabelKey] = np.Name
			if pool.Requirements.MatchesLabels(labels) {
				pt.capacityTypes[o.CapacityType] = true
			}
		}
		if len(pt.capacityTypes) > 0 {
			out = append(out, pt)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].it, out[j].it
		if a.VCPU != b.VCPU {
			return a.VCPU < b.VCPU
		}
		if a.MemoryMiB != b.MemoryMiB {
			return a.MemoryMiB < b.MemoryMiB
		}
		return a.Name < b.Name
	})
	return out
}

// allowsSpot reports whether any type of the pool may launch as spot.
func allowsSpot(types []poolType) bool {
	return slices.ContainsFunc(types, func(pt poolType) bool { return pt.capacityTypes[catalog.CapacityTypeSpot] })
}

// ofCapacity keeps the types offered in a capacity type.
func ofCapacity(types []poolType, capacityType string) []*catalog.InstanceType {
	var out []*catalog.InstanceType
	for _, pt := range types {
		if pt.capacityTypes[capacityType] {
			out = append(out, pt.it)
		}
	}
	return out
}

// PoolTypes are the instance types of the catalog a NodePool (with its
// class) may launch as capacityType, smallest first.
func PoolTypes(cat *catalog.Catalog, np *apis.NodePool, nc *apis.EC2NodeClass, capacityType string) []*catalog.InstanceType {
	return ofCapacity(poolTypes(cat, np, nc), capacityType)
}
