package catalog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/apis"
)

func TestBuiltinRegions(t *testing.T) {
	if got := strings.Join(BuiltinRegions(), ","); got != "us-east-1,us-west-2" {
		t.Fatalf("BuiltinRegions = %s", got)
	}
	if _, err := Builtin("eu-west-1"); err == nil || !strings.Contains(err.Error(), "us-west-2") {
		t.Fatalf("unknown region: err = %v, want one listing the known regions", err)
	}
	for region, zones := range map[string]int{"us-east-1": 6, "us-west-2": 4} {
		c, err := Builtin(region)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Zones) != zones {
			t.Errorf("%s: %d zones, want %d", region, len(c.Zones), zones)
		}
		if n := len(c.Types); n < 110 || n > 130 {
			t.Errorf("%s: %d types, want about 120", region, n)
		}
		wantOD := PriceSourceEmbedded
		if region == "us-west-2" {
			wantOD = "embedded (us-east-1 list price)"
		}
		for _, it := range c.Types {
			if len(it.Offerings) == 0 {
				t.Errorf("%s %s: no offerings", region, it.Name)
			}
			for _, o := range it.Offerings {
				if !strings.HasPrefix(o.ZoneID, map[string]string{"us-east-1": "use1-az", "us-west-2": "usw2-az"}[region]) {
					t.Errorf("%s %s: zone %s has ID %q", region, it.Name, o.Zone, o.ZoneID)
				}
				if !o.Available || o.Price <= 0 {
					t.Errorf("%s %s %s %s: available=%v price=%v", region, it.Name, o.Zone, o.CapacityType, o.Available, o.Price)
				}
				switch o.CapacityType {
				case CapacityTypeOnDemand:
					if o.PriceSource != wantOD {
						t.Errorf("%s %s: on-demand source %q, want %q", region, it.Name, o.PriceSource, wantOD)
					}
				case CapacityTypeSpot:
					if o.PriceSource != PriceSourceDerivedSpot {
						t.Errorf("%s %s: spot source %q", region, it.Name, o.PriceSource)
					}
				}
			}
		}
		m5, ok := c.Get("m5.large")
		if !ok {
			t.Fatalf("%s: no m5.large", region)
		}
		od, ok := m5.CheapestOffering(func(o Offering) bool { return o.CapacityType == CapacityTypeOnDemand })
		if !ok || od.Price != 0.096 {
			t.Errorf("%s m5.large on-demand = %+v, want $0.096", region, od)
		}
	}
}

func TestTypeLabels(t *testing.T) {
	c, err := Builtin("us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]map[string]string{
		"g5.xlarge": {
			LabelInstanceType: "g5.xlarge", LabelArch: "amd64", LabelOS: "linux", LabelTopologyRegion: "us-west-2",
			LabelInstanceCategory: "g", LabelInstanceFamily: "g5", LabelInstanceGeneration: "5", LabelInstanceSize: "xlarge",
			LabelInstanceCPU: "4", LabelInstanceCPUManufacturer: "amd", LabelInstanceMemory: "16384",
			LabelInstanceGPUName: "a10g", LabelInstanceGPUManufacturer: "nvidia", LabelInstanceGPUCount: "1",
			LabelInstanceGPUMemory: "22888", LabelInstanceLocalNVMe: "250", LabelInstanceHypervisor: "nitro",
			LabelInstanceEncryptionInTransit: "true", LabelInstanceNetworkBandwidth: "2500", LabelInstanceEBSBandwidth: "3500",
			LabelInstanceCPUSustainedClockMhz: "3300",
		},
		"m6g.xlarge": {
			LabelInstanceType: "m6g.xlarge", LabelArch: "arm64", LabelOS: "linux", LabelTopologyRegion: "us-west-2",
			LabelInstanceCategory: "m", LabelInstanceFamily: "m6g", LabelInstanceGeneration: "6", LabelInstanceSize: "xlarge",
			LabelInstanceCPU: "4", LabelInstanceCPUManufacturer: "aws", LabelInstanceMemory: "16384",
			LabelInstanceHypervisor: "nitro", LabelInstanceEncryptionInTransit: "false",
		},
		"inf2.xlarge": {
			LabelInstanceAcceleratorName: "inferentia2", LabelInstanceAcceleratorManufacturer: "aws", LabelInstanceAcceleratorCount: "1",
		},
	}
	for name, want := range cases {
		it, ok := c.Get(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		for k, v := range want {
			if it.Labels[k] != v {
				t.Errorf("%s: %s = %q, want %q", name, k, it.Labels[k], v)
			}
		}
		for k := range it.Labels {
			if !TypeLevelLabels[k] {
				t.Errorf("%s: label %s is not a type-level label", name, k)
			}
		}
		o := it.Offerings[0]
		nl := it.NodeLabels(o)
		if nl[LabelTopologyZone] != o.Zone || nl[LabelTopologyZoneID] != o.ZoneID || nl[LabelCapacityType] != o.CapacityType {
			t.Errorf("%s: node labels %v lack the offering's zone/zone-id/capacity-type", name, nl)
		}
		if _, shared := it.Labels[LabelTopologyZone]; shared {
			t.Errorf("%s: NodeLabels wrote into the shared type labels", name)
		}
	}
	m6g, _ := c.Get("m6g.xlarge")
	if _, ok := m6g.Labels[LabelInstanceGPUName]; ok {
		t.Errorf("m6g.xlarge has a GPU label")
	}
}

func TestDerivedSpotPrice(t *testing.T) {
	seen := map[float64]bool{}
	for _, zone := range []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"} {
		p := DerivedSpotPrice("m5.large", zone, 0.096)
		if p != DerivedSpotPrice("m5.large", zone, 0.096) {
			t.Fatal("derived spot price is not deterministic")
		}
		if p < 0.096*0.25-1e-5 || p > 0.096*0.45+1e-5 {
			t.Errorf("%s: spot %v outside 55-75%% off $0.096", zone, p)
		}
		seen[p] = true
	}
	if len(seen) < 2 {
		t.Errorf("derived spot prices do not vary by zone: %v", seen)
	}
}

