package catalog

import (
	"maps"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

// ClaimTypeOptions are the instance types a claim may launch as: the values
// of its instance-type In requirement, in requirement order (nil when it
// has none).
func ClaimTypeOptions(nc *apis.NodeClaim) []string {
	for _, r := range nc.Spec.Requirements {
		if r.Key == LabelInstanceType && r.Operator == corev1.NodeSelectorOpIn {
			return r.Values
		}
	}
	return nil
}

// LabelWindowsBuild is the Windows Server build of a Windows node; Linux
// nodes lack it.
const LabelWindowsBuild = "node.kubernetes.io/windows-build"

// windowsBuilds are the builds Karpenter labels each Windows AMI family's
// nodes with (Karpenter-AWS pkg/apis/v1/labels.go Windows2019Build..., set
// per family by amifamily.GetAMIFamily).
var windowsBuilds = map[string]string{
	apis.AMIFamilyWindows2019: "10.0.17763",
	apis.AMIFamilyWindows2022: "10.0.20348",
	apis.AMIFamilyWindows2025: "10.0.26100",
}

// WindowsBuild is the Windows Server build of the class's nodes, and false
// when its AMI family is not a Windows one (a nil class, Custom and the
// Linux families: Karpenter takes Custom for Linux whatever its AMIs).
func WindowsBuild(nc *apis.EC2NodeClass) (string, bool) {
	if nc == nil {
		return "", false
	}
	build, ok := windowsBuilds[nc.AMIFamily()]
	return build, ok
}

// LabelsForNodeClass are the type-level labels of it as a node of the class
// carries them. The os comes from the class's AMI family, not the type:
// windows with the family's windows-build for the Windows families, linux
// and no build for the others, as Karpenter-AWS's instancetype
// computeRequirements sets them (getOS, and the Windows Build label). The
// type's own Labels are never changed (the catalog is shared).
func (it *InstanceType) LabelsForNodeClass(nc *apis.EC2NodeClass) map[string]string {
	_, windows := WindowsBuild(nc)
	_, hasBuild := it.Labels[LabelWindowsBuild]
	if !windows && it.Labels[LabelOS] == "linux" && !hasBuild {
		return it.Labels
	}
	l := maps.Clone(it.Labels)
	if l == nil {
		l = map[string]string{}
	}
	setNodeClassOS(l, nc)
	return l
}

// NodeLabelsForNodeClass are NodeLabels(o) as a node of the class carries
// them (the class's os, LabelsForNodeClass): what a launched claim records.
func (it *InstanceType) NodeLabelsForNodeClass(o Offering, nc *apis.EC2NodeClass) map[string]string {
	l := it.NodeLabels(o)
	setNodeClassOS(l, nc)
	return l
}

// setNodeClassOS sets the os and windows-build labels of the class's AMI
// family in l.
func setNodeClassOS(l map[string]string, nc *apis.EC2NodeClass) {
	build, windows := WindowsBuild(nc)
	if !windows {
		l[LabelOS] = "linux"
		delete(l, LabelWindowsBuild)
		return
	}
	l[LabelOS] = "windows"
	l[LabelWindowsBuild] = build
}

// ephemeralDevice is the device backing ephemeral storage per AMI family
// (the root volume everywhere except Bottlerocket's data volume).
var ephemeralDevice = map[string]string{
	apis.AMIFamilyAL2:          "/dev/xvda",
	apis.AMIFamilyAL2023:       "/dev/xvda",
	apis.AMIFamilyBottlerocket: "/dev/xvdb",
	apis.AMIFamilyWindows2019:  "/dev/sda1",
	apis.AMIFamilyWindows2022:  "/dev/sda1",
	apis.AMIFamilyWindows2025:  "/dev/sda1",
}

// OptionsForNodeClass derives the allocatable options an EC2NodeClass
// implies: AMI family, kubelet overrides, ephemeral volume size and instance
// store policy. The controller-level settings (VMMemoryOverheadPercent,
// ReservedENIs) are the catalog's: planners use Catalog.OptionsFor, which
// adds them. A nil node class gives the defaults.
func OptionsForNodeClass(nc *apis.EC2NodeClass) AllocatableOptions {
	var o AllocatableOptions
	if nc == nil {
		return o
	}
	o.AMIFamily = nc.AMIFamily()
	for _, ni := range nc.Spec.NetworkInterfaces {
		// An EFA-only interface on the default card takes an ENI the VPC CNI
		// could have used for pods.
		if ni != nil && ni.InterfaceType == apis.InterfaceTypeEFAOnly && ni.NetworkCardIndex != nil && *ni.NetworkCardIndex == 0 {
			o.EFAOnlyENIs++
		}
	}
	if k := nc.Spec.Kubelet; k != nil {
		o.Kubelet = KubeletOptions{
			MaxPods:        k.MaxPods,
			PodsPerCore:    k.PodsPerCore,
			SystemReserved: k.SystemReserved,
			KubeReserved:   k.KubeReserved,
			EvictionHard:   k.EvictionHard,
		}
	}
	if p := nc.Spec.InstanceStorePolicy; p != nil && *p == apis.InstanceStorePolicyRAID0 {
		o.InstanceStoreRAID0 = true
	}
	bdms := nc.Spec.BlockDeviceMappings
	for _, b := range bdms {
		if b != nil && b.RootVolume && b.EBS != nil && b.EBS.VolumeSize != nil {
			q := b.EBS.VolumeSize.DeepCopy()
			o.RootVolumeSize = &q
			return o
		}
	}
	if len(bdms) == 0 {
		return o
	}
	if o.AMIFamily == apis.AMIFamilyCustom {
		// Nothing says which volume a custom AMI uses; Karpenter takes the last.
		if b := bdms[len(bdms)-1]; b != nil && b.EBS != nil && b.EBS.VolumeSize != nil {
			q := b.EBS.VolumeSize.DeepCopy()
			o.RootVolumeSize = &q
		}
		return o
	}
	family := o.AMIFamily
	if family == "" {
		family = apis.AMIFamilyAL2023
	}
	for _, b := range bdms {
		if b != nil && b.DeviceName != nil && *b.DeviceName == ephemeralDevice[family] && b.EBS != nil && b.EBS.VolumeSize != nil {
			q := b.EBS.VolumeSize.DeepCopy()
			o.RootVolumeSize = &q
		}
	}
	return o
}

// SupportsNodeClass reports whether nodes of the node class can run as it:
// a Windows family needs an amd64 type, nested virtualization a type that
// offers it, connection tracking a Nitro type, and the network
// interfaces must fit the type's network cards and EFA interfaces, as
// Karpenter's instance type compatibility checks require. A nil class fits.
func (it *InstanceType) SupportsNodeClass(nc *apis.EC2NodeClass) bool {
	if nc == nil {
		return true
	}
	if _, windows := WindowsBuild(nc); windows && it.Architecture != "amd64" {
		// Karpenter-AWS getOS gives a non-amd64 type no os on a Windows
		// family, and the EKS-optimized Windows AMIs are x86_64 only, so
		// its AMI-to-type mapping never launches one.
		return false
	}
	if nc.NestedVirtualization() && !it.NestedVirtualization {
		return false
	}
	if nc.Spec.ConnectionTracking != nil && it.Hypervisor != "nitro" {
		return false // connection tracking timeouts need the Nitro System
	}
	var efaOnly int64
	for _, ni := range nc.Spec.NetworkInterfaces {
		if ni == nil {
			continue
		}
		if ni.NetworkCardIndex != nil && int64(*ni.NetworkCardIndex) >= max(it.NetworkCards, 1) {
			return false
		}
		if ni.NetworkCardIndex != nil && *ni.NetworkCardIndex == 0 && ni.DeviceIndex != nil && int64(*ni.DeviceIndex) >= it.MaxENIs {
			return false
		}
		if ni.InterfaceType == apis.InterfaceTypeEFAOnly {
			efaOnly++
		}
	}
	return efaOnly <= it.EFA
}
