package catalog

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

func TestSupportsNodeClass(t *testing.T) {
	m7i, m5, p4d := builtinType(t, "m7i.large"), builtinType(t, "m5.large"), builtinType(t, "p4d.24xlarge")
	if !m7i.NestedVirtualization || m5.NestedVirtualization || p4d.NetworkCards != 4 || p4d.EFA != 4 {
		t.Fatalf("parsed: m7i nested %v, m5 nested %v, p4d cards %d efa %d", m7i.NestedVirtualization, m5.NestedVirtualization, p4d.NetworkCards, p4d.EFA)
	}
	nested := &apis.EC2NodeClass{Spec: apis.EC2NodeClassSpec{CPUOptions: &apis.CPUOptions{NestedVirtualization: ptr("enabled")}}}
	if !m7i.SupportsNodeClass(nested) || m5.SupportsNodeClass(nested) || !m5.SupportsNodeClass(nil) {
		t.Error("nested virtualization filter")
	}
	nested.Spec.CPUOptions.NestedVirtualization = ptr("disabled")
	if !m5.SupportsNodeClass(nested) {
		t.Error("disabled nested virtualization filters types")
	}
	tracking := &apis.EC2NodeClass{Spec: apis.EC2NodeClassSpec{ConnectionTracking: &apis.ConnectionTracking{UDPTimeout: ptr[int32](30)}}}
	if xen := (&InstanceType{Name: "t2.micro", Hypervisor: "xen", MaxENIs: 2}); xen.SupportsNodeClass(tracking) || !m5.SupportsNodeClass(tracking) {
		t.Error("connection tracking needs a Nitro type")
	}
	ni := func(card, dev int32, typ string) *apis.NetworkInterface {
		return &apis.NetworkInterface{NetworkCardIndex: &card, DeviceIndex: &dev, InterfaceType: typ}
	}
	efa := &apis.EC2NodeClass{Spec: apis.EC2NodeClassSpec{NetworkInterfaces: []*apis.NetworkInterface{
		ni(0, 0, apis.InterfaceTypeInterface), ni(1, 0, apis.InterfaceTypeEFAOnly), ni(3, 0, apis.InterfaceTypeEFAOnly),
	}}}
	if !p4d.SupportsNodeClass(efa) || m5.SupportsNodeClass(efa) {
		t.Error("EFA-only interfaces on cards 1 and 3 fit p4d.24xlarge only")
	}
	efa.Spec.NetworkInterfaces = append(efa.Spec.NetworkInterfaces, ni(0, 1, apis.InterfaceTypeEFAOnly), ni(2, 0, apis.InterfaceTypeEFAOnly), ni(2, 1, apis.InterfaceTypeEFAOnly))
	if p4d.SupportsNodeClass(efa) {
		t.Error("5 EFA-only interfaces fit a type with 4")
	}
}

func TestNodeClassAllocatable(t *testing.T) {
	m5 := builtinType(t, "m5.large") // 3 ENIs x 10 IPv4
	card0EFA := &apis.EC2NodeClass{Spec: apis.EC2NodeClassSpec{NetworkInterfaces: []*apis.NetworkInterface{
		{NetworkCardIndex: ptr[int32](0), DeviceIndex: ptr[int32](0), InterfaceType: apis.InterfaceTypeInterface},
		{NetworkCardIndex: ptr[int32](0), DeviceIndex: ptr[int32](1), InterfaceType: apis.InterfaceTypeEFAOnly},
	}}}
	if got, plain := m5.MaxPods(OptionsForNodeClass(card0EFA)), m5.MaxPods(OptionsForNodeClass(nil)); plain != 29 || got != 20 {
		t.Errorf("max pods %d (plain %d), want 20: an EFA-only interface on card 0 takes an ENI from the VPC CNI", got, plain)
	}

	// Karpenter (since v1.9) counts only evictionHard in allocatable:
	// evictionSoft is a warning threshold, and the kubelet does not reserve it.
	soft := &apis.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "soft"}, Spec: apis.EC2NodeClassSpec{Kubelet: &apis.KubeletConfiguration{
		EvictionSoft:            map[string]string{"memory.available": "1Gi"},
		EvictionSoftGracePeriod: map[string]metav1.Duration{"memory.available": {Duration: 60e9}},
	}}}
	withSoft, err := m5.Allocatable(OptionsForNodeClass(soft))
	if err != nil {
		t.Fatal(err)
	}
	without, err := m5.Allocatable(OptionsForNodeClass(nil))
	if err != nil {
		t.Fatal(err)
	}
	if withSoft.Memory().Cmp(*without.Memory()) != 0 {
		t.Errorf("evictionSoft changed allocatable memory: %s vs %s", withSoft.Memory(), without.Memory())
	}
}

