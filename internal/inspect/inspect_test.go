package inspect

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
)

var update = flag.Bool("update", false, "rewrite golden files")

// now is the fixtures' "present".
var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func at(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }

// fixturePrices: a snapshot pricing m5.large and c6g.xlarge (spot for one
// zone only), the embedded us-west-2 catalog behind it.
func fixturePrices(t *testing.T) Prices {
	t.Helper()
	cat, err := catalog.Builtin("us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	return Prices{
		Snapshot: &nwaws.PriceSnapshot{Region: "us-west-2", FetchedAt: now,
			OnDemand: map[string]float64{"m5.large": 0.096, "c6g.xlarge": 0.136},
			Spot:     map[string]map[string]float64{"c6g.xlarge": {"us-west-2b": 0.0512}}},
		Catalog: cat,
	}
}

func claim(name, pool, typ, ct, zone string, created time.Duration) *apis.NodeClaim {
	nc := &apis.NodeClaim{}
	nc.Name = name
	nc.CreationTimestamp = at(created)
	nc.Labels = map[string]string{apis.NodePoolLabelKey: pool, apis.NodeClassLabelKey: "default"}
	nc.Spec.NodeClassRef = &apis.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	nc.Spec.Requirements = []apis.NodeSelectorRequirementWithMinValues{
		{Key: catalog.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5a.large", "c6g.xlarge"}},
		{Key: apis.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{pool}},
	}
	nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("3Gi")}
	if typ == "" {
		return nc
	}
	nc.Labels[catalog.LabelInstanceType] = typ
	nc.Labels[apis.CapacityTypeLabelKey] = ct
	nc.Labels[catalog.LabelTopologyZone] = zone
	nc.Status.InstanceID = "i-0" + strings.Repeat(name[len(name)-1:], 16)
	nc.Status.ProviderID = "aws:///" + zone + "/" + nc.Status.InstanceID
	nc.Status.ImageID = "ami-0123456789abcdef0"
	cpu, mem := "2", "7910Mi"
	if typ == "c6g.xlarge" {
		cpu, mem = "4", "7430Mi"
	}
	nc.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("29")}
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7000Mi"), corev1.ResourcePods: resource.MustParse("29")}
	nc.SetCondition(apis.ConditionLaunched, metav1.ConditionTrue, "Launched", "", at(created-20*time.Second))
	return nc
}

// joined records that nc's node, named node, registered and initialized
// those durations ago.
func joined(nc *apis.NodeClaim, node string, registered, initialized time.Duration) {
	nc.Status.NodeName = node
	nc.SetCondition(apis.ConditionRegistered, metav1.ConditionTrue, "Registered", "", at(registered))
	nc.SetCondition(apis.ConditionInitialized, metav1.ConditionTrue, "Initialized", "", at(initialized))
}

// disrupting marks nc for deletion, and Disrupting, since ago.
func disrupting(nc *apis.NodeClaim, reason, message string, ago time.Duration) {
	nc.MarkForDeletion(reason, message, at(ago))
	nc.SetCondition(apis.ConditionDisrupting, metav1.ConditionTrue, "Disrupting", "", at(ago))
}

