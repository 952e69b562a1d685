package aws

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/aws/userdata"
)

// templateSpec is everything a launch template holds. Its hash names the
// template, so equal launches share one template and any change makes a new
// one (never an in-place edit a running launch could observe half-done).
type templateSpec struct {
	Cluster             string                                             `json:"cluster"`
	Owner               string                                             `json:"owner"`
	NodeClass           string                                             `json:"nodeClass"`
	NodeClassHash       string                                             `json:"nodeClassHash"`
	ImageID             string                                             `json:"imageID"`
	UserData            string                                             `json:"userData"` // base64
	SecurityGroupIDs    []string                                           `json:"securityGroupIDs"`
	InstanceProfile     string                                             `json:"instanceProfile"`
	BlockDeviceMappings []ec2types.LaunchTemplateBlockDeviceMappingRequest `json:"blockDeviceMappings"`
	MetadataOptions     apis.MetadataOptions                               `json:"metadataOptions"`
	DetailedMonitoring  bool                                               `json:"detailedMonitoring"`
	AssociatePublicIP   *bool                                              `json:"associatePublicIP,omitempty"`
	CapacityReservation string                                             `json:"capacityReservation,omitempty"`
	// CapacityReservationPreference "none" keeps a launch out of open
	// reservations (omitted when unset, so older templates keep their names).
	CapacityReservationPreference string `json:"capacityReservationPreference,omitempty"`
	// The interface layout; all omitted when unset so that templates made
	// before these fields existed keep their names.
	IPPrefixCount      *int32                   `json:"ipPrefixCount,omitempty"`
	NetworkInterfaces  []*apis.NetworkInterface `json:"networkInterfaces,omitempty"`
	ConnectionTracking *apis.ConnectionTracking `json:"connectionTracking,omitempty"`
	// NestedVirtualization is the class's cpuOptions.nestedVirtualization.
	NestedVirtualization string `json:"nestedVirtualization,omitempty"`
	// The placement group (by id) and partition (0: none) of the launch.
	PlacementGroupID   string `json:"placementGroupID,omitempty"`
	PlacementPartition int32  `json:"placementPartition,omitempty"`
	// ResourceTags are the tags the template's launches give their network
	// interfaces and, with SpotRequestTags, their spot instance requests
	// (Provider.PoolTags: one NodePool's).
	ResourceTags    map[string]string `json:"resourceTags,omitempty"`
	SpotRequestTags bool              `json:"spotRequestTags,omitempty"`
	// ClassTags (the EC2NodeClass's spec.tags) and NodePool tag the
	// template itself, as Karpenter tags its templates.
	ClassTags map[string]string `json:"classTags,omitempty"`
	NodePool  string            `json:"nodePool,omitempty"`
	// MarketType is the market of a reserved launch's reservation
	// (capacity-block, interruptible-capacity-reservation), "" for others.
	MarketType string `json:"marketType,omitempty"`
	// IPv6 says the cluster's IP family is IPv6 (the interfaces' addresses).
	IPv6 bool `json:"ipv6,omitempty"`
	// Shape is the version of what createLaunchTemplate makes of a spec:
	// raised whenever that changes, so that no template made the old way
	// is found by name and reused.
	Shape int `json:"shape"`
}

// templateShape is the current Shape: 2 is Karpenter-AWS v1.14's request
// shape (interfaces, placement, enclave and IMDS tag options always
// explicit, reservation preference on every template).
const templateShape = 2

// Name is the deterministic launch template name: nodewright/<cluster>/<hash>.
// The hash covers the template's tags too: a template made before a tag was
// added (IAM lets launches use only templates carrying TagManagedBy) is
// replaced by a new one rather than reused.
func (s templateSpec) Name() string {
	b, _ := json.Marshal(struct {
		templateSpec
		Tags map[string]string `json:"tags"`
	}{s, s.tags()}) // plain data
	sum := sha256.Sum256(b)
	return "nodewright/" + s.Cluster + "/" + hex.EncodeToString(sum[:10])
}

