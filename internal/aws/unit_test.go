package aws

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// panicEC2 satisfies EC2API for tests that must not call EC2 at all.
type panicEC2 struct{ EC2API }

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

func newTestProvider(t *testing.T, clock *fakeClock) *Provider {
	t.Helper()
	p, err := New(Options{ClusterName: "demo", Region: "us-west-2", Owner: "owner", Now: clock.Now, MaxInstanceTypes: 3, Logger: slog.New(slog.DiscardHandler)}, Clients{EC2: panicEC2{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func itype(name, arch string, prices map[string]float64) *catalog.InstanceType {
	it := &catalog.InstanceType{Name: name, Architecture: arch}
	for key, price := range prices {
		zone, ct, _ := strings.Cut(key, "/")
		it.Offerings = append(it.Offerings, catalog.Offering{Zone: zone, CapacityType: ct, Price: price, Available: true})
	}
	return it
}

func claim(reqs ...apis.NodeSelectorRequirementWithMinValues) *apis.NodeClaim {
	return &apis.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-abc12", Labels: map[string]string{apis.NodePoolLabelKey: "default"}},
		Spec:       apis.NodeClaimSpec{Requirements: reqs},
	}
}

func req(key string, op corev1.NodeSelectorOperator, vals ...string) apis.NodeSelectorRequirementWithMinValues {
	return apis.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: vals}
}

var (
	zonalAB = map[string]Subnet{
		"us-west-2a": {ID: "subnet-a", Zone: "us-west-2a", AvailableIPs: 10},
		"us-west-2b": {ID: "subnet-b", Zone: "us-west-2b", AvailableIPs: 10},
	}
	amisBoth = []AMI{
		{ID: "ami-new-x86", Architecture: "amd64", Variants: []string{VariantStandard}, CreationDate: time.Unix(200, 0)},
		{ID: "ami-arm", Architecture: "arm64", Variants: []string{VariantStandard}, CreationDate: time.Unix(150, 0)},
		{ID: "ami-old-x86", Architecture: "amd64", Variants: []string{VariantStandard}, CreationDate: time.Unix(100, 0)},
	}
)

func optionNames(opts []option) []string {
	var out []string
	for _, o := range opts {
		out = append(out, o.it.Name)
	}
	return out
}

func TestPlanChoosesSpotCheapestFirstAndSkipsICE(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	p := newTestProvider(t, clock)
	types := []*catalog.InstanceType{
		itype("m5.xlarge", "amd64", map[string]float64{"us-west-2a/spot": 0.08, "us-west-2a/on-demand": 0.192}),
		itype("m5.large", "amd64", map[string]float64{"us-west-2a/spot": 0.04, "us-west-2b/spot": 0.03, "us-west-2a/on-demand": 0.096}),
		itype("m6g.large", "arm64", map[string]float64{"us-west-2b/spot": 0.035, "us-west-2c/spot": 0.001}),
		itype("c5.large", "amd64", map[string]float64{"us-west-2a/spot": 0.05}),
		itype("x1.large", "amd64", map[string]float64{"us-west-2a/spot": 0.07}),
	}
	ct, opts := p.plan(claim(), types, zonalAB, amisBoth, true)
	if ct != "spot" {
		t.Fatalf("capacity type %q, want spot", ct)
	}
	// Cheapest first, truncated to MaxInstanceTypes=3; us-west-2c has no subnet.
	if got := strings.Join(optionNames(opts), ","); got != "m5.large,m6g.large,c5.large" {
		t.Fatalf("options %s", got)
	}
	if opts[0].ami.ID != "ami-new-x86" || opts[1].ami.ID != "ami-arm" {
		t.Errorf("newest compatible AMI not chosen: %s %s", opts[0].ami.ID, opts[1].ami.ID)
	}
	if z := opts[0].offerings[0].Zone; z != "us-west-2b" {
		t.Errorf("cheapest zone first: got %s", z)
	}
	if err := p.ice.MarkUnavailable(context.Background(), OfferingKey{InstanceType: "m5.large", Zone: "us-west-2b", CapacityType: "spot"}, "InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	_, opts = p.plan(claim(), types, zonalAB, amisBoth, true)
	if got := strings.Join(optionNames(opts), ","); got != "m6g.large,m5.large,c5.large" {
		t.Fatalf("after ICE: options %s", got)
	}
	if len(opts[1].offerings) != 1 || opts[1].offerings[0].Zone != "us-west-2a" {
		t.Errorf("ICE'd offering still planned: %+v", opts[1].offerings)
	}
	// Spot not allowed: on-demand only.
	ct, opts = p.plan(claim(req(labelCapacityType, corev1.NodeSelectorOpIn, "on-demand")), types, zonalAB, amisBoth, true)
	if ct != "on-demand" || strings.Join(optionNames(opts), ",") != "m5.large,m5.xlarge" {
		t.Errorf("on-demand plan: %s %v", ct, optionNames(opts))
	}
	// After the ICE TTL the offering is back.
	clock.Advance(3*time.Minute + time.Second)
	_, opts = p.plan(claim(), types, zonalAB, amisBoth, true)
	if opts[0].offerings[0].Zone != "us-west-2b" {
		t.Errorf("ICE entry did not expire")
	}
}

func TestPlanHonoursRequirementsAndFallsBackToOnDemand(t *testing.T) {
	p := newTestProvider(t, &fakeClock{t: time.Unix(1000, 0)})
	types := []*catalog.InstanceType{
		itype("m5.large", "amd64", map[string]float64{"us-west-2a/spot": 0.04, "us-west-2a/on-demand": 0.096, "us-west-2b/on-demand": 0.096}),
	}
	c := claim(req(labelZone, corev1.NodeSelectorOpNotIn, "us-west-2b"), req(labelInstanceType, corev1.NodeSelectorOpIn, "m5.large", "m5.xlarge"))
	for _, k := range []OfferingKey{{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "spot"}} {
		_ = p.ice.MarkUnavailable(context.Background(), k, "test")
	}
	ct, opts := p.plan(c, types, zonalAB, amisBoth, true)
	if ct != "on-demand" || len(opts) != 1 || len(opts[0].offerings) != 1 || opts[0].offerings[0].Zone != "us-west-2a" {
		t.Fatalf("want on-demand m5.large in us-west-2a only, got %s %+v", ct, opts)
	}
	// No AMI for the architecture: nothing to launch.
	if _, opts := p.plan(claim(), []*catalog.InstanceType{itype("m6g.large", "arm64", map[string]float64{"us-west-2a/spot": 1})}, zonalAB, amisBoth[:1], true); len(opts) != 0 {
		t.Errorf("arm64 type planned without an arm64 AMI")
	}
}

func TestAMICompatibility(t *testing.T) {
	gpu := &catalog.InstanceType{Name: "g5.xlarge", Architecture: "amd64", GPUs: []catalog.GPU{{Manufacturer: "NVIDIA", Count: 1}}}
	inf := &catalog.InstanceType{Name: "inf2.xlarge", Architecture: "amd64", NeuronDevices: 1}
	std := &catalog.InstanceType{Name: "m5.large", Architecture: "amd64"}
	nvidia := AMI{Architecture: "amd64", Variants: []string{VariantNvidia}}
	standard := AMI{Architecture: "amd64", Variants: []string{VariantStandard, VariantNeuron}}
	custom := AMI{Architecture: "amd64"}
	if !nvidia.Compatible(gpu) || nvidia.Compatible(std) || standard.Compatible(gpu) || !standard.Compatible(inf) || !custom.Compatible(gpu) {
		t.Error("variant compatibility wrong")
	}
}

func TestNodeLabelsAndTaints(t *testing.T) {
	c := claim(req("topology.kubernetes.io/zone", corev1.NodeSelectorOpIn, "us-west-2a"),
		req("node.kubernetes.io/instance-type", corev1.NodeSelectorOpIn, "m5.large", "m5.xlarge"),
		req("kubernetes.io/arch", corev1.NodeSelectorOpIn, "amd64"),
		req("team", corev1.NodeSelectorOpIn, "payments"))
	c.Labels["node-role.kubernetes.io/worker"] = "true" // kubelet may not self-set this
	c.Labels["example.k8s.io/x"] = "y"
	got := NodeLabels(c, "spot")
	want := map[string]string{
		"karpenter.sh/nodepool": "default", "karpenter.sh/capacity-type": "spot", "team": "payments",
		"topology.kubernetes.io/zone": "us-west-2a", "kubernetes.io/arch": "amd64",
	}
	if len(got) != len(want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s=%q, want %q", k, got[k], v)
		}
	}
	c.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
	c.Spec.StartupTaints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}, {Key: "cilium", Effect: corev1.TaintEffectNoExecute}}
	taints := RegisterTaints(c)
	if len(taints) != 3 || taints[2].Key != apis.UnregisteredTaintKey || taints[2].Effect != corev1.TaintEffectNoExecute {
		t.Errorf("register taints %v", taints)
	}
}

