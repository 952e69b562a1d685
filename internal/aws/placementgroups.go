package aws

import (
	"context"
	"fmt"
	"strconv"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/catalog"
)

// Labels of a node launched into a placement group (Karpenter's names): the
// group's id and, for a partition group, the partition.
const (
	LabelPlacementGroupID        = apis.PlacementGroupIDLabelKey
	LabelPlacementGroupPartition = apis.PlacementGroupPartitionLabelKey
)

// Placement group strategies.
const (
	PlacementCluster   = catalog.PlacementCluster
	PlacementPartition = catalog.PlacementPartition
	PlacementSpread    = catalog.PlacementSpread
)

// PlacementGroup is the placement group an EC2NodeClass selects.
type PlacementGroup struct {
	ID       string
	Name     string
	Strategy string
	// PartitionCount is the number of partitions of a partition group.
	PartitionCount int32
}

// PlacementGroup resolves spec.placementGroupSelector (by id or by name) to
// an available group; nil when the class selects none. A selector that
// matches no available group leaves the class not ready (no launch), as in
// Karpenter, where the class's PlacementGroupReady condition turns false.
func (p *Provider) PlacementGroup(ctx context.Context, nc *apis.EC2NodeClass) (*PlacementGroup, error) {
	sel := nc.Spec.PlacementGroupSelector
	if sel == nil {
		return nil, nil
	}
	pg, err := p.placementGroups.get(ctx, selectorKey(sel), func(ctx context.Context) (PlacementGroup, error) {
		in := &ec2.DescribePlacementGroupsInput{Filters: []ec2types.Filter{
			{Name: sdkaws.String("state"), Values: []string{string(ec2types.PlacementGroupStateAvailable)}}}}
		if id := sdkaws.ToString(sel.ID); id != "" {
			in.GroupIds = []string{id}
		} else {
			in.GroupNames = []string{sdkaws.ToString(sel.Name)}
		}
		out, err := p.clients.EC2.DescribePlacementGroups(ctx, in)
		if err != nil && !isNotFound(err) && apiErrorCode(err) != "InvalidPlacementGroup.Unknown" {
			return PlacementGroup{}, fmt.Errorf("describe placement groups: %w", err)
		}
		if err != nil || len(out.PlacementGroups) == 0 {
			return PlacementGroup{}, fmt.Errorf("EC2NodeClass %s: %w: spec.placementGroupSelector matches no available placement group", nc.Name, ErrNodeClassNotReady)
		}
		g := out.PlacementGroups[0]
		return PlacementGroup{ID: sdkaws.ToString(g.GroupId), Name: sdkaws.ToString(g.GroupName),
			Strategy: string(g.Strategy), PartitionCount: sdkaws.ToInt32(g.PartitionCount)}, nil
	})
	if err != nil {
		return nil, err
	}
	return &pg, nil
}

// WithPlacementGroups returns cat with the placement group of every
// EC2NodeClass of classes that selects one (catalog.WithPlacementGroups):
// planning then leaves out the types the group's strategy refuses and
// offers a partition group's partitions. A class whose group cannot be
// resolved is left as it is: its launches fail until the group is there.
func (p *Provider) WithPlacementGroups(ctx context.Context, cat *catalog.Catalog, classes []*apis.EC2NodeClass) *catalog.Catalog {
	byClass := map[string]catalog.PlacementGroup{}
	for _, nc := range classes {
		if nc == nil || nc.Spec.PlacementGroupSelector == nil {
			continue
		}
		pg, err := p.PlacementGroup(ctx, nc)
		if err != nil || pg == nil {
			p.log.WarnContext(ctx, "placement group not resolved; planning without it", "ec2nodeclass", nc.Name, "error", err)
			continue
		}
		byClass[nc.Name] = catalog.PlacementGroup{ID: pg.ID, Strategy: pg.Strategy, Partitions: int(pg.PartitionCount)}
	}
	if len(byClass) == 0 {
		return cat
	}
	return cat.WithPlacementGroups(byClass)
}

// placement is where one launch goes in its class's placement group.
type placement struct {
	group *PlacementGroup
	// partition is the partition of a partition group (1-based), else 0.
	partition int32
}