// tags are the tags the launch template carries: the class's tags and the
// NodePool, as on Karpenter's templates (tag policies and cost
// allocation see every resource a node brings), under nodewright's own.
// Not eks:eks-cluster-name: Karpenter's launch template cache lists the
// cluster's templates by it and deletes each one that expires from the
// cache, which during a migration would be all of nodewright's.
func (s templateSpec) tags() map[string]string {
	tags := maps.Clone(s.ClassTags)
	if tags == nil {
		tags = map[string]string{}
	}
	if s.NodePool != "" {
		tags[TagNodePool] = s.NodePool
	}
	maps.Copy(tags, map[string]string{
		ClusterTagKey(s.Cluster): "owned",
		TagClusterName:           s.Cluster,
		TagNodeClass:             s.NodeClass,
		TagManagedBy:             ManagedBy,
		TagOwner:                 s.Owner,
	})
	return tags
}

// defaultBlockDevices are the root volumes Karpenter gives each AMI family
// when the EC2NodeClass sets none (20Gi gp3 encrypted; Bottlerocket splits
// a 4Gi OS volume from a 20Gi data volume; Windows needs 50Gi).
func defaultBlockDevices(family string) []*apis.BlockDeviceMapping {
	ebs := func(gi string) *apis.BlockDevice {
		q := resource.MustParse(gi)
		return &apis.BlockDevice{VolumeSize: &q, VolumeType: sdkaws.String("gp3"), Encrypted: sdkaws.Bool(true), DeleteOnTermination: sdkaws.Bool(true)}
	}
	switch family {
	case apis.AMIFamilyBottlerocket:
		return []*apis.BlockDeviceMapping{
			{DeviceName: sdkaws.String("/dev/xvda"), EBS: ebs("4Gi")},
			{DeviceName: sdkaws.String("/dev/xvdb"), EBS: ebs("20Gi")},
		}
	case apis.AMIFamilyWindows2019, apis.AMIFamilyWindows2022, apis.AMIFamilyWindows2025:
		return []*apis.BlockDeviceMapping{{DeviceName: sdkaws.String("/dev/sda1"), EBS: ebs("50Gi")}}
	case apis.AMIFamilyCustom:
		return nil
	default:
		return []*apis.BlockDeviceMapping{{DeviceName: sdkaws.String("/dev/xvda"), EBS: ebs("20Gi")}}
	}
}

