// Package kubelet emulates what an EC2 instance's bootstrap does in the
// cluster: it registers a Node when the instance is running (labels, taints,
// max pods and reserved resources from its user data, capacity from its
// instance type) for KWOK to keep Ready, and stops the Node's heartbeat
// when the instance goes away.
package kubelet

import (
	"fmt"
	"maps"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/userdata"
)

// KWOKAnnotation marks Nodes KWOK manages (kwok --manage-nodes-with-annotation-selector).
const KWOKAnnotation = "kwok.x-k8s.io/node"

// memoryVisiblePercent is the share of an instance type's nominal memory the
// OS reports to kubelet (the hypervisor and kernel keep the rest; real nodes
// show ~2-4% less than nominal, less than Karpenter's 7.5% estimate).
const memoryVisiblePercent = 97

// defaultEphemeralGi is the root volume of the EKS AMIs (20 GiB gp3).
const defaultEphemeralGi = 20

// BuildNode is the Node a bootstrap registers for an instance launched
// from img (its zero value when unknown: a Linux image).
func BuildNode(inst ec2types.Instance, img ec2types.Image, info ec2types.InstanceTypeInfo, boot *userdata.Bootstrap, region, k8sVersion string) (*corev1.Node, error) {
	name := aws.ToString(inst.PrivateDnsName)
	if name == "" {
		return nil, fmt.Errorf("instance %s has no private DNS name", aws.ToString(inst.InstanceId))
	}
	zone := ""
	if inst.Placement != nil {
		zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	arch := "amd64"
	if inst.Architecture == ec2types.ArchitectureValuesArm64 {
		arch = "arm64"
	}
	host := hostOS(inst, img, boot)
	labels := map[string]string{}
	for k, v := range boot.Labels {
		labels[k] = v
	}
	if host.windowsBuild != "" {
		labels[corev1.LabelWindowsBuild] = host.windowsBuild
	}
	for k, v := range map[string]string{
		corev1.LabelHostname: name, corev1.LabelOSStable: host.os, corev1.LabelArchStable: arch,
		"beta.kubernetes.io/os": host.os, "beta.kubernetes.io/arch": arch,
		corev1.LabelInstanceTypeStable: string(inst.InstanceType), "beta.kubernetes.io/instance-type": string(inst.InstanceType),
		corev1.LabelTopologyRegion: region, corev1.LabelTopologyZone: zone,
		"failure-domain.beta.kubernetes.io/region": region, "failure-domain.beta.kubernetes.io/zone": zone,
	} {
		labels[k] = v
	}

	capacity, err := capacityOf(info, boot, host.os == "windows")
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	allocatable, err := allocatableOf(capacity, boot)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", name, err)
	}
	ip := aws.ToString(inst.PrivateIpAddress)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: labels,
			Annotations: map[string]string{
				KWOKAnnotation:                                           "fake",
				"node.alpha.kubernetes.io/ttl":                           "0",
				"alpha.kubernetes.io/provided-node-ip":                   ip,
				"volumes.kubernetes.io/controller-managed-attach-detach": "true",
			},
		},
		Spec: corev1.NodeSpec{
			ProviderID: fmt.Sprintf("aws:///%s/%s", zone, aws.ToString(inst.InstanceId)),
			Taints:     append([]corev1.Taint(nil), boot.Taints...),
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: allocatable,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: ip},
				{Type: corev1.NodeInternalDNS, Address: name},
				{Type: corev1.NodeHostName, Address: name},
			},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: strings.TrimPrefix(aws.ToString(inst.InstanceId), "i-"), SystemUUID: "ec2" + strings.TrimPrefix(aws.ToString(inst.InstanceId), "i-"),
				KernelVersion: host.kernel, OSImage: host.image, ContainerRuntimeVersion: "containerd://2.1.0",
				KubeletVersion: "v" + k8sVersion + ".0-eks-localcloud", OperatingSystem: host.os, Architecture: arch,
			},
		},
	}, nil
}

// HasTrunkAttachedLabel is the label the VPC CNI's IPAMD puts on a node
// with ENABLE_POD_ENI set: "false", then "true" once the VPC resource
// controller has attached the node's trunk interface (amazon-vpc-cni-k8s
// README, ENABLE_POD_ENI; amazon-vpc-resource-controller-k8s
// HasTrunkAttachedLabel).
const HasTrunkAttachedLabel = "vpc.amazonaws.com/has-trunk-attached"

// AttachTrunk is what security groups for pods (ENABLE_POD_ENI on the VPC
// CNI) does to a node of an ENI-trunking instance type: the VPC resource
// controller attaches a trunk interface (IPAMD then labels the node
// has-trunk-attached "true") and advertises the type's branch interfaces as the extended
// resource vpc.amazonaws.com/pod-eni in capacity and allocatable (AWS EKS
// user guide, "Security groups for Pods"; the controller's limits table,
// which catalog.BranchInterfaces follows). A type without trunking keeps
// the "false" label and no pod-eni. The real controller does this some
// seconds after registration; the emulation posts it with the first status.
func AttachTrunk(node *corev1.Node) {
	branches := catalog.BranchInterfaces(node.Labels[corev1.LabelInstanceTypeStable])
	if branches <= 0 {
		node.Labels[HasTrunkAttachedLabel] = "false"
		return
	}
	node.Labels[HasTrunkAttachedLabel] = "true"
	q := *resource.NewQuantity(branches, resource.DecimalSI)
	node.Status.Capacity[catalog.ResourcePodENI] = q
	node.Status.Allocatable[catalog.ResourcePodENI] = q
}

