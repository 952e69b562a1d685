package ec2sim

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// CloneRunning seeds n copies of the running instance id, as if the same
// fleet had launched them: each has its own instance, volume and network
// interface IDs and its own private IP in the same subnet, and the same
// type, zone, image, tags and user data, already running. No transition is
// observed, so the kubelet emulation registers no Node for them: a scale
// harness (internal/localcloud/scaletest) creates their Nodes itself, by
// the thousand, far faster than launches through CreateFleet would.
func (c *Cloud) CloneRunning(id string, n int) ([]types.Instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	src := c.instances[id]
	if src == nil || src.State.Name != types.InstanceStateNameRunning {
		return nil, fmt.Errorf("ec2sim: clone %s: no such running instance", id)
	}
	sub := c.subnetByID(aws.ToString(src.SubnetId))
	if sub == nil {
		return nil, fmt.Errorf("ec2sim: clone %s: its subnet is gone", id)
	}
	out := make([]types.Instance, 0, n)
	for range n {
		ip, ok := sub.allocateIP()
		if !ok {
			return out, fmt.Errorf("ec2sim: clone %s: subnet %s is full", id, aws.ToString(sub.SubnetId))
		}
		in := c.cloneOf(src, ip)
		c.instances[*in.InstanceId] = in
		c.order = append(c.order, *in.InstanceId)
		out = append(out, in.snapshot())
	}
	return out, nil
}

// cloneOf copies src with fresh identifiers and address ip. Caller holds mu.
func (c *Cloud) cloneOf(src *instance, ip string) *instance {
	in := &instance{Instance: src.Instance, capacityType: src.capacityType, userData: src.userData, reservation: c.newID("r")}
	dns := c.privateDNSName(ip)
	in.InstanceId, in.PrivateIpAddress, in.PrivateDnsName = aws.String(c.newID("i")), aws.String(ip), aws.String(dns)
	in.Tags = append([]types.Tag(nil), src.Tags...)
	if src.SpotInstanceRequestId != nil {
		in.SpotInstanceRequestId = aws.String(c.newID("sir"))
	}
	in.BlockDeviceMappings = nil
	for _, m := range src.BlockDeviceMappings {
		if m.Ebs != nil {
			ebs := *m.Ebs
			ebs.VolumeId = aws.String(c.newID("vol"))
			c.copyResourceTags(aws.ToString(m.Ebs.VolumeId), *ebs.VolumeId)
			m.Ebs = &ebs
		}
		in.BlockDeviceMappings = append(in.BlockDeviceMappings, m)
	}
	in.NetworkInterfaces = nil
	for _, ni := range src.NetworkInterfaces {
		orig := aws.ToString(ni.NetworkInterfaceId)
		ni.NetworkInterfaceId = aws.String(c.newID("eni"))
		c.copyResourceTags(orig, *ni.NetworkInterfaceId)
		ni.PrivateIpAddress, ni.PrivateDnsName = aws.String(ip), aws.String(dns)
		ni.PrivateIpAddresses = []types.InstancePrivateIpAddress{{Primary: aws.Bool(true), PrivateIpAddress: aws.String(ip), PrivateDnsName: aws.String(dns)}}
		if ni.Attachment != nil {
			att := *ni.Attachment
			att.AttachmentId = aws.String(c.newID("eni-attach"))
			ni.Attachment = &att
		}
		in.NetworkInterfaces = append(in.NetworkInterfaces, ni)
	}
	return in
}

// copyResourceTags gives resource to the tags of from. Caller holds mu.
func (c *Cloud) copyResourceTags(from, to string) {
	if tags := c.resourceTags[from]; tags != nil {
		cp := append([]types.Tag(nil), (*tags)...)
		c.resourceTags[to] = &cp
	}
}