func blockDeviceRequests(nc *apis.EC2NodeClass) ([]ec2types.LaunchTemplateBlockDeviceMappingRequest, error) {
	mappings := nc.Spec.BlockDeviceMappings
	if len(mappings) == 0 {
		mappings = defaultBlockDevices(nc.AMIFamily())
	}
	out := make([]ec2types.LaunchTemplateBlockDeviceMappingRequest, 0, len(mappings))
	for i, m := range mappings {
		if m == nil || m.DeviceName == nil || *m.DeviceName == "" {
			return nil, fmt.Errorf("EC2NodeClass %s: spec.blockDeviceMappings[%d].deviceName is required", nc.Name, i)
		}
		r := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName}
		if e := m.EBS; e != nil {
			r.Ebs = &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				DeleteOnTermination: e.DeleteOnTermination,
				Encrypted:           e.Encrypted,
				KmsKeyId:            e.KMSKeyID,
				SnapshotId:          e.SnapshotID,
				// Only valid with a snapshot; validation enforces that.
				VolumeInitializationRate: e.VolumeInitializationRate,
			}
			if e.IOPS != nil {
				r.Ebs.Iops = sdkaws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil {
				r.Ebs.Throughput = sdkaws.Int32(int32(*e.Throughput))
			}
			if e.VolumeType != nil {
				r.Ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
			}
			if e.VolumeSize != nil {
				// EBS sizes are whole GiB; round up so a request is never shrunk.
				gib := (e.VolumeSize.Value() + (1<<30 - 1)) >> 30
				r.Ebs.VolumeSize = sdkaws.Int32(int32(gib))
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func metadataOptions(nc *apis.EC2NodeClass) apis.MetadataOptions {
	m := apis.MetadataOptions{
		HTTPEndpoint:            sdkaws.String("enabled"),
		HTTPProtocolIPv6:        sdkaws.String("disabled"),
		HTTPPutResponseHopLimit: sdkaws.Int64(2), // Karpenter's default: containers reach IMDS
		HTTPTokens:              sdkaws.String("required"),
	}
	if o := nc.Spec.MetadataOptions; o != nil {
		if o.HTTPEndpoint != nil {
			m.HTTPEndpoint = o.HTTPEndpoint
		}
		if o.HTTPProtocolIPv6 != nil {
			m.HTTPProtocolIPv6 = o.HTTPProtocolIPv6
		}
		if o.HTTPPutResponseHopLimit != nil {
			m.HTTPPutResponseHopLimit = o.HTTPPutResponseHopLimit
		}
		if o.HTTPTokens != nil {
			m.HTTPTokens = o.HTTPTokens
		}
	}
	return m
}

// userDataOptions maps an EC2NodeClass and a launch's labels/taints to user data options.
// Kubelet clusterDNS defaults to the cluster DNS address of the service CIDR
// (Karpenter defaults it to the discovered kube-dns address).
func userDataOptions(nc *apis.EC2NodeClass, cluster ClusterInfo, labels map[string]string, taints []corev1.Taint) (userdata.Options, error) {
	o := userdata.Options{
		Family:          userdata.Family(nc.AMIFamily()),
		ClusterName:     cluster.Name,
		ClusterEndpoint: cluster.Endpoint,
		CABundle:        cluster.CABundle,
		ServiceCIDR:     cluster.ServiceCIDR,
		Labels:          labels,
		Taints:          taints,
	}
	if o.Family == userdata.Family(apis.AMIFamilyWindows2019) || o.Family == userdata.Family(apis.AMIFamilyWindows2025) {
		o.Family = userdata.Windows2022 // same bootstrap script
	}
	if nc.Spec.UserData != nil {
		o.Custom = *nc.Spec.UserData
	}
	if nc.Spec.InstanceStorePolicy != nil {
		o.InstanceStorePolicy = string(*nc.Spec.InstanceStorePolicy)
	}
	if k := nc.Spec.Kubelet; k != nil {
		o.Kubelet = userdata.Kubelet{
			ClusterDNS: k.ClusterDNS, MaxPods: k.MaxPods, PodsPerCore: k.PodsPerCore,
			SystemReserved: k.SystemReserved, KubeReserved: k.KubeReserved,
			EvictionHard: k.EvictionHard, EvictionSoft: k.EvictionSoft,
			EvictionMaxPodGracePeriod:   k.EvictionMaxPodGracePeriod,
			ImageGCHighThresholdPercent: k.ImageGCHighThresholdPercent,
			ImageGCLowThresholdPercent:  k.ImageGCLowThresholdPercent,
			CPUCFSQuota:                 k.CPUCFSQuota,
		}
		if len(k.EvictionSoftGracePeriod) > 0 {
			o.Kubelet.EvictionSoftGracePeriod = map[string]time.Duration{}
			for key, d := range k.EvictionSoftGracePeriod {
				o.Kubelet.EvictionSoftGracePeriod[key] = d.Duration
			}
		}
	}
	if len(o.Kubelet.ClusterDNS) == 0 && o.Family != userdata.Custom {
		dns, err := cluster.DNSIP()
		if err != nil {
			return userdata.Options{}, err
		}
		o.Kubelet.ClusterDNS = []string{dns}
	}
	return o, nil
}

// instanceProfile is the profile the EC2NodeClass's nodes run with.
func (p *Provider) instanceProfile(nc *apis.EC2NodeClass) (string, error) {
	if nc.Spec.InstanceProfile != nil && *nc.Spec.InstanceProfile != "" {
		return *nc.Spec.InstanceProfile, nil
	}
	if nc.Spec.Role != "" {
		return p.opts.InstanceProfileName(p.opts.ClusterName, nc.Spec.Role), nil
	}
	return "", fmt.Errorf("EC2NodeClass %s: %w: neither spec.role nor spec.instanceProfile is set", nc.Name, ErrNodeClassNotReady)
}

// ensureLaunchTemplate returns the name of the launch template for spec,
// creating it when it does not exist yet.
func (p *Provider) ensureLaunchTemplate(ctx context.Context, spec templateSpec) (string, error) {
	name := spec.Name()
	_, err := p.templates.get(ctx, name, func(ctx context.Context) (string, error) {
		if id, err := p.findLaunchTemplate(ctx, name); err != nil || id != "" {
			return id, err
		}
		id, err := p.createLaunchTemplate(ctx, name, spec)
		if apiErrorCode(err) == "InvalidLaunchTemplateName.AlreadyExistsException" {
			// Another function created it between our describe and create.
			return p.findLaunchTemplate(ctx, name)
		}
		return id, err
	})
	if err != nil {
		return "", fmt.Errorf("launch template %s: %w", name, err)
	}
	return name, nil
}

func (p *Provider) findLaunchTemplate(ctx context.Context, name string) (string, error) {
	out, err := p.clients.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	if err != nil {
		if isNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("describe: %w", err)
	}
	for _, lt := range out.LaunchTemplates {
		if sdkaws.ToString(lt.LaunchTemplateName) == name {
			return sdkaws.ToString(lt.LaunchTemplateId), nil
		}
	}
	return "", nil
}

func (p *Provider) createLaunchTemplate(ctx context.Context, name string, spec templateSpec) (string, error) {
	// What EC2 would refuse is not sent (limits.go).
	if err := checkUserDataSize(spec.NodeClass, spec.UserData); err != nil {
		return "", err
	}
	if err := checkTags(spec.NodeClass, "the launch template", spec.tags()); err != nil {
		return "", err
	}
	if err := checkTags(spec.NodeClass, "each network interface", spec.ResourceTags); err != nil {
		return "", err
	}
	out, err := p.clients.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: sdkaws.String(name),
		LaunchTemplateData: launchTemplateData(spec),
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags:         ec2Tags(spec.tags()),
		}},
	})
	if err != nil {
		return "", err
	}
	p.log.InfoContext(ctx, "created launch template", "launch-template", name, "image", spec.ImageID, "nodeclass", spec.NodeClass)
	return sdkaws.ToString(out.LaunchTemplate.LaunchTemplateId), nil
}

