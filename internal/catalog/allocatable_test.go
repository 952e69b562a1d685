package catalog

import (
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func builtinType(t *testing.T, name string) *InstanceType {
	t.Helper()
	c, err := Builtin("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	it, ok := c.Get(name)
	if !ok {
		t.Fatalf("builtin catalog lacks %s", name)
	}
	return it
}

func ptr[T any](v T) *T { return &v }

// checkList compares every resource in want and rejects extra ones.
func checkList(t *testing.T, what string, got corev1.ResourceList, want map[corev1.ResourceName]string) {
	t.Helper()
	for k, v := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: %s missing, want %s", what, k, v)
			continue
		}
		if w := resource.MustParse(v); g.Cmp(w) != 0 {
			t.Errorf("%s: %s = %s, want %s", what, k, g.String(), v)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected resource %s = %s", what, k, g.String())
		}
	}
}

// Expected values worked out by hand from Karpenter's formulas:
//
//	cpu    = vCPU - (6% of core 1 + 1% of core 2 + 0.5% of cores 3-4 + 0.25% of the rest)
//	memory = (MiB - 64 on arm64) - ceil(that x 0.075) - (11 x pods + 255) - 100
//	pods   = ENIs x (IPv4 per ENI - 1) + 2
//	ephemeral-storage = 20Gi - 1Gi - 10% of 20Gi = 17Gi
func TestAllocatableHandChecked(t *testing.T) {
	cases := []struct {
		name string
		want map[corev1.ResourceName]string
	}{
		// 2 vCPU: 60m + 10m reserved. 8192 - 615 = 7577; 29 pods -> 574Mi; 7577-574-100.
		{"m5.large", map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/pod-eni": "9"}},
		// arm64: 16384-64 = 16320, ceil(1224.0) = 1224 -> 15096; 58 pods -> 893Mi; 15096-893-100.
		{"m6g.xlarge", map[corev1.ResourceName]string{"cpu": "3920m", "memory": "14103Mi", "pods": "58", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/pod-eni": "18"}},
		// 3 ENIs x 3 + 2 = 11 pods; 2048 - ceil(153.6)=154 -> 1894 - 376 - 100.
		{"t3.small", map[corev1.ResourceName]string{"cpu": "1930m", "memory": "1418Mi", "pods": "11", "ephemeral-storage": "17Gi"}},
		// 16384 - ceil(1228.8)=1229 -> 15155 - 893 - 100; one A10G.
		{"g5.xlarge", map[corev1.ResourceName]string{"cpu": "3920m", "memory": "14162Mi", "pods": "58", "ephemeral-storage": "17Gi", "nvidia.com/gpu": "1", "vpc.amazonaws.com/pod-eni": "4"}},
		// 96 vCPU: 60+10+10+230 = 310m. 1179648 - 88474 = 1091174; 15 ENIs x 49 + 2 = 737 pods -> 8362Mi.
		{"p4d.24xlarge", map[corev1.ResourceName]string{"cpu": "95690m", "memory": "1082712Mi", "pods": "737", "ephemeral-storage": "17Gi", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4", "vpc.amazonaws.com/pod-eni": "62"}},
		// 64 vCPU arm64: 230m. 131072-64 = 131008 - ceil(9825.6)=9826 -> 121182 - 8362 - 100.
		{"c7g.16xlarge", map[corev1.ResourceName]string{"cpu": "63770m", "memory": "112720Mi", "pods": "737", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/efa": "1", "vpc.amazonaws.com/pod-eni": "107"}},
		// One Inferentia2 device with two NeuronCores.
		{"inf2.xlarge", map[corev1.ResourceName]string{"cpu": "3920m", "memory": "14162Mi", "pods": "58", "ephemeral-storage": "17Gi", "aws.amazon.com/neuron": "1", "aws.amazon.com/neuroncore": "2", "vpc.amazonaws.com/pod-eni": "18"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := builtinType(t, tc.name).Allocatable(AllocatableOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkList(t, tc.name, got, tc.want)
		})
	}
}

func TestAllocatableOverrides(t *testing.T) {
	m5 := builtinType(t, "m5.large")
	g5 := builtinType(t, "g5.xlarge")
	cases := []struct {
		name string
		it   *InstanceType
		opts AllocatableOptions
		want map[corev1.ResourceName]string
	}{
		{"maxPods 110 raises kube-reserved memory", m5, AllocatableOptions{Kubelet: KubeletOptions{MaxPods: ptr[int32](110)}},
			// 7577 - (11*110+255=1465) - 100
			map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6012Mi", "pods": "110", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/pod-eni": "9"}},
		{"podsPerCore caps ENI density", m5, AllocatableOptions{Kubelet: KubeletOptions{PodsPerCore: ptr[int32](4)}},
			// min(29, 4*2) = 8 pods -> 343Mi
			map[corev1.ResourceName]string{"cpu": "1930m", "memory": "7134Mi", "pods": "8", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/pod-eni": "9"}},
		{"kube and system reserved", m5, AllocatableOptions{Kubelet: KubeletOptions{
			KubeReserved: map[string]string{"cpu": "200m"}, SystemReserved: map[string]string{"memory": "100Mi", "cpu": "100m"}}},
			map[corev1.ResourceName]string{"cpu": "1700m", "memory": "6803Mi", "pods": "29", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/pod-eni": "9"}},
		{"evictionHard absolute and percent", m5, AllocatableOptions{Kubelet: KubeletOptions{
			EvictionHard: map[string]string{"memory.available": "500Mi", "nodefs.available": "5%"}}},
			// storage: 20Gi - 1Gi - 1Gi
			map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6503Mi", "pods": "29", "ephemeral-storage": "18Gi", "vpc.amazonaws.com/pod-eni": "9"}},
		{"no VM overhead", m5, AllocatableOptions{VMMemoryOverheadPercent: ptr(0.0)},
			map[corev1.ResourceName]string{"cpu": "1930m", "memory": "7518Mi", "pods": "29", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/pod-eni": "9"}},
		{"root volume 100Gi", m5, AllocatableOptions{RootVolumeSize: ptr(resource.MustParse("100Gi"))},
			map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "89Gi", "vpc.amazonaws.com/pod-eni": "9"}},
		// Windows nodes also offer the VPC resource controller's private
		// IPv4 addresses: 10 per ENI - 1.
		{"windows is not ENI limited", m5, AllocatableOptions{AMIFamily: "Windows2022"},
			map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6012Mi", "pods": "110", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/PrivateIPv4Address": "9", "vpc.amazonaws.com/pod-eni": "9"}},
		// Karpenter's Windows family enables podsPerCore (amifamily/windows.go
		// FeatureFlags) and its bootstrap passes --pods-per-core: min(110, 4*2) = 8 -> 343Mi.
		{"windows podsPerCore caps 110", m5, AllocatableOptions{AMIFamily: "Windows2022", Kubelet: KubeletOptions{PodsPerCore: ptr[int32](4)}},
			map[corev1.ResourceName]string{"cpu": "1930m", "memory": "7134Mi", "pods": "8", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/PrivateIPv4Address": "9", "vpc.amazonaws.com/pod-eni": "9"}},
		// Bottlerocket's does not (amifamily/bottlerocket.go): ENI-limited 29 pods.
		{"bottlerocket ignores podsPerCore", m5, AllocatableOptions{AMIFamily: "Bottlerocket", Kubelet: KubeletOptions{PodsPerCore: ptr[int32](4)}},
			map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/pod-eni": "9"}},
		{"reserved ENIs", m5, AllocatableOptions{ReservedENIs: 1},
			// 2 x 9 + 2 = 20 pods -> 475Mi
			map[corev1.ResourceName]string{"cpu": "1930m", "memory": "7002Mi", "pods": "20", "ephemeral-storage": "17Gi", "vpc.amazonaws.com/pod-eni": "9"}},
		{"RAID0 instance store", g5, AllocatableOptions{InstanceStoreRAID0: true},
			// 250G - 1Gi - 25G
			map[corev1.ResourceName]string{"cpu": "3920m", "memory": "14162Mi", "pods": "58", "ephemeral-storage": "223926258176", "nvidia.com/gpu": "1", "vpc.amazonaws.com/pod-eni": "4"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.opts.Validate(); err != nil {
				t.Fatal(err)
			}
			got, err := tc.it.Allocatable(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			checkList(t, tc.name, got, tc.want)
		})
	}
}

func TestAllocatableRejectsBadOptions(t *testing.T) {
	m5 := builtinType(t, "m5.large")
	for name, o := range map[string]AllocatableOptions{
		"kubeReserved":     {Kubelet: KubeletOptions{KubeReserved: map[string]string{"cpu": "lots"}}},
		"systemReserved":   {Kubelet: KubeletOptions{SystemReserved: map[string]string{"memory": "1 GB"}}},
		"evictionHard":     {Kubelet: KubeletOptions{EvictionHard: map[string]string{"memory.available": "120%"}}},
		"vmMemoryOverhead": {VMMemoryOverheadPercent: ptr(1.5)},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%s: Validate accepted bad options", name)
		}
		if name == "vmMemoryOverhead" {
			continue
		}
		if _, err := m5.Allocatable(o); err == nil {
			t.Errorf("%s: Allocatable accepted bad options", name)
		}
	}
}

func TestKubeReservedCPUTiers(t *testing.T) {
	for vcpu, want := range map[int64]int64{1: 60, 2: 70, 3: 75, 4: 80, 8: 90, 48: 190, 192: 550} {
		if got := kubeReservedCPUMilli(vcpu); got != want {
			t.Errorf("%d vCPU: kube-reserved %dm, want %dm", vcpu, got, want)
		}
	}
}

// Karpenter publishes the allocatable of every type in its docs
// (website/content/en/*/reference/instance-types.md: AL2, ENI-limited pods,
// no block device mappings). A sample of those rows, checked against the
// model on the real DescribeInstanceTypes data.
func TestAllocatableMatchesKarpenterDocs(t *testing.T) {
	dir := sharedDir(t)
	infos, err := readInstanceTypes(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*InstanceType{}
	for i := range infos {
		it, err := FromInstanceTypeInfo(&infos[i])
		if err != nil {
			t.Fatal(err)
		}
		if it != nil {
			byName[it.Name] = it
		}
	}
	// cpu, memory, pods from Karpenter's docs; pod-eni from its VPC limits
	// table (empty: the type has no ENI trunking).
	for name, want := range map[string][4]string{
		"a1.medium":  {"940m", "1392Mi", "8", "10"},
		"a1.large":   {"1930m", "3055Mi", "29", "9"},
		"a1.xlarge":  {"3920m", "6525Mi", "58", "18"},
		"a1.4xlarge": {"15890m", "27322Mi", "234", "54"},
		"c1.medium":  {"1930m", "1122Mi", "12", ""},
		"c1.xlarge":  {"7910m", "5637Mi", "58", ""},
		"c3.8xlarge": {"31850m", "53903Mi", "234", ""},
		"c4.8xlarge": {"35840m", "53903Mi", "234", ""},
		"c5.large":   {"1930m", "3114Mi", "29", "9"},
		"c5.xlarge":  {"3920m", "6584Mi", "58", "18"},
		"c5.4xlarge": {"15890m", "27381Mi", "234", "54"},
	} {
		it, ok := byName[name]
		if !ok {
			t.Errorf("%s not in aws-data", name)
			continue
		}
		got, err := it.Allocatable(AllocatableOptions{AMIFamily: "AL2"})
		if err != nil {
			t.Fatal(err)
		}
		wantList := map[corev1.ResourceName]string{"cpu": want[0], "memory": want[1], "pods": want[2], "ephemeral-storage": "17Gi"}
		if want[3] != "" {
			wantList[ResourcePodENI] = want[3]
		}
		checkList(t, name, got, wantList)
	}
}
