package ec2sim

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// subnet is a /20 of the 10.0.0.0/16 VPC from 10.0.32.0 up (10.0.0.0/24 is left
// to the local control plane's service range); private IPs are handed out in order.
type subnet struct {
	types.Subnet
	index int          // third octet base is index*16
	used  map[int]bool // host offsets in use
	next  int          // next host offset to try
}

const subnetHosts = 4096 - 5 // AWS reserves 5 addresses per subnet

func (c *Cloud) seedNetwork() {
	c.vpcID = c.newID("vpc")
	disc := types.Tag{Key: aws.String("karpenter.sh/discovery"), Value: aws.String(c.cfg.ClusterName)}
	for i, zone := range c.cfg.Catalog.Zones() {
		for _, public := range []bool{false, true} {
			idx := i * 2
			if public {
				idx++
			}
			kind, roleTag := "private", "kubernetes.io/role/internal-elb"
			tags := []types.Tag{disc}
			if public {
				kind, roleTag = "public", "kubernetes.io/role/elb"
				tags = nil // only private subnets are discovered by the cluster
			}
			tags = append(tags,
				types.Tag{Key: aws.String("Name"), Value: aws.String(fmt.Sprintf("%s-%s-%s", c.cfg.ClusterName, kind, zone))},
				types.Tag{Key: aws.String(roleTag), Value: aws.String("1")})
			id := c.newID("subnet")
			c.subnets = append(c.subnets, &subnet{
				index: idx,
				used:  map[int]bool{},
				next:  4,
				Subnet: types.Subnet{
					SubnetId:                aws.String(id),
					SubnetArn:               aws.String(fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", c.cfg.Region, c.cfg.Account, id)),
					VpcId:                   aws.String(c.vpcID),
					AvailabilityZone:        aws.String(zone),
					AvailabilityZoneId:      aws.String(c.cfg.Catalog.ZoneID(zone)),
					CidrBlock:               aws.String(fmt.Sprintf("10.0.%d.0/20", 32+idx*16)),
					AvailableIpAddressCount: aws.Int32(subnetHosts),
					State:                   types.SubnetStateAvailable,
					MapPublicIpOnLaunch:     aws.Bool(public),
					DefaultForAz:            aws.Bool(false),
					OwnerId:                 aws.String(c.cfg.Account),
					Tags:                    tags,
				},
			})
		}
	}
	group := func(name, desc string, tags []types.Tag) {
		id := c.newID("sg")
		c.groups = append(c.groups, &types.SecurityGroup{
			GroupId: aws.String(id), GroupName: aws.String(name), Description: aws.String(desc),
			VpcId: aws.String(c.vpcID), OwnerId: aws.String(c.cfg.Account), Tags: tags,
			SecurityGroupArn: aws.String(fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", c.cfg.Region, c.cfg.Account, id)),
		})
	}
	group("default", "default VPC security group", nil)
	group("eks-cluster-sg-"+c.cfg.ClusterName, "EKS created security group applied to ENI that is attached to EKS Control Plane master nodes, as well as any managed workloads.",
		[]types.Tag{disc, {Key: aws.String("kubernetes.io/cluster/" + c.cfg.ClusterName), Value: aws.String("owned")}, {Key: aws.String("Name"), Value: aws.String("eks-cluster-sg-" + c.cfg.ClusterName)}})
	group(c.cfg.ClusterName+"-node", "Node security group", []types.Tag{disc, {Key: aws.String("Name"), Value: aws.String(c.cfg.ClusterName + "-node")}})
}

// allocateIP takes the next free private IP of s. Caller holds mu.
func (s *subnet) allocateIP() (string, bool) {
	if len(s.used) >= subnetHosts {
		return "", false
	}
	for s.used[s.next] {
		s.next = (s.next + 1) % 4095
		if s.next < 4 {
			s.next = 4
		}
	}
	off := s.next
	s.used[off] = true
	s.next++
	s.AvailableIpAddressCount = aws.Int32(int32(subnetHosts - len(s.used)))
	return fmt.Sprintf("10.0.%d.%d", 32+s.index*16+off/256, off%256), true
}

func (s *subnet) releaseIP(ip string) {
	var a, b, o3, o4 int
	if _, err := fmt.Sscanf(ip, "%d.%d.%d.%d", &a, &b, &o3, &o4); err != nil {
		return
	}
	delete(s.used, (o3-32-s.index*16)*256+o4)
	s.AvailableIpAddressCount = aws.Int32(int32(subnetHosts - len(s.used)))
}

func (c *Cloud) subnetByID(id string) *subnet {
	for _, s := range c.subnets {
		if *s.SubnetId == id {
			return s
		}
	}
	return nil
}

// Network describes the seeded VPC for other simulated services (EKS).
type Network struct {
	VPCID                  string
	SubnetIDs              []string // the cluster's (private, discovery-tagged) subnets
	ClusterSecurityGroupID string
}

// Network returns the seeded VPC layout.
func (c *Cloud) Network() Network {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := Network{VPCID: c.vpcID}
	for _, s := range c.subnets {
		if !aws.ToBool(s.MapPublicIpOnLaunch) {
			n.SubnetIDs = append(n.SubnetIDs, *s.SubnetId)
		}
	}
	for _, g := range c.groups {
		if strings.HasPrefix(*g.GroupName, "eks-cluster-sg-") {
			n.ClusterSecurityGroupID = *g.GroupId
		}
	}
	return n
}