func TestClientTokenAndNames(t *testing.T) {
	a, b := ClientToken("demo", "default-abc", 0), ClientToken("demo", "default-abc", 0)
	if a != b || len(a) > 64 || a == ClientToken("demo", "default-abc", 1) || a == ClientToken("other", "default-abc", 0) {
		t.Errorf("client token not deterministic per (cluster, claim, attempt): %s", a)
	}
	if got := InstanceProfileName("demo", "arn:aws:iam::1:role/path/KarpenterNodeRole-demo"); got != "nodewright-demo-KarpenterNodeRole-demo" {
		t.Errorf("instance profile %s", got)
	}
	long := InstanceProfileName(strings.Repeat("c", 100), strings.Repeat("r", 60))
	if len(long) != 128 || long == InstanceProfileName(strings.Repeat("c", 100), strings.Repeat("r", 61)) {
		t.Errorf("long instance profile name %q (%d)", long, len(long))
	}
	s1 := templateSpec{Cluster: "demo", ImageID: "ami-1", UserData: "x"}
	s2 := s1
	s2.ImageID = "ami-2"
	again := s1
	if s1.Name() != again.Name() || s1.Name() == s2.Name() || !strings.HasPrefix(s1.Name(), "nodewright/demo/") {
		t.Errorf("template names %s %s", s1.Name(), s2.Name())
	}
}

