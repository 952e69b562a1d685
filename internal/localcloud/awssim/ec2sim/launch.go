package ec2sim

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
)

// launch creates one pending instance in a pool. Caller holds mu and has
// checked the pool with unavailable.
func (c *Cloud) launch(in *ec2.CreateFleetInput, cd *candidate, life types.InstanceLifecycle, fleetID string) *instance {
	pool := Pool{cd.itype, cd.zone, string(life)}
	if n, limited := c.remaining(pool); limited && reservationOf(cd) == "" {
		c.capacity[pool] = n - 1
	}
	ip, _ := cd.subnet.allocateIP()
	id := c.newID("i")
	data := &cd.lt.data
	tags, volTags, eniTags := launchTags(in, cd, fleetID)
	groups := c.launchGroups(data)

	volID, eniID := c.newID("vol"), c.newID("eni")
	c.resourceTags[volID] = &volTags
	c.resourceTags[eniID] = &eniTags
	inst := c.newInstance(in, cd, life, launchedIDs{instance: id, volume: volID, eni: eniID, ip: ip}, groups, tags)
	if life == types.InstanceLifecycleSpot {
		inst.InstanceLifecycle = types.InstanceLifecycleTypeSpot
		inst.SpotInstanceRequestId = aws.String(c.newID("sir"))
	}
	c.applyTemplateOptions(inst, data)
	inst.volumeKeys = encryptedVolumeKeys(data)
	inst.unseen = c.cfg.ConsistencyDelay > 0 && c.cfg.Rules.On(fidelity.LaunchConsistency)
	c.placeInstance(inst, cd)
	c.joinReservation(inst, cd, life)
	c.instances[id] = inst
	c.order = append(c.order, id)
	return inst
}

// launchTags are the tags of the instance, its volume and its network
// interface: the launch template's, then the request's (an instant fleet
// tags only instances and volumes: checkFleetTagTypes), then the system
// tags EC2 adds to fleet instances.
func launchTags(in *ec2.CreateFleetInput, cd *candidate, fleetID string) (tags, volTags, eniTags []types.Tag) {
	tags = []types.Tag{}
	volTags, eniTags = []types.Tag{}, []types.Tag{}
	for _, s := range cd.lt.data.TagSpecifications {
		switch s.ResourceType {
		case types.ResourceTypeInstance:
			tags = mergeTags(tags, s.Tags)
		case types.ResourceTypeVolume:
			volTags = mergeTags(volTags, s.Tags)
		case types.ResourceTypeNetworkInterface:
			eniTags = mergeTags(eniTags, s.Tags)
		}
	}
	tags = mergeTags(tags, tagsFor(in.TagSpecifications, types.ResourceTypeInstance))
	volTags = mergeTags(volTags, tagsFor(in.TagSpecifications, types.ResourceTypeVolume))
	// EC2 adds these system tags to fleet instances.
	tags = append(tags,
		types.Tag{Key: aws.String("aws:ec2launchtemplate:id"), Value: cd.lt.meta.LaunchTemplateId},
		types.Tag{Key: aws.String("aws:ec2launchtemplate:version"), Value: aws.String("1")},
		types.Tag{Key: aws.String("aws:ec2:fleet-id"), Value: aws.String(fleetID)})
	return tags, volTags, eniTags
}

// launchGroups resolves the launch template's security groups, by ID (its
// own or its first network interface's) and by name.
func (c *Cloud) launchGroups(data *types.RequestLaunchTemplateData) []types.GroupIdentifier {
	groupIDs := append([]string(nil), data.SecurityGroupIds...)
	if len(groupIDs) == 0 && len(data.NetworkInterfaces) > 0 {
		groupIDs = append(groupIDs, data.NetworkInterfaces[0].Groups...)
	}
	var groups []types.GroupIdentifier
	for _, gid := range groupIDs {
		gi := types.GroupIdentifier{GroupId: aws.String(gid)}
		for _, g := range c.groups {
			if *g.GroupId == gid {
				gi.GroupName = g.GroupName
			}
		}
		groups = append(groups, gi)
	}
	for _, name := range data.SecurityGroups {
		for _, g := range c.groups {
			if *g.GroupName == name {
				groups = append(groups, types.GroupIdentifier{GroupId: g.GroupId, GroupName: g.GroupName})
			}
		}
	}
	return groups
}

// launchedIDs are the identifiers allocated for one launched instance.
type launchedIDs struct {
	instance, volume, eni, ip string
}