// fixtureClaims: a ready on-demand node, a ready spot node that is being
// consolidated, a claim still waiting for its node, one whose launch failed,
// and a tombstone of a drifted node in another pool.
func fixtureClaims() []Claim {
	ready := claim("default-a1b2c", "default", "m5.large", "on-demand", "us-west-2a", 3*time.Hour)
	joined(ready, "ip-10-0-1-17.us-west-2.compute.internal", 3*time.Hour-50*time.Second, 3*time.Hour-70*time.Second)

	spot := claim("default-d3e4f", "default", "c6g.xlarge", "spot", "us-west-2b", 26*time.Hour)
	joined(spot, "ip-10-0-2-33.us-west-2.compute.internal", 26*time.Hour-45*time.Second, 26*time.Hour-60*time.Second)
	spot.SetCondition(apis.ConditionConsolidatable, metav1.ConditionTrue, "Consolidatable", "", at(2*time.Hour))
	disrupting(spot, apis.DeletionReasonUnderutilized, "SingleNodeConsolidation: replace with 1 cheaper node (t4g.large $0.0269/h)", 4*time.Minute)
	spot.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 30 * time.Minute}

	pending := claim("default-g5h6i", "default", "m5.large", "on-demand", "us-west-2c", 40*time.Second)
	pending.Status.NodeName = ""

	failed := claim("gpu-j7k8l", "gpu", "", "", "", 90*time.Second)
	failed.SetCondition(apis.ConditionLaunched, metav1.ConditionFalse, "InsufficientCapacity", "all 3 offerings unavailable", at(80*time.Second))

	gone := claim("batch-m9n0p", "batch", "m5.large", "spot", "us-west-2a", 50*time.Hour)
	joined(gone, "ip-10-0-3-9.us-west-2.compute.internal", 50*time.Hour-40*time.Second, 50*time.Hour-55*time.Second)
	gone.SetCondition(apis.ConditionDrifted, metav1.ConditionTrue, "AMIDrift", "", at(5*time.Hour))
	disrupting(gone, apis.DeletionReasonDrifted, "AMIDrift: image ami-0123456789abcdef0 is no longer selected", 4*time.Hour)
	gone.SetCondition("Drained", metav1.ConditionTrue, "Drained", "", at(4*time.Hour-3*time.Minute))
	gone.SetCondition("InstanceTerminating", metav1.ConditionTrue, "InstanceTerminating", "", at(4*time.Hour-3*time.Minute-5*time.Second))

	return []Claim{
		{NodeClaim: gone, DeletedAt: now.Add(-4*time.Hour + 4*time.Minute)},
		{NodeClaim: ready}, {NodeClaim: spot}, {NodeClaim: pending}, {NodeClaim: failed},
	}
}

func fixtureConfig(t *testing.T) *apis.Config {
	t.Helper()
	cfg, err := apis.Load(filepath.Join("testdata", "config"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/inspect -run %s -update)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n--- got ---\n%s\n--- want ---\n%s", name, path, got, want)
	}
}

func TestWriteNodeClaimsGolden(t *testing.T) {
	prices := fixturePrices(t)
	claims := fixtureClaims()
	for _, tc := range []struct {
		name string
		o    PrintOptions
	}{
		{"nodeclaims", PrintOptions{}}, {"nodeclaims-wide", PrintOptions{Output: OutputWide}},
		{"nodeclaims-json", PrintOptions{Output: OutputJSON}}, {"nodeclaims-yaml", PrintOptions{Output: OutputYAML}},
		{"nodeclaims-name", PrintOptions{Output: OutputName}}, {"nodeclaims-no-headers", PrintOptions{NoHeaders: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteNodeClaims(&b, claims, tc.o, prices, now); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b.Bytes())
		})
	}
	var b bytes.Buffer
	if err := WriteNodeClaims(&b, nil, PrintOptions{}, prices, now); err != nil || b.String() != "" {
		t.Errorf("empty table: %v %q", err, b.String())
	}
	if err := WriteNodeClaims(&b, nil, PrintOptions{Output: OutputJSON}, prices, now); err != nil || !strings.Contains(b.String(), `"items": []`) {
		t.Errorf("empty list: %v %q", err, b.String())
	}
	if err := WriteNodeClaims(&b, claims, PrintOptions{Output: "xml"}, prices, now); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("unknown output accepted or unnamed: %v", err)
	}
}

func TestWriteNodePoolsGolden(t *testing.T) {
	pools := Usage(fixtureConfig(t), fixtureClaims(), fixturePrices(t))
	for _, tc := range []struct {
		name string
		o    PrintOptions
	}{
		{"nodepools", PrintOptions{}}, {"nodepools-json", PrintOptions{Output: OutputJSON}},
		{"nodepools-name", PrintOptions{Output: OutputName}}, {"nodepools-no-headers", PrintOptions{NoHeaders: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteNodePools(&b, pools, tc.o); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, b.Bytes())
		})
	}
	var b bytes.Buffer
	if err := WriteNodePools(&b, nil, PrintOptions{}); err != nil || b.String() != "" {
		t.Errorf("no pools: %v %q", err, b.String())
	}
	if err := WriteNodePools(&b, pools, PrintOptions{Output: "csv"}); err == nil || !strings.Contains(err.Error(), `"csv"`) {
		t.Errorf("unknown output: %v", err)
	}
}