func TestProviderIDAndDNS(t *testing.T) {
	i := Instance{ID: "i-0abc", Zone: "us-west-2a"}
	zone, id, err := ParseProviderID(i.ProviderID())
	if err != nil || zone != "us-west-2a" || id != "i-0abc" {
		t.Errorf("round trip: %s %s %v", zone, id, err)
	}
	for _, bad := range []string{"i-0abc", "aws:///us-west-2a", "gce:///x/i-1"} {
		if _, _, err := ParseProviderID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for cidr, want := range map[string]string{"10.100.0.0/16": "10.100.0.10", "172.20.0.0/16": "172.20.0.10", "fd00:10:96::/108": "fd00:10:96::a"} {
		got, err := ClusterInfo{ServiceCIDR: cidr}.DNSIP()
		if err != nil || got != want {
			t.Errorf("DNSIP(%s) = %s %v, want %s", cidr, got, err, want)
		}
	}
}

func TestAliasParameters(t *testing.T) {
	ps, err := AliasParameters("al2023@latest", "1.33")
	if err != nil || len(ps) != 5 || ps[0].Path != "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id" {
		t.Fatalf("al2023@latest: %v %+v", err, ps)
	}
	ps, _ = AliasParameters("al2023@v20240807", "1.33")
	if ps[0].Path != "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20240807/image_id" {
		t.Errorf("pinned al2023: %s", ps[0].Path)
	}
	ps, _ = AliasParameters("al2@v20240807", "1.30")
	if ps[1].Path != "/aws/service/eks/optimized-ami/1.30/amazon-linux-2-arm64/amazon-eks-arm64-node-1.30-v20240807/image_id" || ps[1].Arch != "arm64" {
		t.Errorf("al2 arm64: %+v", ps[1])
	}
	ps, _ = AliasParameters("bottlerocket@v1.20.3", "1.31")
	if ps[0].Path != "/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.20.3/image_id" {
		t.Errorf("bottlerocket: %s", ps[0].Path)
	}
	ps, _ = AliasParameters("windows2022@latest", "1.31")
	if ps[0].Path != "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id" {
		t.Errorf("windows: %s", ps[0].Path)
	}
	ps, _ = AliasParameters("windows2025@latest", "1.33")
	if len(ps) != 1 || ps[0].Path != "/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.33/image_id" {
		t.Errorf("windows2025: %+v", ps)
	}
	for _, bad := range []string{"al2023", "ubuntu@latest", "al2023@20240807", "windows2022@v20240101", "windows2025@v20250101"} {
		if _, err := AliasParameters(bad, "1.31"); err == nil {
			t.Errorf("alias %q accepted", bad)
		}
	}
}

func TestSelectors(t *testing.T) {
	z := ZonalSubnets([]Subnet{
		{ID: "subnet-1", Zone: "a", AvailableIPs: 5}, {ID: "subnet-2", Zone: "a", AvailableIPs: 50},
		{ID: "subnet-3", Zone: "b", AvailableIPs: 0}, {ID: "subnet-4", Zone: "c", AvailableIPs: 7}, {ID: "subnet-0", Zone: "c", AvailableIPs: 7},
	})
	if len(z) != 2 || z["a"].ID != "subnet-2" || z["c"].ID != "subnet-0" {
		t.Errorf("zonal subnets %+v", z)
	}
	if !tagsMatch(map[string]string{"karpenter.sh/discovery": "*", "Name": "demo-private-*"}, map[string]string{"karpenter.sh/discovery": "x", "Name": "demo-private-us-west-2a"}) {
		t.Error("wildcard tags did not match")
	}
	if tagsMatch(map[string]string{"Name": "demo-private-*"}, map[string]string{"Name": "demo-public-a"}) || tagsMatch(map[string]string{"k": "*"}, nil) {
		t.Error("tags matched wrongly")
	}
	for _, c := range []struct {
		p, s string
		want bool
	}{{"amazon-eks-node-*", "amazon-eks-node-1.30-v1", true}, {"a?c", "abc", true}, {"a*c*e", "abXcYYe", true}, {"a*c", "abcd", false}, {"exact", "exact", true}} {
		if globMatch(c.p, c.s) != c.want {
			t.Errorf("globMatch(%q,%q) != %v", c.p, c.s, c.want)
		}
	}
	f := tagFilters(map[string]string{"b": "*", "a": "x"})
	if len(f) != 2 || *f[0].Name != "tag:a" || *f[1].Name != "tag-key" || f[1].Values[0] != "b" {
		t.Errorf("tag filters %+v", f)
	}
}

type memICEStore struct {
	m    map[OfferingKey]time.Time
	fail error
}

func (s *memICEStore) PutUnavailable(_ context.Context, k OfferingKey, exp time.Time, _ string) error {
	if s.fail != nil {
		return s.fail
	}
	s.m[k] = exp
	return nil
}

func (s *memICEStore) ListUnavailable(context.Context) (map[OfferingKey]time.Time, error) {
	return s.m, s.fail
}

func TestICECacheSharesThroughStore(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	shared := &memICEStore{m: map[OfferingKey]time.Time{}}
	a := NewICECache(shared, 3*time.Minute, clock.Now)
	b := NewICECache(shared, 3*time.Minute, clock.Now)
	k := OfferingKey{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "spot"}
	if err := a.MarkUnavailable(context.Background(), k, "InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	if b.IsUnavailable(k) {
		t.Fatal("b saw the entry before syncing")
	}
	if err := b.Sync(context.Background(), 0); err != nil || !b.IsUnavailable(k) {
		t.Fatalf("b did not learn the entry: %v", err)
	}
	clock.Advance(3 * time.Minute)
	if a.IsUnavailable(k) || len(b.Snapshot()) != 0 {
		t.Error("entry outlived its TTL")
	}
	shared.fail = errors.New("dynamodb down")
	if err := a.MarkUnavailable(context.Background(), k, "x"); err == nil || !a.IsUnavailable(k) {
		t.Errorf("store failure must be reported and the local set still updated: %v", err)
	}
}

func TestRecordFleetErrors(t *testing.T) {
	p := newTestProvider(t, &fakeClock{t: time.Unix(1000, 0)})
	errs := []ec2types.CreateFleetError{{
		ErrorCode: sdkaws.String("InsufficientInstanceCapacity"), ErrorMessage: sdkaws.String("none left"),
		Lifecycle: ec2types.InstanceLifecycleSpot,
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
			InstanceType: "m5.large", SubnetId: sdkaws.String("subnet-b"),
		}},
	}}
	if _, err := p.recordFleetErrors(context.Background(), "c", errs, zonalAB, "spot", nil); err != nil {
		t.Fatal(err)
	}
	if !p.ice.IsUnavailable(OfferingKey{InstanceType: "m5.large", Zone: "us-west-2b", CapacityType: "spot"}) {
		t.Error("capacity error did not mark the offering (zone from subnet)")
	}
	_, err := p.recordFleetErrors(context.Background(), "c", []ec2types.CreateFleetError{{ErrorCode: sdkaws.String("InvalidParameterValue"), ErrorMessage: sdkaws.String("bad")}}, zonalAB, "spot", nil)
	if err == nil || !strings.Contains(err.Error(), "InvalidParameterValue") {
		t.Errorf("non-capacity error must fail the launch: %v", err)
	}
}