// newInstance builds the pending instance as EC2 describes it.
func (c *Cloud) newInstance(in *ec2.CreateFleetInput, cd *candidate, life types.InstanceLifecycle, ids launchedIDs, groups []types.GroupIdentifier, tags []types.Tag) *instance {
	now := c.cfg.Now().UTC()
	ip := ids.ip
	dns := c.privateDNSName(ip)
	inst := &instance{capacityType: string(life), userData: aws.ToString(cd.lt.data.UserData), reservation: c.newID("r"), hidden: c.hideNew}
	inst.Instance = types.Instance{
		InstanceId: aws.String(ids.instance), InstanceType: types.InstanceType(cd.itype), ImageId: cd.image.ImageId,
		Architecture: cd.image.Architecture, State: state(types.InstanceStateNamePending),
		Placement: &types.Placement{AvailabilityZone: aws.String(cd.zone), Tenancy: types.TenancyDefault},
		SubnetId:  cd.subnet.SubnetId, VpcId: cd.subnet.VpcId, PrivateIpAddress: aws.String(ip), PrivateDnsName: aws.String(dns),
		LaunchTime: aws.Time(now), AmiLaunchIndex: aws.Int32(0), Hypervisor: types.HypervisorTypeXen,
		RootDeviceName: aws.String("/dev/xvda"), RootDeviceType: types.DeviceTypeEbs, VirtualizationType: types.VirtualizationTypeHvm,
		EbsOptimized: aws.Bool(true), EnaSupport: aws.Bool(true), SourceDestCheck: aws.Bool(true),
		ClientToken: in.ClientToken, SecurityGroups: groups, Tags: tags, PlatformDetails: aws.String("Linux/UNIX"),
		UsageOperation: aws.String("RunInstances"), UsageOperationUpdateTime: aws.Time(now),
		MetadataOptions: &types.InstanceMetadataOptionsResponse{HttpEndpoint: types.InstanceMetadataEndpointStateEnabled, HttpTokens: types.HttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1), State: types.InstanceMetadataOptionsStateApplied},
		BlockDeviceMappings: []types.InstanceBlockDeviceMapping{{DeviceName: aws.String("/dev/xvda"), Ebs: &types.EbsInstanceBlockDevice{
			VolumeId: aws.String(ids.volume), Status: types.AttachmentStatusAttached, AttachTime: aws.Time(now), DeleteOnTermination: aws.Bool(true)}}},
		NetworkInterfaces: []types.InstanceNetworkInterface{{
			NetworkInterfaceId: aws.String(ids.eni), SubnetId: cd.subnet.SubnetId, VpcId: cd.subnet.VpcId, PrivateIpAddress: aws.String(ip),
			PrivateDnsName: aws.String(dns), Status: types.NetworkInterfaceStatusInUse, Groups: groups, OwnerId: aws.String(c.cfg.Account),
			Attachment:         &types.InstanceNetworkInterfaceAttachment{AttachmentId: aws.String(c.newID("eni-attach")), DeviceIndex: aws.Int32(0), Status: types.AttachmentStatusAttached, AttachTime: aws.Time(now), DeleteOnTermination: aws.Bool(true)},
			PrivateIpAddresses: []types.InstancePrivateIpAddress{{Primary: aws.Bool(true), PrivateIpAddress: aws.String(ip), PrivateDnsName: aws.String(dns)}},
		}},
	}
	if cd.image.Platform == types.PlatformValuesWindows {
		// EC2 describes an instance of a Windows image as Windows.
		inst.Platform = types.PlatformValuesWindows
		inst.PlatformDetails = cd.image.PlatformDetails
	}
	return inst
}

// applyTemplateOptions applies the launch template's instance profile, CPU
// and metadata options.
func (c *Cloud) applyTemplateOptions(inst *instance, data *types.RequestLaunchTemplateData) {
	if p := data.IamInstanceProfile; p != nil {
		arn := aws.ToString(p.Arn)
		if arn == "" {
			arn = fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", c.cfg.Account, aws.ToString(p.Name))
		}
		inst.IamInstanceProfile = &types.IamInstanceProfile{Arn: aws.String(arn), Id: aws.String("AIPA" + strings.ToUpper(c.newID("x")[2:]))}
	}
	if wantsNestedVirtualization(data) {
		inst.CpuOptions = &types.CpuOptions{NestedVirtualization: types.NestedVirtualizationSpecificationEnabled}
	}
	if m := data.MetadataOptions; m != nil {
		if m.HttpTokens != "" {
			inst.MetadataOptions.HttpTokens = types.HttpTokensState(m.HttpTokens)
		}
		if m.HttpPutResponseHopLimit != nil {
			inst.MetadataOptions.HttpPutResponseHopLimit = m.HttpPutResponseHopLimit
		}
	}
}

// wantsNestedVirtualization: the template's CPU options enable nested
// virtualization, which EC2 accepts only on the types that support it.
func wantsNestedVirtualization(data *types.RequestLaunchTemplateData) bool {
	return data.CpuOptions != nil && data.CpuOptions.NestedVirtualization == types.NestedVirtualizationSpecificationEnabled
}

// privateDNSName follows EC2's naming: us-east-1 uses ec2.internal, other
// regions <region>.compute.internal.
func (c *Cloud) privateDNSName(ip string) string {
	host := "ip-" + strings.ReplaceAll(ip, ".", "-")
	if c.cfg.Region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + c.cfg.Region + ".compute.internal"
}