func TestCheckOutput(t *testing.T) {
	for _, o := range []string{"", "wide", "json", "yaml", "name"} {
		if err := CheckOutput(o); err != nil {
			t.Errorf("%q: %v", o, err)
		}
	}
	if err := CheckOutput("wide", OutputJSON, OutputYAML); err == nil || err.Error() != `unknown output format "wide": use json, yaml` {
		t.Errorf("restricted: %v", err)
	}
}

func TestUsage(t *testing.T) {
	pools := Usage(fixtureConfig(t), fixtureClaims(), fixturePrices(t))
	byName := map[string]PoolUsage{}
	for _, p := range pools {
		byName[p.Name] = p
	}
	d := byName["default"]
	// m5.large 2 + c6g.xlarge 4 + m5.large 2; the gpu claim has no capacity.
	if cpu := d.Used[corev1.ResourceCPU]; cpu.Value() != 8 || d.Nodes != 3 || d.Ready != 2 || d.Deleting != 1 {
		t.Errorf("default: cpu %s nodes %d ready %d deleting %d", cpu.String(), d.Nodes, d.Ready, d.Deleting)
	}
	// 0.096 on-demand + 0.0512 spot from the snapshot + 0.096.
	if want := 0.096 + 0.0512 + 0.096; d.CostPerHour < want-1e-9 || d.CostPerHour > want+1e-9 {
		t.Errorf("default cost %v, want %v", d.CostPerHour, want)
	}
	if g := byName["gpu"]; g.Nodes != 1 || g.Unpriced != 1 || g.CostPerHour != 0 {
		t.Errorf("gpu: %+v", g)
	}
	if b, ok := byName["batch"]; !ok || b.Nodes != 0 {
		t.Errorf("tombstones count as usage: %+v", b)
	}
	if _, ok := byName["unused"]; !ok {
		t.Error("configured pool without claims missing")
	}
	if g := byName["gpu"]; g.Configured {
		t.Error("gpu pool is not in the config but reported configured")
	}
}

func TestDescribeGolden(t *testing.T) {
	prices := fixturePrices(t)
	for _, c := range fixtureClaims() {
		t.Run(c.Name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteDescribe(&b, c, prices, now); err != nil {
				t.Fatal(err)
			}
			golden(t, "describe-"+c.Name, b.Bytes())
		})
	}
}

func TestTimelineOrder(t *testing.T) {
	var gone Claim
	for _, c := range fixtureClaims() {
		if c.Tombstoned() {
			gone = c
		}
	}
	var reasons []string
	for _, e := range Timeline(gone) {
		reasons = append(reasons, e.Reason)
	}
	want := "Created Launched Registered Initialized Drifted MarkedForDeletion Disrupting Drained InstanceTerminating Deleted"
	if got := strings.Join(reasons, " "); got != want {
		t.Errorf("timeline\n got %s\nwant %s", got, want)
	}
}

func TestPrices(t *testing.T) {
	p := fixturePrices(t)
	for _, tc := range []struct {
		typ, zone, ct string
		want          float64
		ok            bool
	}{
		{"m5.large", "us-west-2a", "on-demand", 0.096, true},
		{"c6g.xlarge", "us-west-2b", "spot", 0.0512, true},
		// No spot quote for that zone: derived from the snapshot's on-demand.
		{"c6g.xlarge", "us-west-2a", "spot", catalog.DerivedSpotPrice("c6g.xlarge", "us-west-2a", 0.136), true},
		{"nope.large", "us-west-2a", "on-demand", 0, false},
		{"", "", "", 0, false},
	} {
		got, ok := p.Price(tc.typ, tc.zone, tc.ct)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Price(%s,%s,%s) = %v,%v want %v,%v", tc.typ, tc.zone, tc.ct, got, ok, tc.want, tc.ok)
		}
	}
	// Not in the snapshot: the embedded catalog answers.
	if v, ok := p.Price("t3.medium", "us-west-2a", "on-demand"); !ok || v <= 0 {
		t.Errorf("catalog fallback: %v %v", v, ok)
	}
	if _, ok := (Prices{}).Price("m5.large", "us-west-2a", "on-demand"); ok {
		t.Error("zero Prices knows a price")
	}
}