func TestApplyICE(t *testing.T) {
	p := newTestProvider(t, &fakeClock{t: time.Unix(1000, 0)})
	m5 := itype("m5.large", "amd64", map[string]float64{"us-west-2a/spot": 0.04, "us-west-2a/on-demand": 0.09})
	c5 := itype("c5.large", "amd64", map[string]float64{"us-west-2a/spot": 0.04})
	c, err := catalog.New("us-west-2", []catalog.Zone{{Name: "us-west-2a", ID: "usw2-az1"}}, []*catalog.InstanceType{m5, c5})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.ice.MarkUnavailable(context.Background(), OfferingKey{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "spot"}, "x")
	out, err := p.ApplyICE(c)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := out.Get("m5.large")
	if o, _ := got.Offering("us-west-2a", "spot"); o.Available {
		t.Error("ICE'd offering still available")
	}
	if o, _ := m5.Offering("us-west-2a", "spot"); !o.Available {
		t.Error("ApplyICE mutated the input catalog")
	}
	if c5b, _ := out.Get("c5.large"); c5b != c5 {
		t.Error("unaffected type was copied")
	}
}

func TestRecordLaunch(t *testing.T) {
	c := claim()
	now := metav1.NewTime(time.Unix(1000, 0))
	Instance{ID: "i-0abc", Type: "m5.large", Zone: "us-west-2a", ZoneID: "usw2-az1", CapacityType: "spot", ImageID: "ami-1", LaunchTemplate: "nodewright/demo/x"}.Record(c, now)
	if c.Status.ProviderID != "aws:///us-west-2a/i-0abc" || c.Status.InstanceID != "i-0abc" || c.Status.ImageID != "ami-1" {
		t.Errorf("status %+v", c.Status)
	}
	for k, v := range map[string]string{LabelInstanceType: "m5.large", LabelZone: "us-west-2a", LabelZoneID: "usw2-az1", LabelCapacityType: "spot", apis.NodePoolLabelKey: "default"} {
		if c.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, c.Labels[k], v)
		}
	}
	if c.Annotations[AnnotationLaunchTemplate] != "nodewright/demo/x" || !c.IsTrue(apis.ConditionLaunched) {
		t.Errorf("annotation/condition: %v %+v", c.Annotations, c.Status.Conditions)
	}
}

