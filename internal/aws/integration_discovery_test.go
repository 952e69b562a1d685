package aws_test

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

func TestAMIAliasResolution(t *testing.T) {
	e := newEnv(t, false)
	ec2c := e.sim.EC2()
	ssm := func(path string) string {
		v, ok := ec2c.SSMParameter(path)
		if !ok {
			t.Fatalf("simulator has no SSM parameter %s", path)
		}
		return v
	}
	amis, err := e.p.AMIs(e.ctx, nodeClass("al2023@latest"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]nwaws.AMI{}
	for _, a := range amis {
		ids[a.ID] = a
	}
	x86 := ssm("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")
	arm := ssm("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id")
	gpu := ssm("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/nvidia/recommended/image_id")
	if ids[x86].Architecture != "amd64" || ids[arm].Architecture != "arm64" || !slices.Contains(ids[gpu].Variants, nwaws.VariantNvidia) {
		t.Fatalf("al2023@latest resolved to %+v", amis)
	}
	old := ids[x86]

	// A new EKS AMI release moves @latest once the cache is refreshed; a
	// pinned version keeps the old image.
	if _, err := ec2c.PublishAMI(ec2sim.FamilyAL2023); err != nil {
		t.Fatal(err)
	}
	e.p.InvalidateDiscovery()
	amis, err = e.p.AMIs(e.ctx, nodeClass("al2023@latest"))
	if err != nil {
		t.Fatal(err)
	}
	newX86 := ssm("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")
	if newX86 == old.ID || !slices.ContainsFunc(amis, func(a nwaws.AMI) bool { return a.ID == newX86 }) {
		t.Errorf("@latest did not follow the release: %s", newX86)
	}
	version := old.Name[strings.LastIndex(old.Name, "-")+1:] // amazon-eks-node-al2023-...-v20261101
	pinned, err := e.p.AMIs(e.ctx, nodeClass("al2023@"+version))
	if err != nil || !slices.ContainsFunc(pinned, func(a nwaws.AMI) bool { return a.ID == old.ID }) {
		t.Errorf("al2023@%s: %v %+v", version, err, pinned)
	}

	// Bottlerocket and AL2 aliases resolve through their own parameters.
	br, err := e.p.AMIs(e.ctx, nodeClass("bottlerocket@latest"))
	if err != nil || !slices.ContainsFunc(br, func(a nwaws.AMI) bool {
		return a.ID == ssm("/aws/service/bottlerocket/aws-k8s-1.33/arm64/latest/image_id")
	}) {
		t.Errorf("bottlerocket@latest: %v %+v", err, br)
	}
	if _, err := e.p.AMIs(e.ctx, nodeClass("al2@latest")); err != nil {
		t.Errorf("al2@latest: %v", err)
	}
	// An alias with no published parameters is a clear error.
	if _, err := e.p.AMIs(e.ctx, nodeClass("al2023@v19990101")); err == nil || !strings.Contains(err.Error(), "al2023@v19990101") {
		t.Errorf("unknown version: %v", err)
	}

	// An ssmParameter term reads one image id from the named parameter.
	bySSM := nodeClass("")
	bySSM.Spec.AMISelectorTerms = []apis.AMISelectorTerm{{SSMParameter: "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id"}}
	if got, err := e.p.AMIs(e.ctx, bySSM); err != nil || len(got) != 1 || got[0].ID != ssm(bySSM.Spec.AMISelectorTerms[0].SSMParameter) || got[0].Architecture != "arm64" {
		t.Errorf("ssmParameter: %v %+v", err, got)
	}
	bySSM.Spec.AMISelectorTerms[0].SSMParameter = "/no/such/parameter"
	if _, err := e.p.AMIs(e.ctx, bySSM); err == nil || !strings.Contains(err.Error(), "ssmParameter /no/such/parameter") {
		t.Errorf("missing parameter: %v", err)
	}

	// Selector terms: by name with wildcard, newest first, deprecated skipped.
	custom := func(name string, created time.Time) ec2types.Image {
		return ec2c.AddImage(ec2types.Image{Name: sdkaws.String(name), Architecture: ec2types.ArchitectureValuesX8664,
			CreationDate: sdkaws.String(created.UTC().Format(time.RFC3339)), Tags: []ec2types.Tag{{Key: sdkaws.String("golden"), Value: sdkaws.String("yes")}}})
	}
	older := custom("golden-node-1", time.Now().Add(-48*time.Hour))
	newer := custom("golden-node-2", time.Now().Add(-24*time.Hour))
	newest := custom("golden-node-3", time.Now().Add(-1*time.Hour))
	if err := ec2c.DeprecateImage(*newest.ImageId, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	nc := nodeClass("")
	nc.Spec.AMISelectorTerms = []apis.AMISelectorTerm{{Name: "golden-node-*", Owner: "self"}}
	got, err := e.p.AMIs(e.ctx, nc)
	if err != nil || len(got) != 1 || got[0].ID != *newer.ImageId {
		t.Errorf("name selector: want only the newest non-deprecated image %s: %v %+v", *newer.ImageId, err, got)
	}
	nc.Spec.AMISelectorTerms = []apis.AMISelectorTerm{{Tags: map[string]string{"golden": "*"}}}
	if got, err := e.p.AMIs(e.ctx, nc); err != nil || len(got) != 1 || got[0].ID != *newer.ImageId {
		t.Errorf("tag selector: %v %+v", err, got)
	}
	// All matching images deprecated: the newest deprecated one is still used.
	if err := ec2c.DeprecateImage(*newer.ImageId, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := ec2c.DeprecateImage(*older.ImageId, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	e.p.InvalidateDiscovery()
	if got, err := e.p.AMIs(e.ctx, nc); err != nil || len(got) != 1 || got[0].ID != *newest.ImageId || !got[0].Deprecated {
		t.Errorf("all deprecated: %v %+v", err, got)
	}
	nc.Spec.AMISelectorTerms = []apis.AMISelectorTerm{{ID: *older.ImageId}}
	if got, err := e.p.AMIs(e.ctx, nc); err != nil || len(got) != 1 || got[0].ID != *older.ImageId {
		t.Errorf("id selector: %v %+v", err, got)
	}
}

func TestDiscovery(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	subnets := e.subnets(t, nc)
	zonal := nwaws.ZonalSubnets(subnets)
	zones := e.sim.EC2().Config().Catalog.Zones()
	if len(zones) < 2 || len(subnets) != len(zones) || len(zonal) != len(zones) {
		t.Fatalf("want the %d private subnets, one per zone: %+v", len(zones), subnets)
	}
	for _, s := range subnets {
		if !strings.Contains(s.Tags["Name"], "private") {
			t.Errorf("public subnet selected: %+v", s)
		}
	}
	wild := nodeClass("al2023@latest")
	wild.Spec.SubnetSelectorTerms = []apis.SubnetSelectorTerm{{Tags: map[string]string{"Name": "demo-public-*"}}, {ID: subnets[0].ID}}
	got, err := e.p.Subnets(e.ctx, wild)
	if err != nil || len(got) != len(zones)+1 {
		t.Errorf("wildcard + id selector: %v %+v", err, got)
	}
	groups, err := e.p.SecurityGroups(e.ctx, nc)
	if err != nil || len(groups) != 2 {
		t.Fatalf("security groups by tag: %v %+v", err, groups)
	}
	byName := nodeClass("al2023@latest")
	other := groups[0]
	if other.Name == "demo-node" {
		other = groups[1]
	}
	byName.Spec.SecurityGroupSelectorTerms = []apis.SecurityGroupSelectorTerm{{Name: "demo-node"}, {ID: other.ID}}
	if got, err := e.p.SecurityGroups(e.ctx, byName); err != nil || len(got) != 2 {
		t.Errorf("security groups by name and id: %v %+v", err, got)
	}
	none := nodeClass("al2023@latest")
	none.Spec.SubnetSelectorTerms = []apis.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "other"}}}
	if _, err := e.p.Subnets(e.ctx, none); !errors.Is(err, nwaws.ErrNodeClassNotReady) {
		t.Errorf("no subnets: %v", err)
	}
	// Cached: a second resolution makes no EC2 call.
	before := len(e.sim.Calls("ec2", "DescribeSubnets"))
	if _, err := e.p.Subnets(e.ctx, nc); err != nil || len(e.sim.Calls("ec2", "DescribeSubnets")) != before {
		t.Errorf("subnets not cached: %v", err)
	}
	// ... until the TTL passes.
	e.clock.Advance(2 * time.Minute)
	if _, err := e.p.Subnets(e.ctx, nc); err != nil || len(e.sim.Calls("ec2", "DescribeSubnets")) != before+1 {
		t.Errorf("subnets not refreshed after the TTL: %v", err)
	}

	info, err := e.p.Cluster(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	dns, err := info.DNSIP()
	if info.Endpoint != "https://127.0.0.1:6443" || info.Version != k8sVersion || info.CABundle != base64.StdEncoding.EncodeToString(testCA) || err != nil || dns == "" {
		t.Errorf("cluster info %+v dns %s %v", info, dns, err)
	}
}

func TestPricesAndCatalog(t *testing.T) {
	e := newEnv(t, true)
	store := &memPrices{}
	snap, err := e.p.Prices(e.ctx, store, false)
	if err != nil {
		t.Fatal(err)
	}
	if snap.OnDemandSource != catalog.PriceSourcePricingAPI || len(snap.OnDemand) < 10 {
		t.Fatalf("on-demand from %s: %d prices", snap.OnDemandSource, len(snap.OnDemand))
	}
	if want, _ := e.sim.EC2().OnDemandPrice("m5.large"); snap.OnDemand["m5.large"] != want {
		t.Errorf("m5.large on-demand %v, want %v", snap.OnDemand["m5.large"], want)
	}
	if pages, want := len(e.sim.Calls("pricing", "GetProducts")), (len(snap.OnDemand)+99)/100; pages != want {
		t.Errorf("GetProducts: %d pages for %d prices, want %d", pages, len(snap.OnDemand), want)
	}
	if want, _ := e.sim.EC2().SpotPrice("m5.large", "us-west-2a"); snap.Spot["m5.large"]["us-west-2a"] != want || snap.SpotSource != catalog.PriceSourcePricingAPI {
		t.Errorf("m5.large spot %v from %s, want %v", snap.Spot["m5.large"]["us-west-2a"], snap.SpotSource, want)
	}
	if store.saved == nil {
		t.Fatal("snapshot not saved")
	}
	// Within 12 hours the cached snapshot is used.
	calls := len(e.sim.Calls("pricing", "GetProducts"))
	if _, err := e.p.Prices(e.ctx, store, false); err != nil || len(e.sim.Calls("pricing", "GetProducts")) != calls {
		t.Errorf("prices refetched within the refresh interval: %v", err)
	}
	// After 12 hours prices are fetched again, and a changed spot price shows.
	e.sim.EC2().SetSpotPrice("m5.large", "us-west-2a", 0.0123)
	e.clock.Advance(12*time.Hour + time.Minute)
	snap, err = e.p.Prices(e.ctx, store, false)
	if err != nil || snap.Spot["m5.large"]["us-west-2a"] != 0.0123 || len(e.sim.Calls("pricing", "GetProducts")) == calls {
		t.Errorf("refresh after 12h: %v %v", err, snap.Spot["m5.large"])
	}
	// Pricing API unreachable: the cached on-demand prices stay.
	remove := e.sim.InjectFault(awssim.Fault{Service: "pricing", Code: "AccessDeniedException", Message: "no route to the Pricing API"})
	snap, err = e.p.Prices(e.ctx, store, true)
	if err != nil || snap.OnDemandSource != catalog.PriceSourcePricingAPI || snap.OnDemand["m5.large"] == 0 {
		t.Errorf("stale fallback: %v %+v", err, snap.OnDemandSource)
	}
	// ... and with no cache, the embedded catalog's list prices.
	snap, err = e.p.Prices(e.ctx, &memPrices{}, true)
	if err != nil || snap.OnDemandSource != catalog.PriceSourceEmbedded || snap.OnDemand["m5.large"] == 0 {
		t.Errorf("embedded fallback: %v %+v", err, snap)
	}
	remove()

	cat, err := e.p.Catalog(e.ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	m5, ok := cat.Get("m5.large")
	if !ok || len(cat.Zones) != len(e.sim.EC2().Config().Catalog.Zones()) || m5.VCPU != 2 {
		t.Fatalf("catalog: %v zones %v", ok, cat.Zones)
	}
	o, ok := m5.Offering("us-west-2a", "spot")
	if !ok || o.Price != 0.0123 || !o.Available || o.ZoneID == "" {
		t.Errorf("m5.large spot offering %+v", o)
	}
	// ICE marks reach the catalog through ApplyICE.
	_ = e.p.ICE().MarkUnavailable(e.ctx, nwaws.OfferingKey{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "spot"}, "test")
	iced, err := e.p.ApplyICE(cat)
	if err != nil {
		t.Fatal(err)
	}
	m5i, _ := iced.Get("m5.large")
	if o, _ := m5i.Offering("us-west-2a", "spot"); o.Available {
		t.Error("ApplyICE left the offering available")
	}
}

type memPrices struct{ saved *nwaws.PriceSnapshot }

func (m *memPrices) LoadPrices(_ context.Context, region string) (*nwaws.PriceSnapshot, error) {
	if m.saved == nil || m.saved.Region != region {
		return nil, nil
	}
	cp := *m.saved
	return &cp, nil
}

func (m *memPrices) SavePrices(_ context.Context, s *nwaws.PriceSnapshot) error {
	cp := *s
	m.saved = &cp
	return nil
}

// windows2019/2022@latest resolve to the region's EKS-optimized Windows
// Server Core image through its ami-windows-latest parameter, amd64 only;
// the cluster (1.33) predates Windows Server 2025 images, so windows2025
// finds none, as Karpenter-AWS (amifamily/ami.go) refuses it before 1.35.
func TestWindowsAMIAliasResolution(t *testing.T) {
	e := newEnv(t, false)
	for _, year := range []string{"2019", "2022"} {
		amis, err := e.p.AMIs(e.ctx, nodeClass("windows"+year+"@latest"))
		if err != nil {
			t.Fatal(err)
		}
		want, ok := e.sim.EC2().SSMParameter("/aws/service/ami-windows-latest/Windows_Server-" + year + "-English-Core-EKS_Optimized-1.33/image_id")
		if !ok || len(amis) != 1 || amis[0].ID != want || amis[0].Architecture != "amd64" {
			t.Errorf("windows%s@latest resolved to %+v, the parameter holds %q", year, amis, want)
		}
	}
	if amis, err := e.p.AMIs(e.ctx, nodeClass("windows2025@latest")); err == nil {
		t.Errorf("windows2025@latest on Kubernetes 1.33 resolved to %+v", amis)
	}
}