// launchTemplateData is what a template holds, in Karpenter-AWS's shape
// (pkg/providers/launchtemplate/types.go): everything EC2 or an account's
// defaults could otherwise decide is explicit.
func launchTemplateData(spec templateSpec) *ec2types.RequestLaunchTemplateData {
	m := spec.MetadataOptions
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:             sdkaws.String(spec.ImageID),
		UserData:            sdkaws.String(spec.UserData),
		IamInstanceProfile:  &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: sdkaws.String(spec.InstanceProfile)},
		BlockDeviceMappings: spec.BlockDeviceMappings,
		Monitoring:          &ec2types.LaunchTemplatesMonitoringRequest{Enabled: sdkaws.Bool(spec.DetailedMonitoring)},
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(sdkaws.ToString(m.HTTPEndpoint)),
			HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(sdkaws.ToString(m.HTTPProtocolIPv6)),
			HttpPutResponseHopLimit: sdkaws.Int32(int32(sdkaws.ToInt64(m.HTTPPutResponseHopLimit))),
			HttpTokens:              ec2types.LaunchTemplateHttpTokensState(sdkaws.ToString(m.HTTPTokens)),
			// An account's IMDS defaults can switch instance tags on, and
			// tag keys such as kubernetes.io/cluster/<name> are not valid
			// metadata keys: the instance would fail to launch.
			InstanceMetadataTags: ec2types.LaunchTemplateInstanceMetadataTagsStateDisabled,
		},
		// The security groups always sit on the interfaces.
		NetworkInterfaces: networkInterfaceRequests(spec),
		TagSpecifications: launchResourceTags(spec),
		Placement:         &ec2types.LaunchTemplatePlacementRequest{Tenancy: ec2types.TenancyDefault},
		// No nodewright claim asks for an enclave; say so rather than
		// leave it to the account.
		EnclaveOptions: &ec2types.LaunchTemplateEnclaveOptionsRequest{Enabled: sdkaws.Bool(false)},
	}
	if spec.NestedVirtualization != "" {
		data.CpuOptions = &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecification(spec.NestedVirtualization)}
	}
	if spec.PlacementGroupID != "" {
		data.Placement.GroupId = sdkaws.String(spec.PlacementGroupID)
		if spec.PlacementPartition > 0 {
			data.Placement.PartitionNumber = sdkaws.Int32(spec.PlacementPartition)
		}
	}
	if spec.CapacityReservationPreference != "" || spec.CapacityReservation != "" {
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreference(spec.CapacityReservationPreference),
		}
		if spec.CapacityReservation != "" {
			data.CapacityReservationSpecification.CapacityReservationTarget = &ec2types.CapacityReservationTarget{CapacityReservationId: sdkaws.String(spec.CapacityReservation)}
		}
	}
	if spec.MarketType != "" {
		data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketType(spec.MarketType)}
	}
	return data
}