func TestPlanDropsSpotDearerThanOnDemand(t *testing.T) {
	p := newTestProvider(t, &fakeClock{t: time.Unix(1000, 0)})
	types := []*catalog.InstanceType{
		itype("p3.2xlarge", "amd64", map[string]float64{"us-west-2a/spot": 0.9}),
		itype("m5.large", "amd64", map[string]float64{"us-west-2a/spot": 0.04, "us-west-2a/on-demand": 0.096}),
		itype("c5.large", "amd64", map[string]float64{"us-west-2a/spot": 0.09}),
	}
	ct, opts := p.plan(claim(), types, zonalAB, amisBoth, true)
	if ct != "spot" || strings.Join(optionNames(opts), ",") != "m5.large,c5.large" {
		t.Errorf("plan %s %v", ct, optionNames(opts))
	}
	// Spot only: nothing to compare with, every spot type stays.
	_, opts = p.plan(claim(req(labelCapacityType, corev1.NodeSelectorOpIn, "spot")), types, zonalAB, amisBoth, true)
	if len(opts) != 3 {
		t.Errorf("spot-only plan %v", optionNames(opts))
	}
}

func TestMinValues(t *testing.T) {
	two := 2
	opts := []option{
		{it: &catalog.InstanceType{Name: "m5.large", Labels: map[string]string{"karpenter.k8s.aws/instance-family": "m5"}}},
		{it: &catalog.InstanceType{Name: "m5.xlarge", Labels: map[string]string{"karpenter.k8s.aws/instance-family": "m5"}}},
	}
	fam := apis.NodeSelectorRequirementWithMinValues{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpExists, MinValues: &two}
	if err := checkMinValues([]apis.NodeSelectorRequirementWithMinValues{fam}, opts); !errors.Is(err, ErrInsufficientCapacity) || !strings.Contains(err.Error(), "instance-family") {
		t.Errorf("one family for minValues 2: %v", err)
	}
	typ := apis.NodeSelectorRequirementWithMinValues{Key: labelInstanceType, Operator: corev1.NodeSelectorOpExists, MinValues: &two}
	if err := checkMinValues([]apis.NodeSelectorRequirementWithMinValues{typ}, opts); err != nil {
		t.Errorf("two types for minValues 2: %v", err)
	}
}