// DefaultMaxPods is the EKS AMIs' ENI-limited pod count: ENIs x (IPv4 per ENI - 1) + 2.
func DefaultMaxPods(info ec2types.InstanceTypeInfo) int {
	if info.NetworkInfo == nil || info.NetworkInfo.MaximumNetworkInterfaces == nil || info.NetworkInfo.Ipv4AddressesPerInterface == nil {
		return 110
	}
	return int(*info.NetworkInfo.MaximumNetworkInterfaces)*(int(*info.NetworkInfo.Ipv4AddressesPerInterface)-1) + 2
}

func capacityOf(info ec2types.InstanceTypeInfo, boot *userdata.Bootstrap, windows bool) (corev1.ResourceList, error) {
	if info.VCpuInfo == nil || info.VCpuInfo.DefaultVCpus == nil || info.MemoryInfo == nil || info.MemoryInfo.SizeInMiB == nil {
		return nil, fmt.Errorf("instance type %s lacks vCPU or memory information", info.InstanceType)
	}
	pods := boot.MaxPods
	switch {
	case pods != 0:
	case windows:
		pods = 110 // the kubelet's default: Windows pod IPs are not ENI-limited
	default:
		pods = DefaultMaxPods(info)
	}
	memKi := int64(math.Floor(float64(*info.MemoryInfo.SizeInMiB) * 1024 * memoryVisiblePercent / 100))
	rl := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(*info.VCpuInfo.DefaultVCpus), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memKi*1024, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(pods), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(defaultEphemeralGi<<30, resource.BinarySI),
	}
	if n := info.NetworkInfo; windows && n != nil && aws.ToInt32(n.Ipv4AddressesPerInterface) > 1 {
		// The VPC resource controller advertises a Windows node's
		// secondary IPv4 addresses of its primary ENI.
		rl[privateIPv4Address] = *resource.NewQuantity(int64(aws.ToInt32(n.Ipv4AddressesPerInterface))-1, resource.DecimalSI)
	}
	if g := info.GpuInfo; g != nil {
		var n int64
		for _, d := range g.Gpus {
			if strings.EqualFold(aws.ToString(d.Manufacturer), "NVIDIA") {
				n += int64(aws.ToInt32(d.Count))
			}
		}
		if n > 0 {
			rl["nvidia.com/gpu"] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	return rl, nil
}

// kubeReserved is the node's kube-reserved: what the user data sets, and
// for each of cpu, memory and ephemeral-storage it leaves out, what the EKS
// AMIs' bootstrap (nodeadm, bootstrap.sh, Bottlerocket's settings) reserves
// by default: tiered CPU by core count, 11 MiB per pod plus 255 MiB, 1 GiB
// of disk. A node without user data runs kubelet's own default: none.
func kubeReserved(capacity corev1.ResourceList, boot *userdata.Bootstrap) map[string]string {
	if boot.Format == userdata.FormatNone {
		return boot.KubeReserved
	}
	out := map[string]string{
		string(corev1.ResourceCPU):              fmt.Sprintf("%dm", reservedCPUMilli(capacity.Cpu().Value())),
		string(corev1.ResourceMemory):           fmt.Sprintf("%dMi", 11*capacity.Pods().Value()+255),
		string(corev1.ResourceEphemeralStorage): "1Gi",
	}
	maps.Copy(out, boot.KubeReserved)
	return out
}

// reservedCPUMilli is the AMIs' CPU reservation for cores vCPUs: 6% of the
// first core, 1% of the second, 0.5% of the third and fourth and 0.25% of
// each one after, each range's share rounded down.
func reservedCPUMilli(cores int64) int64 {
	total := cores * 1000
	bounds := []int64{0, 1000, 2000, 4000, max(total, 4000)}
	perTenThousand := []int64{600, 100, 50, 25}
	var out int64
	for i, pct := range perTenThousand {
		if total > bounds[i] {
			out += (min(total, bounds[i+1]) - bounds[i]) * pct / 10000
		}
	}
	return out
}

// allocatableOf is capacity minus kube-reserved, system-reserved and the
// hard eviction thresholds, as kubelet computes it.
func allocatableOf(capacity corev1.ResourceList, boot *userdata.Bootstrap) (corev1.ResourceList, error) {
	out := capacity.DeepCopy()
	sub := func(res corev1.ResourceName, q string, what string) error {
		cur, ok := out[res]
		if !ok {
			return nil
		}
		if strings.HasSuffix(q, "%") {
			pct, err := resource.ParseQuantity(strings.TrimSuffix(q, "%"))
			if err != nil {
				return fmt.Errorf("%s %s=%s: %w", what, res, q, err)
			}
			c := capacity[res]
			q = fmt.Sprint(c.Value() * pct.Value() / 100)
		}
		v, err := resource.ParseQuantity(q)
		if err != nil {
			return fmt.Errorf("%s %s=%s: %w", what, res, q, err)
		}
		cur.Sub(v)
		if cur.Sign() < 0 {
			cur = resource.MustParse("0")
		}
		out[res] = cur
		return nil
	}
	for _, m := range []struct {
		what string
		rl   map[string]string
	}{{"kube-reserved", kubeReserved(capacity, boot)}, {"system-reserved", boot.SystemReserved}} {
		for k, v := range m.rl {
			if err := sub(corev1.ResourceName(k), v, m.what); err != nil {
				return nil, err
			}
		}
	}
	eviction := map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}
	for k, v := range boot.EvictionHard {
		eviction[k] = v
	}
	if err := sub(corev1.ResourceMemory, eviction["memory.available"], "eviction-hard"); err != nil {
		return nil, err
	}
	if err := sub(corev1.ResourceEphemeralStorage, eviction["nodefs.available"], "eviction-hard"); err != nil {
		return nil, err
	}
	return out, nil
}
