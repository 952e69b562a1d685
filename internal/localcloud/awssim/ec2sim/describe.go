package ec2sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// DescribeSubnets lists subnets; AvailableIpAddressCount falls as instances launch.
func (c *Cloud) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput) (*ec2.DescribeSubnetsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := missing(in.SubnetIds, func(id string) bool { return c.subnetByID(id) != nil }); ok {
		return nil, protocol.Errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
	}
	return describe(in.Filters, paging{in.MaxResults, in.NextToken, 5, 1000}, func(yield func(types.Subnet, attrs) bool) {
		for _, s := range c.subnets {
			if listed(in.SubnetIds, *s.SubnetId) && !yield(s.item()) {
				return
			}
		}
	}, func(items []types.Subnet, next *string) *ec2.DescribeSubnetsOutput {
		return &ec2.DescribeSubnetsOutput{Subnets: items, NextToken: next}
	})
}

// item is the copy of a subnet a caller gets, with its filter values.
func (s *subnet) item() (types.Subnet, attrs) {
	cp := s.Subnet
	cp.Tags = cloneTags(s.Tags)
	return cp, taggedValuesOf(s.Tags, map[string][]string{
		"subnet-id": one(s.SubnetId), "availability-zone": one(s.AvailabilityZone), "availability-zone-id": one(s.AvailabilityZoneId),
		"vpc-id": one(s.VpcId), "cidr-block": one(s.CidrBlock), "state": {string(s.State)},
		"map-public-ip-on-launch": {fmt.Sprint(aws.ToBool(s.MapPublicIpOnLaunch))},
	})
}

// DescribeSecurityGroups lists security groups by id, name and filters.
func (c *Cloud) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput) (*ec2.DescribeSecurityGroupsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids, names []string
	for _, g := range c.groups {
		ids, names = append(ids, *g.GroupId), append(names, *g.GroupName)
	}
	if id, ok := missing(in.GroupIds, func(id string) bool { return slices.Contains(ids, id) }); ok {
		return nil, protocol.Errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	}
	if n, ok := missing(in.GroupNames, func(n string) bool { return slices.Contains(names, n) }); ok {
		return nil, protocol.Errorf("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", n, c.vpcID)
	}
	return describe(in.Filters, paging{in.MaxResults, in.NextToken, 5, 1000}, func(yield func(types.SecurityGroup, attrs) bool) {
		for _, g := range c.groups {
			if listed(in.GroupIds, *g.GroupId) && listed(in.GroupNames, *g.GroupName) && !yield(groupItem(g)) {
				return
			}
		}
	}, func(items []types.SecurityGroup, next *string) *ec2.DescribeSecurityGroupsOutput {
		return &ec2.DescribeSecurityGroupsOutput{SecurityGroups: items, NextToken: next}
	})
}

// groupItem is the copy of a group a caller gets, with its filter values.
func groupItem(g *types.SecurityGroup) (types.SecurityGroup, attrs) {
	cp := *g
	cp.Tags = cloneTags(g.Tags)
	return cp, taggedValuesOf(g.Tags, map[string][]string{
		"group-id": one(g.GroupId), "group-name": one(g.GroupName), "vpc-id": one(g.VpcId),
		"description": one(g.Description), "owner-id": one(g.OwnerId),
	})
}

// DescribeImages lists images by id, owner and filters. Deprecated images are
// hidden unless IncludeDeprecated is set or they are asked for by id, as in EC2.
func (c *Cloud) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput) (*ec2.DescribeImagesOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id, ok := missing(in.ImageIds, func(id string) bool { return c.imageByID(id) != nil }); ok {
		return nil, protocol.Errorf("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
	}
	now := c.cfg.Now()
	showDeprecated := len(in.ImageIds) > 0 || aws.ToBool(in.IncludeDeprecated)
	return describe(in.Filters, paging{in.MaxResults, in.NextToken, 5, 1000}, func(yield func(types.Image, attrs) bool) {
		for _, img := range c.images {
			if !listed(in.ImageIds, *img.ImageId) || len(in.Owners) > 0 && !c.ownedBy(img, in.Owners) || !showDeprecated && deprecated(img, now) {
				continue
			}
			if !yield(imageItem(img)) {
				return
			}
		}
	}, func(items []types.Image, next *string) *ec2.DescribeImagesOutput {
		return &ec2.DescribeImagesOutput{Images: items, NextToken: next}
	})
}

// deprecated reports whether an image's deprecation time has passed.
func deprecated(img *types.Image, now time.Time) bool {
	if img.DeprecationTime == nil {
		return false
	}
	t, err := time.Parse(time.RFC3339, *img.DeprecationTime)
	return err == nil && !t.After(now)
}

// imageItem is the copy of an image a caller gets, with its filter values.
func imageItem(img *types.Image) (types.Image, attrs) {
	cp := *img
	cp.Tags = cloneTags(img.Tags)
	return cp, taggedValuesOf(img.Tags, map[string][]string{
		"image-id": one(img.ImageId), "name": one(img.Name), "architecture": {string(img.Architecture)},
		"owner-id": one(img.OwnerId), "owner-alias": one(img.ImageOwnerAlias), "state": {string(img.State)},
		"is-public": {fmt.Sprint(aws.ToBool(img.Public))}, "image-type": {string(img.ImageType)},
		"root-device-type": {string(img.RootDeviceType)}, "virtualization-type": {string(img.VirtualizationType)},
	})
}

// missing is the first of the IDs (or names) a call asks for that does
// not exist.
func missing(asked []string, exists func(string) bool) (string, bool) {
	for _, id := range asked {
		if !exists(id) {
			return id, true
		}
	}
	return "", false
}

func (c *Cloud) ownedBy(img *types.Image, owners []string) bool {
	for _, o := range owners {
		switch {
		case o == "self" && aws.ToString(img.OwnerId) == c.cfg.Account,
			o == "amazon" && aws.ToString(img.ImageOwnerAlias) == "amazon",
			o == aws.ToString(img.OwnerId):
			return true
		}
	}
	return false
}

// DescribeAvailabilityZones lists the region's zones.
func (c *Cloud) DescribeAvailabilityZones(_ context.Context, in *ec2.DescribeAvailabilityZonesInput) (*ec2.DescribeAvailabilityZonesOutput, error) {
	out := &ec2.DescribeAvailabilityZonesOutput{AvailabilityZones: []types.AvailabilityZone{}}
	for _, z := range c.cfg.Catalog.Zones() {
		az := types.AvailabilityZone{
			ZoneName: aws.String(z), ZoneId: aws.String(c.cfg.Catalog.ZoneID(z)), RegionName: aws.String(c.cfg.Region),
			State: types.AvailabilityZoneStateAvailable, ZoneType: aws.String("availability-zone"),
			GroupName: aws.String(c.cfg.Region), NetworkBorderGroup: aws.String(c.cfg.Region), OptInStatus: types.AvailabilityZoneOptInStatusOptInNotRequired,
		}
		if !listed(in.ZoneNames, z) || !listed(in.ZoneIds, *az.ZoneId) {
			continue
		}
		if err := appendMatch(&out.AvailabilityZones, in.Filters, valuesOf(map[string][]string{
			"zone-name": {z}, "zone-id": one(az.ZoneId), "region-name": {c.cfg.Region},
			"state": {"available"}, "zone-type": {"availability-zone"},
		}), az); err != nil {
			return nil, err
		}
	}
	return out, nil
}