// choosePlacement picks the launch's partition of a partition group, as
// Karpenter does: a claim whose requirements allow only some partitions
// gets the lowest of them (EC2 takes one number); one that allows them all
// names none, and EC2 puts the instance in the emptiest partition
// (learnPartition reads which).
func choosePlacement(pg *PlacementGroup, claim *apis.NodeClaim) (placement, error) {
	pl := placement{group: pg}
	if pg == nil || pg.Strategy != PlacementPartition || pg.PartitionCount < 1 {
		return pl, nil
	}
	var allowed []int32
	for n := int32(1); n <= pg.PartitionCount; n++ {
		if allows(claim.Spec.Requirements, LabelPlacementGroupPartition, strconv.Itoa(int(n))) {
			allowed = append(allowed, n)
		}
	}
	switch {
	case len(allowed) == 0:
		return pl, fmt.Errorf("%w: the claim allows none of the %d partitions of placement group %s", ErrInsufficientCapacity, pg.PartitionCount, pg.Name)
	case len(allowed) < int(pg.PartitionCount):
		pl.partition = allowed[0]
	}
	return pl, nil
}

// learnPartition reads the partition EC2 put a launched instance in when
// the launch named none: the node's partition label needs it (Karpenter's
// registration waits for it the same way). EC2's reads lag its launches,
// so it retries for up to LaunchConfirmWait; should the partition still be
// unknown, the node goes without its partition label.
func (p *Provider) learnPartition(ctx context.Context, pl placement, inst *Instance) {
	if pl.group == nil || pl.group.Strategy != PlacementPartition || inst.PlacementPartition > 0 {
		return
	}
	deadline := time.Now().Add(p.opts.LaunchConfirmWait)
	for delay := 100 * time.Millisecond; ; delay = min(delay*2, 2*time.Second) {
		got, err := p.GetInstance(ctx, inst.ID)
		if err == nil && got.PlacementPartition > 0 {
			inst.PlacementPartition = got.PlacementPartition
			return
		}
		if time.Now().Add(delay).After(deadline) || basedeps.Sleep(ctx, delay) != nil {
			p.log.WarnContext(ctx, "partition of the launched instance unknown; its node goes without the partition label",
				"instance", inst.ID, "placement-group", pl.group.Name, "error", err)
			return
		}
	}
}

// labels are the node labels of the placement (none outside a group).
func (pl placement) labels() map[string]string {
	if pl.group == nil {
		return nil
	}
	out := map[string]string{LabelPlacementGroupID: pl.group.ID}
	if pl.partition > 0 {
		out[LabelPlacementGroupPartition] = strconv.Itoa(int(pl.partition))
	}
	return out
}

// groupMembers are the group's pending and running instances (any
// cluster's: they share the group's zone and partitions).
func (p *Provider) groupMembers(ctx context.Context, pg *PlacementGroup) ([]ec2types.Instance, error) {
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: sdkaws.String("placement-group-name"), Values: []string{pg.Name}},
		{Name: sdkaws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}}
	pager := ec2.NewDescribeInstancesPaginator(p.clients.EC2, in)
	out, err := allPages(ctx, pager.HasMorePages, pager.NextPage, func(out *ec2.DescribeInstancesOutput) []ec2types.Instance {
		var all []ec2types.Instance
		for _, r := range out.Reservations {
			for _, i := range r.Instances {
				if i.Placement != nil {
					all = append(all, i)
				}
			}
		}
		return all
	})
	if err != nil {
		return nil, fmt.Errorf("describe instances of placement group %s: %w", pg.Name, err)
	}
	return out, nil
}

// clusterZone is the zone a cluster placement group's instances run in ("" while
// it has none). EC2 keeps a cluster group in one zone, so once it has an
// instance every launch into it goes there.
func (p *Provider) clusterZone(ctx context.Context, pg *PlacementGroup) (string, error) {
	if pg == nil || pg.Strategy != PlacementCluster {
		return "", nil
	}
	members, err := p.groupMembers(ctx, pg)
	if err != nil {
		return "", err
	}
	for _, m := range members {
		if z := sdkaws.ToString(m.Placement.AvailabilityZone); z != "" {
			return z, nil
		}
	}
	return "", nil
}

// placementZones narrows the zones of a launch into a cluster placement
// group that already has instances to their zone.
func (p *Provider) placementZones(ctx context.Context, pl placement, zonal map[string]Subnet) (map[string]Subnet, error) {
	zone, err := p.clusterZone(ctx, pl.group)
	if err != nil || zone == "" {
		return zonal, err
	}
	out := map[string]Subnet{}
	if s, ok := zonal[zone]; ok {
		out[zone] = s
	}
	return out, nil
}
