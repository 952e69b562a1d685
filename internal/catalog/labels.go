package catalog

import (
	"maps"
	"regexp"
	"strconv"
	"strings"
)

// Well-known label keys. internal/apis may re-export these; the catalog owns
// them because it is the package that computes their values.
const (
	LabelInstanceType   = "node.kubernetes.io/instance-type"
	LabelArch           = "kubernetes.io/arch"
	LabelOS             = "kubernetes.io/os"
	LabelHostname       = "kubernetes.io/hostname"
	LabelTopologyZone   = "topology.kubernetes.io/zone"
	LabelTopologyRegion = "topology.kubernetes.io/region"
	LabelTopologyZoneID = "topology.k8s.aws/zone-id"

	LabelCapacityType = "karpenter.sh/capacity-type"
	LabelNodePool     = "karpenter.sh/nodepool"

	LabelInstanceCategory                = "karpenter.k8s.aws/instance-category"
	LabelInstanceFamily                  = "karpenter.k8s.aws/instance-family"
	LabelInstanceGeneration              = "karpenter.k8s.aws/instance-generation"
	LabelInstanceSize                    = "karpenter.k8s.aws/instance-size"
	LabelInstanceCPU                     = "karpenter.k8s.aws/instance-cpu"
	LabelInstanceCPUManufacturer         = "karpenter.k8s.aws/instance-cpu-manufacturer"
	LabelInstanceCPUSustainedClockMhz    = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory                  = "karpenter.k8s.aws/instance-memory"
	LabelInstanceEBSBandwidth            = "karpenter.k8s.aws/instance-ebs-bandwidth"
	LabelInstanceNetworkBandwidth        = "karpenter.k8s.aws/instance-network-bandwidth"
	LabelInstanceGPUName                 = "karpenter.k8s.aws/instance-gpu-name"
	LabelInstanceGPUManufacturer         = "karpenter.k8s.aws/instance-gpu-manufacturer"
	LabelInstanceGPUCount                = "karpenter.k8s.aws/instance-gpu-count"
	LabelInstanceGPUMemory               = "karpenter.k8s.aws/instance-gpu-memory"
	LabelInstanceAcceleratorName         = "karpenter.k8s.aws/instance-accelerator-name"
	LabelInstanceAcceleratorManufacturer = "karpenter.k8s.aws/instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount        = "karpenter.k8s.aws/instance-accelerator-count"
	LabelInstanceHypervisor              = "karpenter.k8s.aws/instance-hypervisor"
	LabelInstanceEncryptionInTransit     = "karpenter.k8s.aws/instance-encryption-in-transit-supported"
	LabelInstanceLocalNVMe               = "karpenter.k8s.aws/instance-local-nvme"
)

// WellKnownLabels are the keys a pod may select on without a NodePool defining
// them: every node Karpenter launches carries (or knowingly lacks) them. They
// are the type-level keys plus those that vary by offering or NodePool.
var WellKnownLabels = withKeys(TypeLevelLabels,
	LabelTopologyZone, LabelTopologyZoneID, LabelCapacityType, LabelNodePool)

// TypeLevelLabels are the well-known keys whose value depends only on the
// instance type (not on zone, capacity type or NodePool). A requirement on one
// of these can be decided once per type.
var TypeLevelLabels = map[string]bool{
	LabelInstanceType: true, LabelArch: true, LabelOS: true, LabelTopologyRegion: true,
	LabelInstanceCategory: true, LabelInstanceFamily: true, LabelInstanceGeneration: true,
	LabelInstanceSize: true, LabelInstanceCPU: true, LabelInstanceCPUManufacturer: true,
	LabelInstanceCPUSustainedClockMhz: true,
	LabelInstanceMemory:               true, LabelInstanceEBSBandwidth: true, LabelInstanceNetworkBandwidth: true,
	LabelInstanceGPUName: true, LabelInstanceGPUManufacturer: true, LabelInstanceGPUCount: true,
	LabelInstanceGPUMemory: true, LabelInstanceAcceleratorName: true,
	LabelInstanceAcceleratorManufacturer: true, LabelInstanceAcceleratorCount: true,
	LabelInstanceHypervisor: true, LabelInstanceEncryptionInTransit: true, LabelInstanceLocalNVMe: true,
	LabelInstanceTenancy: true, LabelInstanceCapabilityFlex: true, // labels_tenancy.go
}

