package apis

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass is karpenter.k8s.aws/v1 EC2NodeClass: the AWS side of a node.
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              EC2NodeClassSpec `json:"spec"`
}

// EC2NodeClassSpec is the desired state of an EC2NodeClass.
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms select the subnets nodes launch into (terms are ORed).
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms"`
	// SecurityGroupSelectorTerms select the security groups (terms are ORed).
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	// AssociatePublicIPAddress overrides the subnet's public IP setting.
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`
	// AMISelectorTerms select the AMIs; an alias term must be the only term.
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms,omitempty"`
	// AMIFamily picks user data and defaults; required unless an alias is
	// used (then it is implied by the alias). Deprecated in favour of alias.
	AMIFamily *string `json:"amiFamily,omitempty"`
	// UserData is merged with (or, for Custom/Bottlerocket, is) the bootstrap.
	UserData *string `json:"userData,omitempty"`
	// Role is the IAM role for a generated instance profile; exactly one of
	// Role and InstanceProfile is set.
	Role string `json:"role,omitempty"`
	// InstanceProfile is an existing instance profile name.
	InstanceProfile *string `json:"instanceProfile,omitempty"`
	// Tags are applied to instances, volumes and launch templates.
	Tags map[string]string `json:"tags,omitempty"`
	// Kubelet configures the kubelet of the launched nodes.
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`
	// BlockDeviceMappings configure EBS volumes; at most one is the root volume.
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	// InstanceStorePolicy RAID0 combines instance store NVMe disks.
	InstanceStorePolicy *InstanceStorePolicy `json:"instanceStorePolicy,omitempty"`
	// DetailedMonitoring enables 1-minute CloudWatch metrics.
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`
	// MetadataOptions configure IMDS.
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`
	// Context is the reserved/ODCR context passed to CreateFleet.
	Context *string `json:"context,omitempty"`
	// CapacityReservationSelectorTerms select the on-demand capacity
	// reservations (ODCRs) nodes may launch into (terms are ORed).
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	// PlacementGroupSelector names the placement group nodes launch into.
	PlacementGroupSelector *PlacementGroupSelector `json:"placementGroupSelector,omitempty"`
	// IPPrefixCount is the number of IPv4 /28 prefixes assigned to the
	// primary network interface (prefix delegation).
	IPPrefixCount *int32 `json:"ipPrefixCount,omitempty"`
	// NetworkInterfaces lay out the instance's interfaces (e.g. EFA-only
	// interfaces on extra network cards); empty means one primary interface.
	NetworkInterfaces []*NetworkInterface `json:"networkInterfaces,omitempty"`
	// ConnectionTracking sets idle connection tracking timeouts on the
	// interfaces of the launch template (EFA-only interfaces excluded).
	ConnectionTracking *ConnectionTracking `json:"connectionTracking,omitempty"`
	// CPUOptions configure the instance's CPU features.
	CPUOptions *CPUOptions `json:"cpuOptions,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags (values may use "*") or by id.
type SubnetSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, id or name.
type SecurityGroupSelectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	ID   string            `json:"id,omitempty"`
	Name string            `json:"name,omitempty"`
}

