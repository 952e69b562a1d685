package catalog

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Extended resources a node of a type may offer.
const (
	ResourceNVIDIAGPU    corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU       corev1.ResourceName = "amd.com/gpu"
	ResourceHabanaGaudi  corev1.ResourceName = "habana.ai/gaudi"
	ResourceAWSNeuron    corev1.ResourceName = "aws.amazon.com/neuron"
	ResourceAWSNeuronCor corev1.ResourceName = "aws.amazon.com/neuroncore"
	ResourceEFA          corev1.ResourceName = "vpc.amazonaws.com/efa"
	ResourcePodENI       corev1.ResourceName = "vpc.amazonaws.com/pod-eni"
)

// Defaults Karpenter applies.
const (
	DefaultVMMemoryOverheadPercent = 0.075
	// DefaultRootVolumeGiB is the root/ephemeral volume of the AL2, AL2023 and
	// Bottlerocket default block device mappings.
	DefaultRootVolumeGiB = 20
	// DefaultMaxPods is the kubelet default when pod density is not ENI-limited.
	DefaultMaxPods = 110
)

// Eviction signals that reduce allocatable.
const (
	SignalMemoryAvailable = "memory.available"
	SignalNodeFSAvailable = "nodefs.available"
)

// KubeletOptions are the EC2NodeClass spec.kubelet fields that change
// allocatable. Callers map apis.KubeletConfiguration into it.
type KubeletOptions struct {
	MaxPods        *int32
	PodsPerCore    *int32
	SystemReserved map[string]string // resource name -> quantity
	KubeReserved   map[string]string // resource name -> quantity
	EvictionHard   map[string]string // signal -> quantity or percentage
}

// AllocatableOptions are everything besides the instance type that decides
// what a node will report as allocatable.
type AllocatableOptions struct {
	// VMMemoryOverheadPercent is the share of memory the hypervisor keeps; nil
	// means DefaultVMMemoryOverheadPercent (Karpenter's --vm-memory-overhead-percent).
	VMMemoryOverheadPercent *float64
	// ReservedENIs are ENIs kept from the VPC CNI (Karpenter's --reserved-enis).
	ReservedENIs int
	// EFAOnlyENIs are the EC2NodeClass's EFA-only interfaces on the default
	// network card: they take ENIs without carrying pod IPs.
	EFAOnlyENIs int
	// AMIFamily of the EC2NodeClass: AL2, AL2023 (default), Bottlerocket,
	// Windows2019, Windows2022, Windows2025, Custom. Windows is not ENI-limited; Bottlerocket ignores podsPerCore.
	AMIFamily string
	Kubelet   KubeletOptions
	// RootVolumeSize is the size of the volume backing ephemeral storage; nil
	// means DefaultRootVolumeGiB.
	RootVolumeSize *resource.Quantity
	// InstanceStoreRAID0 makes the instance-store NVMe disks ephemeral storage
	// (EC2NodeClass instanceStorePolicy: RAID0).
	InstanceStoreRAID0 bool
}

// Validate reports the first option that is malformed, naming it.
func (o AllocatableOptions) Validate() error {
	if o.VMMemoryOverheadPercent != nil && (*o.VMMemoryOverheadPercent < 0 || *o.VMMemoryOverheadPercent >= 1) {
		return fmt.Errorf("vmMemoryOverheadPercent %v: must be in [0, 1)", *o.VMMemoryOverheadPercent)
	}
	if o.ReservedENIs < 0 {
		return fmt.Errorf("reservedENIs %d: must not be negative", o.ReservedENIs)
	}
	if o.Kubelet.MaxPods != nil && *o.Kubelet.MaxPods < 0 {
		return fmt.Errorf("kubelet.maxPods %d: must not be negative", *o.Kubelet.MaxPods)
	}
	if o.Kubelet.PodsPerCore != nil && *o.Kubelet.PodsPerCore < 0 {
		return fmt.Errorf("kubelet.podsPerCore %d: must not be negative", *o.Kubelet.PodsPerCore)
	}
	for field, m := range map[string]map[string]string{"kubelet.systemReserved": o.Kubelet.SystemReserved, "kubelet.kubeReserved": o.Kubelet.KubeReserved} {
		for k, v := range m {
			if _, err := resource.ParseQuantity(v); err != nil {
				return fmt.Errorf("%s[%s] %q: %w", field, k, v, err)
			}
		}
	}
	for k, v := range o.Kubelet.EvictionHard {
		if _, err := evictionAmount(1, v); err != nil {
			return fmt.Errorf("kubelet.evictionHard[%s] %q: %w", k, v, err)
		}
	}
	if o.RootVolumeSize != nil && o.RootVolumeSize.Sign() <= 0 {
		return fmt.Errorf("root volume size %s: must be positive", o.RootVolumeSize.String())
	}
	return nil
}