// withKeys is a copy of set with keys added.
func withKeys(set map[string]bool, keys ...string) map[string]bool {
	out := make(map[string]bool, len(set)+len(keys))
	maps.Copy(out, set)
	for _, k := range keys {
		out[k] = true
	}
	return out
}

// Karpenter's naming scheme: category letters, optional "-Ntb" (u-6tb1), generation digits.
var instanceTypeScheme = regexp.MustCompile(`^([a-z]+)(-[0-9]+tb)?([0-9]+).*\.`)

// splitName fills Category, Generation, Family and Size from the type name.
func splitName(it *InstanceType) {
	if m := instanceTypeScheme.FindStringSubmatch(it.Name); len(m) == 4 {
		it.Category = m[1]
		it.Generation, _ = strconv.Atoi(m[3])
	}
	if fam, size, ok := strings.Cut(it.Name, "."); ok && !strings.Contains(size, ".") {
		it.Family, it.Size = fam, size
	}
}

// lowerKebab turns "Radeon Pro V520" into "radeon-pro-v520", as Karpenter labels names.
func lowerKebab(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, " ", "-"))
}

// TypeLabels computes the type-level labels of it: the values Karpenter
// gives these keys, absent where Karpenter leaves the label off.
func TypeLabels(it *InstanceType, region string) map[string]string {
	l := map[string]string{
		LabelInstanceType:                it.Name,
		LabelArch:                        it.Architecture,
		LabelOS:                          "linux",
		LabelInstanceCPU:                 strconv.FormatInt(it.VCPU, 10),
		LabelInstanceMemory:              strconv.FormatInt(it.MemoryMiB, 10),
		LabelInstanceEncryptionInTransit: strconv.FormatBool(it.EncryptionInTransit),
	}
	// Karpenter labels bare metal with an empty hypervisor value, so an
	// Exists requirement matches every type; keep that.
	l[LabelInstanceHypervisor] = it.Hypervisor
	if region != "" {
		l[LabelTopologyRegion] = region
	}
	if it.Category != "" {
		l[LabelInstanceCategory] = it.Category
		l[LabelInstanceGeneration] = strconv.Itoa(it.Generation)
	}
	if it.Family != "" {
		l[LabelInstanceFamily] = it.Family
		l[LabelInstanceSize] = it.Size
	}
	if it.LocalNVMeGiB > 0 {
		l[LabelInstanceLocalNVMe] = strconv.FormatInt(it.LocalNVMeGiB, 10)
	}
	if it.NetworkBandwidthMbps > 0 {
		l[LabelInstanceNetworkBandwidth] = strconv.FormatInt(it.NetworkBandwidthMbps, 10)
	}
	if it.EBSBandwidthMbps > 0 {
		l[LabelInstanceEBSBandwidth] = strconv.FormatInt(it.EBSBandwidthMbps, 10)
	}
	// Karpenter labels GPUs only when the type has exactly one GPU model.
	if len(it.GPUs) == 1 {
		g := it.GPUs[0]
		l[LabelInstanceGPUName] = lowerKebab(g.Name)
		l[LabelInstanceGPUManufacturer] = lowerKebab(g.Manufacturer)
		l[LabelInstanceGPUCount] = strconv.FormatInt(g.Count, 10)
		l[LabelInstanceGPUMemory] = strconv.FormatInt(g.MemoryMiB, 10)
	}
	if it.NeuronDevices > 0 && it.NeuronName != "" {
		l[LabelInstanceAcceleratorName] = lowerKebab(it.NeuronName)
		l[LabelInstanceAcceleratorManufacturer] = "aws"
		l[LabelInstanceAcceleratorCount] = strconv.FormatInt(it.NeuronDevices, 10)
	}
	if it.NeuronDevices == 0 && it.InferenceAcceleratorName != "" {
		l[LabelInstanceAcceleratorName] = lowerKebab(it.InferenceAcceleratorName)
		l[LabelInstanceAcceleratorManufacturer] = lowerKebab(it.InferenceAcceleratorManufacturer)
		l[LabelInstanceAcceleratorCount] = strconv.FormatInt(it.InferenceAccelerators, 10)
	}
	if it.CPUManufacturer != "" {
		l[LabelInstanceCPUManufacturer] = lowerKebab(it.CPUManufacturer)
	}
	if it.CPUClockMHz > 0 {
		l[LabelInstanceCPUSustainedClockMhz] = strconv.FormatInt(it.CPUClockMHz, 10)
	}
	addLaunchLabels(l, it)
	return l
}
