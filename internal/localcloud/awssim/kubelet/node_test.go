package kubelet_test

import (
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/kubelet"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/userdata"
)

// typeInfo is what DescribeInstanceTypes says of a catalog type.
func typeInfo(it *catalog.InstanceType) ec2types.InstanceTypeInfo {
	return ec2types.InstanceTypeInfo{
		InstanceType: ec2types.InstanceType(it.Name),
		VCpuInfo:     &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(int32(it.VCPU))},
		MemoryInfo:   &ec2types.MemoryInfo{SizeInMiB: aws.Int64(it.MemoryMiB)},
		NetworkInfo: &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(int32(it.MaxENIs)),
			Ipv4AddressesPerInterface: aws.Int32(int32(it.IPv4PerENI))},
	}
}

func buildNode(t *testing.T, it *catalog.InstanceType, boot *userdata.Bootstrap) *corev1.Node {
	t.Helper()
	inst := ec2types.Instance{InstanceId: aws.String("i-0123"), InstanceType: ec2types.InstanceType(it.Name),
		Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-west-2a")}, PrivateDnsName: aws.String("ip-10-0-0-1")}
	n, err := kubelet.BuildNode(inst, ec2types.Image{}, typeInfo(it), boot, "us-west-2", "1.36")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A node whose user data leaves kube-reserved out reserves what the EKS
// AMIs' bootstrap does, which is what the planner expects of it: an emulated
// m5.large offered 2 CPUs where AWS's offers 1930m, and pods fitted there
// that do not fit on AWS. The planner may expect less memory than the node
// has (its VM overhead is an estimate), never more, and never other CPU or
// pods.
func TestNodeReservesWhatTheAMIReserves(t *testing.T) {
	cat, err := catalog.Builtin("us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"t3.medium", "m5.large", "c5.xlarge", "m5.2xlarge", "c5.9xlarge", "m5.16xlarge"} {
		it, ok := cat.Get(name)
		if !ok {
			t.Fatalf("%s not in the catalog", name)
		}
		for _, f := range []userdata.Format{userdata.FormatAL2023, userdata.FormatAL2, userdata.FormatBottlerocket} {
			node := buildNode(t, it, &userdata.Bootstrap{Format: f})
			planned, err := it.Allocatable(catalog.AllocatableOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := node.Status.Allocatable
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourcePods} {
				if g, p := got[res], planned[res]; g.Cmp(p) != 0 {
					t.Errorf("%s %s: node allocatable %s %s, the planner expects %s", name, f, res, g.String(), p.String())
				}
			}
			if g, p := got[corev1.ResourceMemory], planned[corev1.ResourceMemory]; g.Cmp(p) < 0 {
				t.Errorf("%s %s: node allocatable memory %s, below the planner's %s", name, f, g.String(), p.String())
			}
		}
	}
}

// What the user data sets wins, resource by resource; a node without user
// data reserves nothing (kubelet's own default).
func TestNodeKubeReservedFromUserDataWins(t *testing.T) {
	cat, err := catalog.Builtin("us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	it, _ := cat.Get("m5.large")
	node := buildNode(t, it, &userdata.Bootstrap{Format: userdata.FormatAL2023, KubeReserved: map[string]string{"cpu": "500m"}})
	if cpu := node.Status.Allocatable.Cpu(); cpu.MilliValue() != 1500 {
		t.Errorf("allocatable cpu %s with kubeReserved cpu 500m, want 1500m", cpu)
	}
	capMem, mem := node.Status.Capacity.Memory(), node.Status.Allocatable.Memory()
	if reserved := capMem.Value() - mem.Value(); reserved != (11*29+255+100)<<20 {
		t.Errorf("memory reserved %d MiB, want the default kube-reserved 574 MiB and the 100 MiB eviction threshold", reserved>>20)
	}
	bare := buildNode(t, it, &userdata.Bootstrap{Format: userdata.FormatNone})
	if cpu := bare.Status.Allocatable.Cpu(); cpu.MilliValue() != 2000 {
		t.Errorf("allocatable cpu %s without user data, want all 2", cpu)
	}
}

// With security groups for pods on, a node of an ENI-trunking type reports
// its branch interfaces as vpc.amazonaws.com/pod-eni, as the VPC resource
// controller advertises them; a t3 (no trunking) reports none, and neither
// does any node while the feature is off.
func TestAttachTrunkAdvertisesBranchInterfaces(t *testing.T) {
	cat, err := catalog.Builtin("us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"m5.large": 9, "c7g.16xlarge": 107, "t3.medium": 0} {
		it, ok := cat.Get(name)
		if !ok {
			t.Fatalf("%s not in the catalog", name)
		}
		node := buildNode(t, it, &userdata.Bootstrap{Format: userdata.FormatAL2023})
		if _, ok := node.Status.Capacity[catalog.ResourcePodENI]; ok {
			t.Errorf("%s: pod-eni without ENABLE_POD_ENI", name)
		}
		kubelet.AttachTrunk(node)
		c, a := node.Status.Capacity[catalog.ResourcePodENI], node.Status.Allocatable[catalog.ResourcePodENI]
		if c.Value() != want || a.Value() != want {
			t.Errorf("%s: pod-eni capacity %s allocatable %s, want %d", name, c.String(), a.String(), want)
		}
		if got, wantLabel := node.Labels[kubelet.HasTrunkAttachedLabel], strconv.FormatBool(want > 0); got != wantLabel {
			t.Errorf("%s: %s=%q, want %q", name, kubelet.HasTrunkAttachedLabel, got, wantLabel)
		}
	}
}

// An instance of a Windows Server 2022 image registers as a Windows node:
// os windows with the image's build, Windows node info, the kubelet's 110
// pods and the VPC resource controller's private IPv4 addresses, which is
// what the planner expects of a Windows2022 class's m5.large.
func TestWindowsInstanceRegistersAWindowsNode(t *testing.T) {
	cat, err := catalog.Builtin("us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	it, _ := cat.Get("m5.large")
	inst := ec2types.Instance{InstanceId: aws.String("i-0123"), InstanceType: "m5.large", Platform: ec2types.PlatformValuesWindows,
		Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-west-2a")}, PrivateDnsName: aws.String("ip-10-0-0-1")}
	img := ec2types.Image{Name: aws.String("Windows_Server-2022-English-Core-EKS_Optimized-1.36-2026.11.01"), Platform: ec2types.PlatformValuesWindows}
	boot := &userdata.Bootstrap{Format: userdata.FormatWindows, Labels: map[string]string{"karpenter.sh/nodepool": "windows"}}
	n, err := kubelet.BuildNode(inst, img, typeInfo(it), boot, "us-west-2", "1.36")
	if err != nil {
		t.Fatal(err)
	}
	l := n.Labels
	if l[corev1.LabelOSStable] != "windows" || l["beta.kubernetes.io/os"] != "windows" || l[corev1.LabelWindowsBuild] != "10.0.20348" || l["karpenter.sh/nodepool"] != "windows" {
		t.Errorf("labels %v", l)
	}
	if n.Status.NodeInfo.OperatingSystem != "windows" || n.Status.NodeInfo.OSImage != "Windows Server 2022 Datacenter" {
		t.Errorf("node info %+v", n.Status.NodeInfo)
	}
	planned, err := it.Allocatable(catalog.AllocatableOptions{AMIFamily: "Windows2022"})
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourcePods, catalog.ResourcePrivateIPv4Address} {
		if g, p := n.Status.Allocatable[res], planned[res]; g.Cmp(p) != 0 {
			t.Errorf("allocatable %s %s, the planner expects %s", res, g.String(), p.String())
		}
	}
	linux := buildNode(t, it, &userdata.Bootstrap{Format: userdata.FormatAL2023})
	if linux.Labels[corev1.LabelOSStable] != "linux" || linux.Labels[corev1.LabelWindowsBuild] != "" {
		t.Errorf("linux node labels %v", linux.Labels)
	}
}
