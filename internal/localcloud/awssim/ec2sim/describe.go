package ec2sim

import (
	"context"
	"fmt"
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
	for _, id := range in.SubnetIds {
		if c.subnetByID(id) == nil {
			return nil, protocol.Errorf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	var out []types.Subnet
	for _, s := range c.subnets {
		if len(in.SubnetIds) > 0 && !contains(in.SubnetIds, *s.SubnetId) {
			continue
		}
		cp := s.Subnet
		cp.Tags = cloneTags(s.Tags)
		if err := appendMatch(&out, in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "subnet-id":
				return one(s.SubnetId), true
			case "availability-zone":
				return one(s.AvailabilityZone), true
			case "availability-zone-id":
				return one(s.AvailabilityZoneId), true
			case "vpc-id":
				return one(s.VpcId), true
			case "cidr-block":
				return one(s.CidrBlock), true
			case "state":
				return []string{string(s.State)}, true
			case "map-public-ip-on-launch":
				return []string{fmt.Sprint(aws.ToBool(s.MapPublicIpOnLaunch))}, true
			}
			return tagAttrs(s.Tags, name)
		}, cp); err != nil {
			return nil, err
		}
	}
	items, next, err := pageOf(out, in.MaxResults, in.NextToken, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeSubnetsOutput{Subnets: items, NextToken: next}, nil
}

// DescribeSecurityGroups lists security groups by id, name and filters.
func (c *Cloud) DescribeSecurityGroups(_ context.Context, in *ec2.DescribeSecurityGroupsInput) (*ec2.DescribeSecurityGroupsOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	find := func(match func(*types.SecurityGroup) bool) bool {
		for _, g := range c.groups {
			if match(g) {
				return true
			}
		}
		return false
	}
	for _, id := range in.GroupIds {
		if !find(func(g *types.SecurityGroup) bool { return *g.GroupId == id }) {
			return nil, protocol.Errorf("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	for _, n := range in.GroupNames {
		if !find(func(g *types.SecurityGroup) bool { return *g.GroupName == n }) {
			return nil, protocol.Errorf("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", n, c.vpcID)
		}
	}
	var out []types.SecurityGroup
	for _, g := range c.groups {
		if len(in.GroupIds) > 0 && !contains(in.GroupIds, *g.GroupId) || len(in.GroupNames) > 0 && !contains(in.GroupNames, *g.GroupName) {
			continue
		}
		cp := *g
		cp.Tags = cloneTags(g.Tags)
		if err := appendMatch(&out, in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "group-id":
				return one(g.GroupId), true
			case "group-name":
				return one(g.GroupName), true
			case "vpc-id":
				return one(g.VpcId), true
			case "description":
				return one(g.Description), true
			case "owner-id":
				return one(g.OwnerId), true
			}
			return tagAttrs(g.Tags, name)
		}, cp); err != nil {
			return nil, err
		}
	}
	items, next, err := pageOf(out, in.MaxResults, in.NextToken, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeSecurityGroupsOutput{SecurityGroups: items, NextToken: next}, nil
}

// DescribeImages lists images by id, owner and filters. Deprecated images are
// hidden unless IncludeDeprecated is set or they are asked for by id, as in EC2.
func (c *Cloud) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput) (*ec2.DescribeImagesOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range in.ImageIds {
		if c.imageByID(id) == nil {
			return nil, protocol.Errorf("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
	}
	now := c.cfg.Now()
	var out []types.Image
	for _, img := range c.images {
		if len(in.ImageIds) > 0 && !contains(in.ImageIds, *img.ImageId) {
			continue
		}
		if len(in.Owners) > 0 && !c.ownedBy(img, in.Owners) {
			continue
		}
		if len(in.ImageIds) == 0 && !aws.ToBool(in.IncludeDeprecated) && img.DeprecationTime != nil {
			if t, err := time.Parse(time.RFC3339, *img.DeprecationTime); err == nil && !t.After(now) {
				continue
			}
		}
		cp := *img
		cp.Tags = cloneTags(img.Tags)
		if err := appendMatch(&out, in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "image-id":
				return one(img.ImageId), true
			case "name":
				return one(img.Name), true
			case "architecture":
				return []string{string(img.Architecture)}, true
			case "owner-id":
				return one(img.OwnerId), true
			case "owner-alias":
				return one(img.ImageOwnerAlias), true
			case "state":
				return []string{string(img.State)}, true
			case "is-public":
				return []string{fmt.Sprint(aws.ToBool(img.Public))}, true
			case "image-type":
				return []string{string(img.ImageType)}, true
			case "root-device-type":
				return []string{string(img.RootDeviceType)}, true
			case "virtualization-type":
				return []string{string(img.VirtualizationType)}, true
			}
			return tagAttrs(img.Tags, name)
		}, cp); err != nil {
			return nil, err
		}
	}
	items, next, err := pageOf(out, in.MaxResults, in.NextToken, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeImagesOutput{Images: items, NextToken: next}, nil
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
		if len(in.ZoneNames) > 0 && !contains(in.ZoneNames, z) || len(in.ZoneIds) > 0 && !contains(in.ZoneIds, *az.ZoneId) {
			continue
		}
		if err := appendMatch(&out.AvailabilityZones, in.Filters, func(name string) ([]string, bool) {
			switch name {
			case "zone-name":
				return []string{z}, true
			case "zone-id":
				return one(az.ZoneId), true
			case "region-name":
				return []string{c.cfg.Region}, true
			case "state":
				return []string{"available"}, true
			case "zone-type":
				return []string{"availability-zone"}, true
			}
			return nil, false
		}, az); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