func TestDefaultZoneID(t *testing.T) {
	for zone, want := range map[string]string{
		"us-east-1a": "use1-az1", "us-east-1f": "use1-az6", "us-west-2d": "usw2-az4",
		"eu-central-1b": "euc1-az2", "ap-southeast-2c": "apse2-az3", "bogus": "",
	} {
		if got := DefaultZoneID(zone); got != want {
			t.Errorf("DefaultZoneID(%s) = %q, want %q", zone, got, want)
		}
	}
}

func s(v string) *string { return &v }

func testInfo(name, arch string, vcpu int32, mib int64) ec2types.InstanceTypeInfo {
	return ec2types.InstanceTypeInfo{
		InstanceType:          ec2types.InstanceType(name),
		VCpuInfo:              &ec2types.VCpuInfo{DefaultVCpus: &vcpu},
		MemoryInfo:            &ec2types.MemoryInfo{SizeInMiB: &mib},
		ProcessorInfo:         &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureType(arch)}, Manufacturer: s("Intel")},
		SupportedUsageClasses: []ec2types.UsageClassType{"on-demand", "spot"},
		Hypervisor:            "nitro",
		NetworkInfo: &ec2types.NetworkInfo{
			MaximumNetworkInterfaces: ptr[int32](3), Ipv4AddressesPerInterface: ptr[int32](10), DefaultNetworkCardIndex: ptr[int32](0),
			NetworkCards: []ec2types.NetworkCardInfo{{NetworkCardIndex: ptr[int32](0), MaximumNetworkInterfaces: ptr[int32](3), BaselineBandwidthInGbps: ptr(0.75)}},
		},
	}
}