// launchResourceTags tags the network interfaces of every launch from the
// template and, in a spot template, its spot instance requests (the launch
// template data's TagSpecifications take both: LaunchTemplateTagSpecificationRequest).
func launchResourceTags(spec templateSpec) []ec2types.LaunchTemplateTagSpecificationRequest {
	if len(spec.ResourceTags) == 0 {
		return nil
	}
	tags := ec2Tags(spec.ResourceTags)
	out := []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: tags}}
	if spec.SpotRequestTags {
		out = append(out, ec2types.LaunchTemplateTagSpecificationRequest{ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: tags})
	}
	return out
}

// networkInterfaceRequests lays out the instance's interfaces as Karpenter
// does: the class's interfaces, or else the primary one, each with the
// security groups (the fleet's override names the subnet).
func networkInterfaceRequests(spec templateSpec) []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	var tracking *ec2types.ConnectionTrackingSpecificationRequest
	if ct := spec.ConnectionTracking; ct != nil {
		tracking = &ec2types.ConnectionTrackingSpecificationRequest{
			TcpEstablishedTimeout: ct.TCPEstablishedTimeout,
			UdpStreamTimeout:      ct.UDPStreamTimeout,
			UdpTimeout:            ct.UDPTimeout,
		}
	}
	if len(spec.NetworkInterfaces) == 0 {
		primary := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			DeviceIndex:                     sdkaws.Int32(0),
			AssociatePublicIpAddress:        spec.AssociatePublicIP,
			Groups:                          spec.SecurityGroupIDs,
			ConnectionTrackingSpecification: tracking,
		}
		addresses(&primary, spec)
		return []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{primary}
	}
	out := make([]ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, 0, len(spec.NetworkInterfaces))
	for _, ni := range spec.NetworkInterfaces {
		r := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			NetworkCardIndex: ni.NetworkCardIndex,
			DeviceIndex:      ni.DeviceIndex,
			InterfaceType:    sdkaws.String(ni.InterfaceType),
			Groups:           spec.SecurityGroupIDs,
		}
		if ni.InterfaceType != apis.InterfaceTypeEFAOnly {
			// EC2 rejects prefixes, addresses, public IPs and tracking on
			// EFA-only interfaces.
			addresses(&r, spec)
			r.AssociatePublicIpAddress = spec.AssociatePublicIP
			r.ConnectionTrackingSpecification = tracking
		}
		out = append(out, r)
	}
	return out
}