// AMISelectorTerm selects AMIs by alias ("al2023@latest"), id, name, owner,
// tags, or the SSM parameter (name or ARN) that holds an AMI id.
type AMISelectorTerm struct {
	Alias        string            `json:"alias,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
	ID           string            `json:"id,omitempty"`
	Name         string            `json:"name,omitempty"`
	Owner        string            `json:"owner,omitempty"`
	SSMParameter string            `json:"ssmParameter,omitempty"`
}

// AMI families of karpenter.k8s.aws (Ubuntu exists only in v1beta1).
const (
	AMIFamilyAL2          = "AL2"
	AMIFamilyAL2023       = "AL2023"
	AMIFamilyBottlerocket = "Bottlerocket"
	AMIFamilyWindows2019  = "Windows2019"
	AMIFamilyWindows2022  = "Windows2022"
	AMIFamilyWindows2025  = "Windows2025"
	AMIFamilyCustom       = "Custom"
	amiFamilyUbuntuBeta   = "Ubuntu"
)

// KubeletConfiguration is spec.kubelet of an EC2NodeClass (in v1beta1 it
// lived on the NodePool's template.spec.kubelet).
type KubeletConfiguration struct {
	ClusterDNS                  []string                   `json:"clusterDNS,omitempty"`
	MaxPods                     *int32                     `json:"maxPods,omitempty"`
	PodsPerCore                 *int32                     `json:"podsPerCore,omitempty"`
	SystemReserved              map[string]string          `json:"systemReserved,omitempty"`
	KubeReserved                map[string]string          `json:"kubeReserved,omitempty"`
	EvictionHard                map[string]string          `json:"evictionHard,omitempty"`
	EvictionSoft                map[string]string          `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod     map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMaxPodGracePeriod   *int32                     `json:"evictionMaxPodGracePeriod,omitempty"`
	ImageGCHighThresholdPercent *int32                     `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent  *int32                     `json:"imageGCLowThresholdPercent,omitempty"`
	CPUCFSQuota                 *bool                      `json:"cpuCFSQuota,omitempty"`
}

// MetadataOptions configure the instance metadata service.
type MetadataOptions struct {
	HTTPEndpoint            *string `json:"httpEndpoint,omitempty"`
	HTTPProtocolIPv6        *string `json:"httpProtocolIPv6,omitempty"`
	HTTPPutResponseHopLimit *int64  `json:"httpPutResponseHopLimit,omitempty"`
	HTTPTokens              *string `json:"httpTokens,omitempty"`
}

// BlockDeviceMapping is one EBS mapping of the launch template.
type BlockDeviceMapping struct {
	DeviceName *string      `json:"deviceName,omitempty"`
	EBS        *BlockDevice `json:"ebs,omitempty"`
	RootVolume bool         `json:"rootVolume,omitempty"`
}

// BlockDevice is the EBS volume of a mapping.
type BlockDevice struct {
	DeleteOnTermination *bool   `json:"deleteOnTermination,omitempty"`
	Encrypted           *bool   `json:"encrypted,omitempty"`
	IOPS                *int64  `json:"iops,omitempty"`
	KMSKeyID            *string `json:"kmsKeyID,omitempty"`
	SnapshotID          *string `json:"snapshotID,omitempty"`
	Throughput          *int64  `json:"throughput,omitempty"`
	// VolumeInitializationRate (MiB/s, 100..300) is the rate at which a
	// volume created from a snapshot is initialized.
	VolumeInitializationRate *int32             `json:"volumeInitializationRate,omitempty"`
	VolumeSize               *resource.Quantity `json:"volumeSize,omitempty"`
	VolumeType               *string            `json:"volumeType,omitempty"`
}

// InstanceStorePolicy says how instance store volumes are used.
type InstanceStorePolicy string

// InstanceStorePolicyRAID0 stripes all instance store NVMe disks into one volume.
const InstanceStorePolicyRAID0 InstanceStorePolicy = "RAID0"

// AMIFamily returns the effective AMI family: spec.amiFamily when set (with
// an alias it may only be the alias' family or Custom), else the alias'
// family ("" when neither is set).
func (nc *EC2NodeClass) AMIFamily() string {
	if nc.Spec.AMIFamily != nil {
		return *nc.Spec.AMIFamily
	}
	if alias := nc.AMIAlias(); alias != "" {
		fam, _, _ := strings.Cut(alias, "@")
		return aliasFamilies[fam]
	}
	return ""
}

// AMIAlias returns the alias term's value, or "" when AMIs are selected otherwise.
func (nc *EC2NodeClass) AMIAlias() string {
	for _, t := range nc.Spec.AMISelectorTerms {
		if t.Alias != "" {
			return t.Alias
		}
	}
	return ""
}

// aliasFamilies maps alias family names to AMI families.
var aliasFamilies = map[string]string{
	"al2":          AMIFamilyAL2,
	"al2023":       AMIFamilyAL2023,
	"bottlerocket": AMIFamilyBottlerocket,
	"windows2019":  AMIFamilyWindows2019,
	"windows2022":  AMIFamilyWindows2022,
	"windows2025":  AMIFamilyWindows2025,
}

// DeepCopy returns an independent copy.
func (k *KubeletConfiguration) DeepCopy() *KubeletConfiguration {
	if k == nil {
		return nil
	}
	out := *k
	out.ClusterDNS = slices.Clone(k.ClusterDNS)
	out.MaxPods = clonePtr(k.MaxPods)
	out.PodsPerCore = clonePtr(k.PodsPerCore)
	out.SystemReserved = maps.Clone(k.SystemReserved)
	out.KubeReserved = maps.Clone(k.KubeReserved)
	out.EvictionHard = maps.Clone(k.EvictionHard)
	out.EvictionSoft = maps.Clone(k.EvictionSoft)
	out.EvictionSoftGracePeriod = maps.Clone(k.EvictionSoftGracePeriod)
	out.EvictionMaxPodGracePeriod = clonePtr(k.EvictionMaxPodGracePeriod)
	out.ImageGCHighThresholdPercent = clonePtr(k.ImageGCHighThresholdPercent)
	out.ImageGCLowThresholdPercent = clonePtr(k.ImageGCLowThresholdPercent)
	out.CPUCFSQuota = clonePtr(k.CPUCFSQuota)
	return &out
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