// The os and windows-build labels of a type come from its class's AMI
// family, and Windows families run on amd64 only (Karpenter-AWS
// instancetype computeRequirements and getOS).
func TestNodeClassOSLabels(t *testing.T) {
	m5, m6g := builtinType(t, "m5.large"), builtinType(t, "m6g.large")
	class := func(family, alias string) *apis.EC2NodeClass {
		nc := &apis.EC2NodeClass{}
		if family != "" {
			nc.Spec.AMIFamily = ptr(family)
		}
		if alias != "" {
			nc.Spec.AMISelectorTerms = []apis.AMISelectorTerm{{Alias: alias}}
		}
		return nc
	}
	cases := []struct {
		name       string
		nc         *apis.EC2NodeClass
		os, build  string
		runsOnArm6 bool
	}{
		{"no class", nil, "linux", "", true},
		{"al2023 alias", class("", "al2023@latest"), "linux", "", true},
		{"bottlerocket alias", class("", "bottlerocket@latest"), "linux", "", true},
		{"windows2019 alias", class("", "windows2019@latest"), "windows", "10.0.17763", false},
		{"windows2022 alias", class("", "windows2022@latest"), "windows", "10.0.20348", false},
		{"windows2025 alias", class("", "windows2025@latest"), "windows", "10.0.26100", false},
		{"amiFamily Windows2022", class(apis.AMIFamilyWindows2022, ""), "windows", "10.0.20348", false},
		// Karpenter's AMIFamily(): spec.amiFamily wins over the alias.
		{"Custom with a windows alias", class(apis.AMIFamilyCustom, "windows2022@latest"), "linux", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := m5.LabelsForNodeClass(tc.nc)
			build, has := l[LabelWindowsBuild]
			if l[LabelOS] != tc.os || build != tc.build || has != (tc.build != "") {
				t.Errorf("m5.large: os %q build %q (set %v), want %q %q", l[LabelOS], build, has, tc.os, tc.build)
			}
			if l[LabelInstanceType] != "m5.large" || l[LabelArch] != "amd64" {
				t.Errorf("type labels lost: %v", l)
			}
			nl := m5.NodeLabelsForNodeClass(m5.Offerings[0], tc.nc)
			if nl[LabelOS] != tc.os || nl[LabelWindowsBuild] != tc.build || nl[LabelTopologyZone] != m5.Offerings[0].Zone {
				t.Errorf("m5.large node labels: os %q build %q zone %q", nl[LabelOS], nl[LabelWindowsBuild], nl[LabelTopologyZone])
			}
			if got := m6g.SupportsNodeClass(tc.nc); got != tc.runsOnArm6 {
				t.Errorf("arm64 m6g.large supports the class: %v, want %v", got, tc.runsOnArm6)
			}
			if !m5.SupportsNodeClass(tc.nc) {
				t.Error("amd64 m5.large must support every family")
			}
		})
	}
	if m5.Labels[LabelOS] != "linux" || m5.Labels[LabelWindowsBuild] != "" {
		t.Errorf("a Windows class changed the shared type's labels: %v", m5.Labels)
	}
}