func TestFromEC2(t *testing.T) {
	infos := []ec2types.InstanceTypeInfo{
		testInfo("m5.large", "x86_64", 2, 8192),
		testInfo("m5.xlarge", "x86_64", 4, 16384),
		testInfo("mac1.metal", "x86_64_mac", 12, 32768), // no Kubernetes architecture: left out
		testInfo("m5.2xlarge", "x86_64", 8, 32768),      // not offered in the region: left out
	}
	offer := func(typ, zone string) ec2types.InstanceTypeOffering {
		return ec2types.InstanceTypeOffering{InstanceType: ec2types.InstanceType(typ), Location: s(zone), LocationType: ec2types.LocationTypeAvailabilityZone}
	}
	c, err := FromEC2(EC2Input{
		Region:        "us-west-2",
		InstanceTypes: infos,
		Offerings: []ec2types.InstanceTypeOffering{
			offer("m5.large", "us-west-2a"), offer("m5.large", "us-west-2b"), offer("m5.xlarge", "us-west-2a"),
			offer("mac1.metal", "us-west-2a"), offer("m5.large", "us-west-2-lax-1a"),
		},
		Zones:    map[string]string{"us-west-2a": "usw2-az2", "us-west-2b": "usw2-az1"},
		OnDemand: map[string]float64{"m5.large": 0.096}, // m5.xlarge has no price
		Spot:     map[SpotKey]float64{{"m5.large", "us-west-2a"}: 0.04},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Names(), ","); got != "m5.large,m5.xlarge" {
		t.Fatalf("types = %s", got)
	}
	m5, _ := c.Get("m5.large")
	if len(m5.Offerings) != 4 {
		t.Fatalf("m5.large offerings = %+v, want 2 zones x 2 capacity types (the Local Zone is not listed)", m5.Offerings)
	}
	if o, _ := m5.Offering("us-west-2a", CapacityTypeSpot); o.Price != 0.04 || !o.Available || o.PriceSource != PriceSourcePricingAPI || o.ZoneID != "usw2-az2" {
		t.Errorf("spot 2a = %+v", o)
	}
	if o, _ := m5.Offering("us-west-2b", CapacityTypeSpot); o.Available {
		t.Errorf("spot 2b without a feed price and without DeriveMissingSpot should be unavailable: %+v", o)
	}
	if o, _ := m5.Offering("us-west-2b", CapacityTypeOnDemand); o.Price != 0.096 || !o.Available {
		t.Errorf("on-demand 2b = %+v", o)
	}
	xl, _ := c.Get("m5.xlarge")
	if len(xl.AvailableOfferings()) != 0 {
		t.Errorf("m5.xlarge has no on-demand price, so nothing is available: %+v", xl.Offerings)
	}
	if m5.Labels[LabelInstanceNetworkBandwidth] != "750" || m5.Labels[LabelInstanceCPUManufacturer] != "intel" {
		t.Errorf("m5.large labels = %v", m5.Labels)
	}
	if m5.ENILimitedPods(0) != 29 {
		t.Errorf("m5.large ENI pods = %d", m5.ENILimitedPods(0))
	}

	// Without a spot feed every spot price is derived and says so.
	c2, err := FromEC2(EC2Input{Region: "us-west-2", InstanceTypes: infos[:1], Offerings: []ec2types.InstanceTypeOffering{offer("m5.large", "us-west-2a")},
		OnDemand: map[string]float64{"m5.large": 0.096}})
	if err != nil {
		t.Fatal(err)
	}
	m5b, _ := c2.Get("m5.large")
	if o, _ := m5b.Offering("us-west-2a", CapacityTypeSpot); !o.Available || o.PriceSource != PriceSourceDerivedSpot || o.Price != DerivedSpotPrice("m5.large", "us-west-2a", 0.096) {
		t.Errorf("derived spot = %+v", o)
	}
	if c2.Zones[0].ID != "usw2-az1" {
		t.Errorf("zones without IDs get the default ID: %+v", c2.Zones)
	}

	if _, err := FromEC2(EC2Input{Region: "us-west-2", InstanceTypes: []ec2types.InstanceTypeInfo{{InstanceType: "x.large"}}}); err == nil {
		t.Error("an entry without VCpuInfo was accepted")
	}
}

func TestCatalogFilterAndUnavailable(t *testing.T) {
	c, err := Builtin("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	arm := c.Filter(func(it *InstanceType) bool { return it.Architecture == "arm64" })
	if len(arm.Types) == 0 || len(arm.Types) >= len(c.Types) {
		t.Fatalf("arm64 filter kept %d of %d", len(arm.Types), len(c.Types))
	}
	if _, ok := arm.Get("m5.large"); ok {
		t.Error("filtered catalog still finds m5.large")
	}
	ice := c.WithUnavailable(func(typ, zone, ct string) bool {
		return typ == "m5.large" && zone == "us-east-1a" && ct == CapacityTypeSpot
	})
	got, _ := ice.Get("m5.large")
	if o, _ := got.Offering("us-east-1a", CapacityTypeSpot); o.Available {
		t.Error("ICE'd offering still available")
	}
	orig, _ := c.Get("m5.large")
	if o, _ := orig.Offering("us-east-1a", CapacityTypeSpot); !o.Available {
		t.Error("WithUnavailable changed the original catalog")
	}
	a, _ := ice.Get("m6i.large")
	b, _ := c.Get("m6i.large")
	if a != b {
		t.Error("unaffected types should be shared")
	}
	if _, err := New("us-east-1", c.Zones, []*InstanceType{orig, orig}); err == nil {
		t.Error("duplicate types accepted")
	}
}

func TestParseOnDemandPriceList(t *testing.T) {
	doc := func(typ, os, sw, capStatus, price string) string {
		return `{"product":{"productFamily":"Compute Instance","attributes":{"instanceType":"` + typ + `","operatingSystem":"` + os +
			`","preInstalledSw":"` + sw + `","capacitystatus":"` + capStatus + `","tenancy":"Shared","regionCode":"us-east-1","licenseModel":"No License required"}},` +
			`"terms":{"OnDemand":{"ABC.JRTCKXETXF":{"priceDimensions":{"ABC.JRTCKXETXF.6YS6EN2CT7":{"unit":"Hrs","pricePerUnit":{"USD":"` + price + `"}}}}}}}`
	}
	got, err := ParseOnDemandPriceList([]string{
		doc("m5.large", "Linux", "NA", "Used", "0.0960000000"),
		doc("m5.large", "Windows", "NA", "Used", "0.1880000000"),
		doc("m5.large", "Linux", "SQL Std", "Used", "0.5"),
		doc("m5.large", "Linux", "NA", "UnusedCapacityReservation", "0.096"),
		doc("c5.large", "Linux", "NA", "Used", "0.0850000000"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["m5.large"] != 0.096 || got["c5.large"] != 0.085 {
		t.Fatalf("prices = %v", got)
	}
	if _, err := ParseOnDemandPriceList([]string{doc("m5.large", "Linux", "NA", "Used", "cheap")}); err == nil {
		t.Error("bad price accepted")
	}
	if _, err := ParseOnDemandPriceList([]string{"{"}); err == nil {
		t.Error("bad JSON accepted")
	}
}

func TestSpotPricesFromHistory(t *testing.T) {
	t0 := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	got, err := SpotPricesFromHistory([]ec2types.SpotPrice{
		{InstanceType: "m5.large", AvailabilityZone: s("us-east-1a"), SpotPrice: s("0.0400"), Timestamp: &t1},
		{InstanceType: "m5.large", AvailabilityZone: s("us-east-1a"), SpotPrice: s("0.0300"), Timestamp: &t0},
		{InstanceType: "m5.large", AvailabilityZone: s("us-east-1b"), SpotPrice: s("0.0350"), Timestamp: &t0},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got[SpotKey{"m5.large", "us-east-1a"}] != 0.04 || got[SpotKey{"m5.large", "us-east-1b"}] != 0.035 {
		t.Fatalf("spot = %v", got)
	}
	if _, err := SpotPricesFromHistory([]ec2types.SpotPrice{{InstanceType: "m5.large", AvailabilityZone: s("a"), SpotPrice: s("x")}}); err == nil {
		t.Error("bad spot price accepted")
	}
}

func TestOptionsForNodeClass(t *testing.T) {
	fam := apis.AMIFamilyBottlerocket
	raid := apis.InstanceStorePolicyRAID0
	nc := &apis.EC2NodeClass{Spec: apis.EC2NodeClassSpec{
		AMIFamily: &fam,
		Kubelet:   &apis.KubeletConfiguration{MaxPods: ptr[int32](50), EvictionHard: map[string]string{"memory.available": "5%"}},
		BlockDeviceMappings: []*apis.BlockDeviceMapping{
			{DeviceName: s("/dev/xvda"), EBS: &apis.BlockDevice{VolumeSize: ptr(resource.MustParse("4Gi"))}},
			{DeviceName: s("/dev/xvdb"), EBS: &apis.BlockDevice{VolumeSize: ptr(resource.MustParse("80Gi"))}},
		},
		InstanceStorePolicy: &raid,
	}}
	o := OptionsForNodeClass(nc)
	if o.AMIFamily != "Bottlerocket" || *o.Kubelet.MaxPods != 50 || o.Kubelet.EvictionHard["memory.available"] != "5%" || !o.InstanceStoreRAID0 {
		t.Errorf("options = %+v", o)
	}
	if o.RootVolumeSize == nil || o.RootVolumeSize.String() != "80Gi" {
		t.Errorf("Bottlerocket ephemeral volume is /dev/xvdb: got %v", o.RootVolumeSize)
	}
	nc.Spec.BlockDeviceMappings[0].RootVolume = true
	if o := OptionsForNodeClass(nc); o.RootVolumeSize.String() != "4Gi" {
		t.Errorf("rootVolume mapping wins: got %v", o.RootVolumeSize)
	}
	if o := OptionsForNodeClass(nil); o.RootVolumeSize != nil || o.AMIFamily != "" {
		t.Errorf("nil node class: %+v", o)
	}
}

// sharedDir finds ../shared/aws-data next to the repository root (tests
// run in the package's directory, two below the root).
func sharedDir(t testing.TB) string {
	t.Helper()
	d := filepath.Join("..", "..", "..", "shared", "aws-data")
	if _, err := os.Stat(filepath.Join(d, "instance-types.json.gz")); err != nil {
		t.Skipf("../shared/aws-data not present (%v)", err)
	}
	return d
}

func TestLoadDirSharedData(t *testing.T) {
	dir := sharedDir(t)
	east, err := LoadDir(dir, "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(east.Types) < 800 || len(east.Zones) != 6 {
		t.Fatalf("us-east-1: %d types, %d zones", len(east.Types), len(east.Zones))
	}
	m5, ok := east.Get("m5.large")
	if !ok {
		t.Fatal("no m5.large")
	}
	if o, _ := m5.CheapestOffering(func(o Offering) bool { return o.CapacityType == CapacityTypeOnDemand }); o.Price != 0.096 || o.PriceSource != PriceSourceAWSData {
		t.Errorf("m5.large on-demand = %+v", o)
	}
	// The embedded catalog must agree with the data it was generated from.
	b, err := Builtin("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, bt := range b.Types {
		dt, ok := east.Get(bt.Name)
		if !ok {
			t.Errorf("%s in builtin but not in aws-data", bt.Name)
			continue
		}
		if len(bt.Offerings) != len(dt.Offerings) || bt.MemoryMiB != dt.MemoryMiB || bt.VCPU != dt.VCPU {
			t.Errorf("%s: builtin differs from aws-data", bt.Name)
		}
	}
	west, err := LoadDir(dir, "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	if len(west.Zones) != 4 {
		t.Errorf("us-west-2 zones = %v", west.Zones)
	}
	if it, ok := west.Get("c7g.large"); ok {
		if o, _ := it.CheapestOffering(func(o Offering) bool { return o.CapacityType == CapacityTypeOnDemand }); o.PriceSource != "aws-data (us-east-1 list price)" {
			t.Errorf("us-west-2 price source = %q", o.PriceSource)
		}
	}
	if metal, ok := east.Get("m5.metal"); ok {
		if v, has := metal.Labels[LabelInstanceHypervisor]; !has || v != "" || !metal.BareMetal {
			t.Errorf("m5.metal: hypervisor label %q (present %v), bare metal %v; Karpenter labels it with an empty value", v, has, metal.BareMetal)
		}
	}
	if dl, ok := east.Get("dl2q.24xlarge"); ok {
		a, err := dl.Allocatable(AllocatableOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, neuron := a[ResourceAWSNeuron]; neuron || dl.Labels[LabelInstanceAcceleratorName] == "" || dl.Labels[LabelInstanceAcceleratorCount] == "" {
			t.Errorf("dl2q.24xlarge: Qualcomm accelerators are labelled but are not Neuron devices: labels %v, allocatable %v", dl.Labels, a)
		}
	}
	var gpus, arm int
	for _, it := range east.Types {
		if it.GPUCount() > 0 {
			gpus++
		}
		if it.Architecture == "arm64" {
			arm++
		}
		if _, err := it.Allocatable(AllocatableOptions{}); err != nil {
			t.Errorf("%s: %v", it.Name, err)
		}
	}
	if gpus == 0 || arm == 0 {
		t.Errorf("gpu types %d, arm64 types %d", gpus, arm)
	}
	if _, err := LoadDir(dir, "eu-west-9"); err == nil {
		t.Error("a region without offerings loaded")
	}
}

func TestReadEC2DataEmbedded(t *testing.T) {
	in, err := ReadEC2Data(EmbeddedData(), "us-west-2", "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(in.InstanceTypes) != len(in.OnDemand) || len(in.Offerings) == 0 || len(in.Zones) != 4 || in.OnDemandSource != "test (us-east-1 list price)" {
		t.Fatalf("input: %d types, %d prices, %d offerings, zones %v, source %q", len(in.InstanceTypes), len(in.OnDemand), len(in.Offerings), in.Zones, in.OnDemandSource)
	}
	for _, info := range in.InstanceTypes {
		if info.VCpuInfo == nil || info.NetworkInfo == nil || info.ProcessorInfo == nil {
			t.Fatalf("%s: EC2 shape not decoded", info.InstanceType)
		}
	}
}