// addresses gives an interface the class's prefixes (IPv4 or, in an IPv6
// cluster, IPv6 ones) and, in an IPv6 cluster, an IPv6 address that is the
// interface's primary: the VPC CNI gives pods addresses of the cluster's
// family, and the interface a template names does not take one from the
// subnet's settings (Karpenter's generateNetworkInterfaces).
func addresses(r *ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest, spec templateSpec) {
	if !spec.IPv6 {
		r.Ipv4PrefixCount = spec.IPPrefixCount
		return
	}
	r.Ipv6PrefixCount = spec.IPPrefixCount
	r.PrimaryIpv6 = sdkaws.Bool(true)
	r.Ipv6AddressCount = sdkaws.Int32(1)
}

func ec2Tags(m map[string]string) []ec2types.Tag {
	keys := slices.Sorted(maps.Keys(m))
	tags := make([]ec2types.Tag, len(keys))
	for i, k := range keys {
		tags[i] = ec2types.Tag{Key: sdkaws.String(k), Value: sdkaws.String(m[k])}
	}
	return tags
}

// LaunchTemplate is a launch template this cluster owns.
type LaunchTemplate struct {
	Name      string
	ID        string
	NodeClass string
	Created   time.Time
}

// LaunchTemplates lists the launch templates this stack owns (TagOwner):
// another stack of the same cluster keeps its own, which this one's
// garbage collection must never see as unused.
func (p *Provider) LaunchTemplates(ctx context.Context) ([]LaunchTemplate, error) {
	var out []LaunchTemplate
	pager := ec2.NewDescribeLaunchTemplatesPaginator(p.clients.EC2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{
			{Name: sdkaws.String("tag:" + TagClusterName), Values: []string{p.opts.ClusterName}},
			{Name: sdkaws.String("tag:" + TagManagedBy), Values: []string{ManagedBy}},
			{Name: sdkaws.String("tag:" + TagOwner), Values: []string{p.opts.Owner}},
		},
	})
	prefix := "nodewright/" + p.opts.ClusterName + "/"
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list launch templates of cluster %s: %w", p.opts.ClusterName, err)
		}
		for _, lt := range page.LaunchTemplates {
			tags := tagMap(lt.Tags)
			name := sdkaws.ToString(lt.LaunchTemplateName)
			// The tags and our name prefix: never touch a template we did not
			// make (Karpenter's carry the same cluster tag).
			if tags[TagClusterName] != p.opts.ClusterName || tags[TagManagedBy] != ManagedBy || tags[TagOwner] != p.opts.Owner || !strings.HasPrefix(name, prefix) {
				continue
			}
			out = append(out, LaunchTemplate{
				Name: name, ID: sdkaws.ToString(lt.LaunchTemplateId), NodeClass: tags[TagNodeClass],
				Created: sdkaws.ToTime(lt.CreateTime),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteUnusedLaunchTemplates deletes this cluster's launch templates that
// inUse does not claim and that are older than minAge (so a template created
// for a launch in flight is never removed under it). inUse typically holds
// the LaunchTemplate of every live NodeClaim. Returns the deleted names.
func (p *Provider) DeleteUnusedLaunchTemplates(ctx context.Context, inUse func(name string) bool, minAge time.Duration) ([]string, error) {
	lts, err := p.LaunchTemplates(ctx)
	if err != nil {
		return nil, err
	}
	now := p.opts.Now()
	var deleted []string
	for _, lt := range lts {
		if inUse(lt.Name) || now.Sub(lt.Created) < minAge {
			continue
		}
		_, err := p.clients.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: sdkaws.String(lt.Name)})
		p.templates.invalidate(lt.Name)
		if err != nil && !isNotFound(err) {
			return deleted, fmt.Errorf("delete launch template %s: %w", lt.Name, err)
		}
		p.log.InfoContext(ctx, "deleted unused launch template", "launch-template", lt.Name)
		deleted = append(deleted, lt.Name)
	}
	return deleted, nil
}

func base64UserData(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