func (o AllocatableOptions) windows() bool {
	return strings.HasPrefix(strings.ToLower(o.AMIFamily), "windows")
}

// Overhead is what Karpenter subtracts from capacity.
type Overhead struct {
	KubeReserved      corev1.ResourceList
	SystemReserved    corev1.ResourceList
	EvictionThreshold corev1.ResourceList
}

// Total sums the three parts.
func (o Overhead) Total() corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range []corev1.ResourceList{o.KubeReserved, o.SystemReserved, o.EvictionThreshold} {
		for k, v := range l {
			q := out[k]
			q.Add(v)
			out[k] = q
		}
	}
	return out
}

// ENILimitedPods is the VPC CNI pod density: usable ENIs x (IPv4 per ENI - 1) + 2.
func (it *InstanceType) ENILimitedPods(reservedENIs int) int64 {
	usable := it.MaxENIs - int64(reservedENIs)
	if usable <= 0 {
		return 0
	}
	return usable*(it.IPv4PerENI-1) + 2
}

// MaxPods is the pods capacity a kubelet on this type will report.
func (it *InstanceType) MaxPods(o AllocatableOptions) int64 {
	var n int64
	switch {
	case o.Kubelet.MaxPods != nil:
		n = int64(*o.Kubelet.MaxPods)
	case !o.windows():
		n = it.ENILimitedPods(o.ReservedENIs + o.EFAOnlyENIs)
	default:
		n = DefaultMaxPods
	}
	// Every family but Bottlerocket applies podsPerCore, Windows included
	// (Karpenter-AWS amifamily FeatureFlags PodsPerCoreEnabled; Bottlerocket's
	// settings cannot pass it, the Windows bootstrap passes --pods-per-core).
	if o.Kubelet.PodsPerCore != nil && *o.Kubelet.PodsPerCore > 0 && !strings.EqualFold(o.AMIFamily, "Bottlerocket") {
		n = min(n, int64(*o.Kubelet.PodsPerCore)*it.VCPU)
	}
	return n
}

// capacityMemoryMiB is memory minus Graviton's 64Mi CMA reservation minus the
// VM overhead, rounded the way Karpenter rounds it (overhead ceil'd to MiB).
func (it *InstanceType) capacityMemoryMiB(o AllocatableOptions) int64 {
	mib := it.MemoryMiB
	if it.Architecture == "arm64" {
		mib -= 64
	}
	pct := DefaultVMMemoryOverheadPercent
	if o.VMMemoryOverheadPercent != nil {
		pct = *o.VMMemoryOverheadPercent
	}
	bytes := float64(mib * 1024 * 1024)
	return mib - int64(math.Ceil(bytes*pct/1024/1024))
}

func (it *InstanceType) ephemeralStorage(o AllocatableOptions) resource.Quantity {
	if o.InstanceStoreRAID0 && it.LocalNVMeGiB > 0 {
		return *resource.NewQuantity(it.LocalNVMeGiB*1000*1000*1000, resource.DecimalSI)
	}
	if o.RootVolumeSize != nil {
		return o.RootVolumeSize.DeepCopy()
	}
	return *resource.NewQuantity(DefaultRootVolumeGiB<<30, resource.BinarySI)
}

// ResourcePrivateIPv4Address is the VPC resource controller's resource
// for a Windows pod's IPv4 address.
const ResourcePrivateIPv4Address corev1.ResourceName = "vpc.amazonaws.com/PrivateIPv4Address"

