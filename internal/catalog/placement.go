package catalog

import (
	"maps"
	"slices"

	"github.com/nodewright/nodewright/internal/apis"
)

// Placement group strategies, as EC2 names them.
const (
	PlacementCluster   = "cluster"
	PlacementPartition = "partition"
	PlacementSpread    = "spread"
)

// Labels of a node in a placement group (Karpenter's).
const (
	LabelPlacementGroupID        = apis.PlacementGroupIDLabelKey
	LabelPlacementGroupPartition = apis.PlacementGroupPartitionLabelKey
)

// PlacementGroup is the placement group an EC2NodeClass selects, as far
// as planning needs it.
type PlacementGroup struct {
	ID       string
	Strategy string
	// Partitions is the partition count of a partition group (else 0).
	Partitions int
}

// WithPlacementGroups returns a catalog that also knows the placement
// group each EC2NodeClass selects (by class name); ForNodeClass applies
// them. The receiver is unchanged and its types are shared.
func (c *Catalog) WithPlacementGroups(byClass map[string]PlacementGroup) *Catalog {
	out := *c
	out.placementGroups = maps.Clone(byClass)
	return &out
}

// PlacementGroup is the placement group the EC2NodeClass called class
// selects, if the catalog knows one.
func (c *Catalog) PlacementGroup(class string) (PlacementGroup, bool) {
	pg, ok := c.placementGroups[class]
	return pg, ok
}

// SupportsPlacement reports whether the type can launch into a group of
// the strategy (EC2's PlacementGroupInfo; a type that lists none is
// taken to support them all, as catalogs built before the field did).
func (it *InstanceType) SupportsPlacement(strategy string) bool {
	return strategy == "" || len(it.PlacementStrategies) == 0 || slices.Contains(it.PlacementStrategies, strategy)
}

// placed is a type as a class with placement group pg sees it: its nodes
// carry the group's id label. The partition is not a type label: EC2
// picks it per launch, so the solver treats it as part of the offering.
func (pg PlacementGroup) placed(it *InstanceType) *InstanceType {
	cp := *it
	cp.Labels = maps.Clone(it.Labels)
	if cp.Labels == nil {
		cp.Labels = map[string]string{}
	}
	cp.Labels[LabelPlacementGroupID] = pg.ID
	return &cp
}
