package ec2sim

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// Placement groups. A launch template's Placement names a group (by id or
// name) and, for a partition group, optionally a partition; the instance
// records both. The rules EC2 enforces that a launch can run into:
//   - cluster: every live instance of the group is in one zone, the zone of
//     its first instance; a launch elsewhere fails;
//   - partition: partitions are numbered 1..PartitionCount; a launch that
//     names none goes to the partition with the fewest live instances;
//   - spread (rack level): at most seven live instances per zone.

// spreadLimitPerZone is EC2's limit of instances per zone in a rack-level
// spread placement group.
const spreadLimitPerZone = 7

// PlacementGroup describes a placement group a test creates.
type PlacementGroup struct {
	Name string
	// Strategy is "cluster", "partition" or "spread".
	Strategy string
	// PartitionCount is for partition groups (EC2 allows 1..7).
	PartitionCount int
	Tags           map[string]string
}

// AddPlacementGroup creates an available placement group and returns its id.
func (c *Cloud) AddPlacementGroup(g PlacementGroup) (string, error) {
	strategy := types.PlacementStrategy(g.Strategy)
	switch strategy {
	case types.PlacementStrategyCluster, types.PlacementStrategySpread:
		if g.PartitionCount != 0 {
			return "", fmt.Errorf("placement group %s: only partition groups have partitions", g.Name)
		}
	case types.PlacementStrategyPartition:
		if g.PartitionCount < 1 || g.PartitionCount > 7 {
			return "", fmt.Errorf("placement group %s: partition count %d not in 1..7", g.Name, g.PartitionCount)
		}
	default:
		return "", fmt.Errorf("placement group %s: strategy %q is not cluster, partition or spread", g.Name, g.Strategy)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.placementGroupByName(g.Name) != nil {
		return "", fmt.Errorf("placement group %s already exists", g.Name)
	}
	id := c.newID("pg")
	var tags []types.Tag
	for k, v := range g.Tags {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	pg := &types.PlacementGroup{
		GroupId: aws.String(id), GroupName: aws.String(g.Name), Strategy: strategy,
		GroupArn: aws.String(c.arn("placement-group", g.Name)), State: types.PlacementGroupStateAvailable, Tags: tags,
	}
	switch strategy {
	case types.PlacementStrategyPartition:
		pg.PartitionCount = aws.Int32(int32(g.PartitionCount))
	case types.PlacementStrategySpread:
		pg.SpreadLevel = types.SpreadLevelRack
	}
	c.placementGroups[id] = pg
	c.pgOrder = append(c.pgOrder, id)
	return id, nil
}

// DescribePlacementGroups lists placement groups by id, name and filters
// (group-name, group-arn, state, strategy, spread-level, tag:<key>, tag-key).
// An unknown id or name fails the call, as EC2's does.
func (c *Cloud) DescribePlacementGroups(_ context.Context, in *ec2.DescribePlacementGroupsInput) (*ec2.DescribePlacementGroupsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := missing(in.GroupIds, func(id string) bool { return c.placementGroups[id] != nil }); ok {
		return nil, protocol.Errorf("InvalidPlacementGroupId.NotFound", "The Placement Group ID '%s' does not exist", id)
	}
	if name, ok := missing(in.GroupNames, func(n string) bool { return c.placementGroupByName(n) != nil }); ok {
		return nil, protocol.Errorf("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", name)
	}
	asked := func(yield func(types.PlacementGroup, attrs) bool) {
		for _, id := range c.pgOrder {
			pg := c.placementGroups[id]
			if !listed(in.GroupIds, id) || !listed(in.GroupNames, aws.ToString(pg.GroupName)) {
				continue
			}
			item := *pg
			item.Tags = cloneTags(pg.Tags)
			values := map[string][]string{
				"group-name": one(pg.GroupName), "group-arn": one(pg.GroupArn), "state": {string(pg.State)},
				"strategy": {string(pg.Strategy)}, "spread-level": {string(pg.SpreadLevel)},
			}
			if !yield(item, taggedValuesOf(pg.Tags, values)) {
				return
			}
		}
	}
	return describe(in.Filters, paging{lo: 1, hi: 1}, asked, func(items []types.PlacementGroup, _ *string) *ec2.DescribePlacementGroupsOutput {
		return &ec2.DescribePlacementGroupsOutput{PlacementGroups: items}
	})
}

func (c *Cloud) placementGroupByName(name string) *types.PlacementGroup {
	for _, id := range c.pgOrder {
		if pg := c.placementGroups[id]; aws.ToString(pg.GroupName) == name {
			return pg
		}
	}
	return nil
}

// templatePlacementGroup is the group a launch template's Placement names,
// nil for none. Caller holds mu.
func (c *Cloud) templatePlacementGroup(d *types.RequestLaunchTemplateData) (*types.PlacementGroup, string, string) {
	p := d.Placement
	if p == nil || (aws.ToString(p.GroupId) == "" && aws.ToString(p.GroupName) == "") {
		return nil, "", ""
	}
	pg := c.placementGroups[aws.ToString(p.GroupId)]
	if pg == nil && aws.ToString(p.GroupId) == "" {
		pg = c.placementGroupByName(aws.ToString(p.GroupName))
	}
	if pg == nil {
		return nil, "InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s%s' is unknown.", aws.ToString(p.GroupId), aws.ToString(p.GroupName))
	}
	if n := aws.ToInt32(p.PartitionNumber); n != 0 {
		if pg.Strategy != types.PlacementStrategyPartition || n < 0 || n > aws.ToInt32(pg.PartitionCount) {
			return nil, "InvalidParameterValue", fmt.Sprintf("Partition number %d is not valid for placement group '%s'.", n, aws.ToString(pg.GroupName))
		}
	}
	return pg, "", ""
}

// placementUnavailable explains why the candidate's placement group cannot
// take one more instance in its zone. Caller holds mu.
func (c *Cloud) placementUnavailable(cd *candidate) (string, string) {
	pg, _, _ := c.templatePlacementGroup(&cd.lt.data)
	if pg == nil {
		return "", ""
	}
	name := aws.ToString(pg.GroupName)
	if pgi := c.cfg.Catalog.Types[cd.itype].PlacementGroupInfo; pgi != nil && !slices.Contains(pgi.SupportedStrategies, types.PlacementGroupStrategy(pg.Strategy)) {
		return "InvalidParameterCombination", fmt.Sprintf("The instance type '%s' is not supported in a %s placement group ('%s').", cd.itype, pg.Strategy, name)
	}
	members := c.placementMembers(aws.ToString(pg.GroupId))
	switch pg.Strategy {
	case types.PlacementStrategyCluster:
		for _, m := range members {
			if z := aws.ToString(m.Placement.AvailabilityZone); z != cd.zone {
				return "InvalidParameterCombination", fmt.Sprintf("The cluster placement group '%s' has instances in %s; instances cannot be launched into it in %s.", name, z, cd.zone)
			}
		}
	case types.PlacementStrategySpread:
		inZone := 0
		for _, m := range members {
			if aws.ToString(m.Placement.AvailabilityZone) == cd.zone {
				inZone++
			}
		}
		if inZone >= spreadLimitPerZone {
			return "InsufficientInstanceCapacity", "You've reached the limit of instances in this spread placement group. A spread placement group can have up to seven instances per Availability Zone."
		}
	}
	return "", ""
}

// placeInstance records the instance's placement group and partition.
// Caller holds mu; the candidate passed placementUnavailable.
func (c *Cloud) placeInstance(inst *instance, cd *candidate) {
	pg, _, _ := c.templatePlacementGroup(&cd.lt.data)
	if pg == nil {
		return
	}
	inst.Placement.GroupId, inst.Placement.GroupName = pg.GroupId, pg.GroupName
	if pg.Strategy != types.PlacementStrategyPartition {
		return
	}
	n := aws.ToInt32(cd.lt.data.Placement.PartitionNumber)
	if n == 0 {
		n = c.emptiestPartition(pg)
	}
	inst.Placement.PartitionNumber = aws.Int32(n)
}

// emptiestPartition is the partition with the fewest live instances (the
// lowest of equals). Caller holds mu.
func (c *Cloud) emptiestPartition(pg *types.PlacementGroup) int32 {
	count := map[int32]int{}
	for _, m := range c.placementMembers(aws.ToString(pg.GroupId)) {
		count[aws.ToInt32(m.Placement.PartitionNumber)]++
	}
	best := int32(1)
	for p := int32(2); p <= aws.ToInt32(pg.PartitionCount); p++ {
		if count[p] < count[best] {
			best = p
		}
	}
	return best
}

// placementMembers are the group's pending and running instances. Caller holds mu.
func (c *Cloud) placementMembers(groupID string) []*instance {
	var out []*instance
	for _, id := range c.order {
		in := c.instances[id]
		live := in.State.Name == types.InstanceStateNamePending || in.State.Name == types.InstanceStateNameRunning
		if live && aws.ToString(in.Placement.GroupId) == groupID {
			out = append(out, in)
		}
	}
	return out
}

// placementAttrs are the instance filters on its placement group.
func placementAttrs(p *types.Placement) map[string][]string {
	out := map[string][]string{"placement-group-name": one(p.GroupName), "placement-partition-number": nil}
	if p.PartitionNumber != nil {
		out["placement-partition-number"] = []string{strconv.Itoa(int(*p.PartitionNumber))}
	}
	return out
}