// Capacity is what the node's kubelet will report as capacity. Extended
// resources appear only when the type has them.
func (it *InstanceType) Capacity(o AllocatableOptions) corev1.ResourceList {
	c := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(it.VCPU, resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(it.capacityMemoryMiB(o)<<20, resource.BinarySI),
		corev1.ResourceEphemeralStorage: it.ephemeralStorage(o),
		corev1.ResourcePods:             *resource.NewQuantity(it.MaxPods(o), resource.DecimalSI),
	}
	var nvidia, amd, habana int64
	for _, g := range it.GPUs {
		switch g.Manufacturer {
		case "NVIDIA":
			nvidia += g.Count
		case "AMD":
			amd += g.Count
		case "Habana":
			habana += g.Count
		}
	}
	if o.windows() && it.IPv4PerENI > 1 {
		// Karpenter-AWS newInstanceType (privateIPv4Address): a Windows
		// node offers the VPC resource controller's secondary IPv4
		// addresses, one ENI's less its primary, which the controller's
		// webhook adds to every Windows pod's requests.
		c[ResourcePrivateIPv4Address] = *resource.NewQuantity(it.IPv4PerENI-1, resource.DecimalSI)
	}
	for name, n := range map[corev1.ResourceName]int64{
		ResourceNVIDIAGPU: nvidia, ResourceAMDGPU: amd, ResourceHabanaGaudi: habana,
		ResourceAWSNeuron: it.NeuronDevices, ResourceAWSNeuronCor: it.NeuronCores, ResourceEFA: it.EFA,
		ResourcePodENI: BranchInterfaces(it.Name),
	} {
		if n > 0 {
			c[name] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return c
}

// BranchInterfaces is the vpc.amazonaws.com/pod-eni capacity of a node of
// the instance type (security groups for pods): the branch interfaces of a
// type that supports ENI trunking, 0 for any other or unknown type. The VPC
// resource controller advertises it on nodes with a trunk interface;
// Karpenter-AWS puts it in every type's capacity (instancetype/types.go
// awsPodENI, from its VPC limits table; AWS: "Security groups for Pods",
// supported instance types). Not reserved, so allocatable equals capacity.
func BranchInterfaces(instanceType string) int64 { return branchInterfaces[instanceType] }

// kubeReservedCPUMilli is the tiered CPU reservation: 6% of the first core,
// 1% of the second, 0.5% of the third and fourth, 0.25% of the rest.
func kubeReservedCPUMilli(vcpu int64) int64 {
	milli := vcpu * 1000
	var total int64
	for _, tier := range []struct {
		start, end int64
		pct        float64
	}{{0, 1000, 0.06}, {1000, 2000, 0.01}, {2000, 4000, 0.005}, {4000, 1 << 31, 0.0025}} {
		if milli < tier.start {
			break
		}
		span := min(milli, tier.end) - tier.start
		total += int64(float64(span) * tier.pct)
	}
	return total
}

// Overhead returns kube-reserved, system-reserved and the eviction threshold.
func (it *InstanceType) Overhead(o AllocatableOptions) (Overhead, error) {
	pods := it.MaxPods(o)
	kube := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(kubeReservedCPUMilli(it.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity((11*pods+255)<<20, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(1<<30, resource.BinarySI),
	}
	for k, v := range o.Kubelet.KubeReserved {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return Overhead{}, fmt.Errorf("kubelet.kubeReserved[%s] %q: %w", k, v, err)
		}
		kube[corev1.ResourceName(k)] = q
	}
	sys := corev1.ResourceList{}
	for k, v := range o.Kubelet.SystemReserved {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return Overhead{}, fmt.Errorf("kubelet.systemReserved[%s] %q: %w", k, v, err)
		}
		sys[corev1.ResourceName(k)] = q
	}
	memBytes := it.capacityMemoryMiB(o) << 20
	storage := it.ephemeralStorage(o)
	storageBytes := storage.Value()
	evict := corev1.ResourceList{
		corev1.ResourceMemory:           *resource.NewQuantity(100<<20, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(int64(math.Ceil(float64(storageBytes)/100*10)), resource.DecimalSI),
	}
	if v, ok := o.Kubelet.EvictionHard[SignalMemoryAvailable]; ok {
		n, err := evictionAmount(memBytes, v)
		if err != nil {
			return Overhead{}, fmt.Errorf("kubelet.evictionHard[%s] %q: %w", SignalMemoryAvailable, v, err)
		}
		evict[corev1.ResourceMemory] = *resource.NewQuantity(n, resource.BinarySI)
	}
	if v, ok := o.Kubelet.EvictionHard[SignalNodeFSAvailable]; ok {
		n, err := evictionAmount(storageBytes, v)
		if err != nil {
			return Overhead{}, fmt.Errorf("kubelet.evictionHard[%s] %q: %w", SignalNodeFSAvailable, v, err)
		}
		evict[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	return Overhead{KubeReserved: kube, SystemReserved: sys, EvictionThreshold: evict}, nil
}

// evictionAmount turns "500Mi" or "10%" (of capacity) into bytes. 100% means
// the threshold is disabled, as in the kubelet.
func evictionAmount(capacity int64, v string) (int64, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return 0, fmt.Errorf("percentage must be a number in [0, 100]")
		}
		if f == 100 {
			f = 0
		}
		return int64(math.Ceil(float64(capacity) / 100 * f)), nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, err
	}
	return q.Value(), nil
}

// Allocatable is capacity minus overhead, never below zero: what the
// scheduler may place on a node of this type.
func (it *InstanceType) Allocatable(o AllocatableOptions) (corev1.ResourceList, error) {
	oh, err := it.Overhead(o)
	if err != nil {
		return nil, fmt.Errorf("allocatable of %s: %w", it.Name, err)
	}
	alloc := it.Capacity(o)
	for k, v := range oh.Total() {
		q, ok := alloc[k]
		if !ok {
			continue
		}
		q.Sub(v)
		if q.Sign() < 0 {
			q = *resource.NewQuantity(0, q.Format)
		}
		alloc[k] = q
	}
	return alloc, nil
}