type countingICEStore struct {
	memICEStore
	lists atomic.Int32
}

func (s *countingICEStore) ListUnavailable(ctx context.Context) (map[OfferingKey]time.Time, error) {
	s.lists.Add(1)
	time.Sleep(10 * time.Millisecond)
	return s.memICEStore.ListUnavailable(ctx)
}

func TestICESyncIsSharedByConcurrentLaunches(t *testing.T) {
	st := &countingICEStore{memICEStore: memICEStore{m: map[OfferingKey]time.Time{}}}
	c := NewICECache(st, 3*time.Minute, time.Now)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Sync(context.Background(), 5*time.Second); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := st.lists.Load(); n != 1 {
		t.Errorf("%d store reads for 20 concurrent syncs, want 1", n)
	}
}

func TestNewestPerKind(t *testing.T) {
	in := []AMI{
		{ID: "new-x86", Architecture: "amd64"}, {ID: "new-arm", Architecture: "arm64"},
		{ID: "old-x86", Architecture: "amd64"},
		{ID: "gpu", Architecture: "amd64", Variants: []string{VariantNvidia}},
		{ID: "old-gpu", Architecture: "amd64", Variants: []string{VariantNvidia}},
	}
	var ids []string
	for _, a := range newestPerKind(in) {
		ids = append(ids, a.ID)
	}
	if strings.Join(ids, ",") != "new-x86,new-arm,gpu" {
		t.Errorf("kept %v", ids)
	}
}
