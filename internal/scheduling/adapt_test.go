package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

func TestAdaptersFromAPIsAndCatalog(t *testing.T) {
	weight := int32(7)
	two := 2
	np := &apis.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general"}, Spec: apis.NodePoolSpec{
		Weight: &weight,
		Limits: apis.Limits(rl("cpu", "100")),
		Template: apis.NodeClaimTemplate{
			ObjectMeta: apis.TemplateObjectMeta{Labels: map[string]string{"team": "a"}},
			Spec: apis.NodeClaimTemplateSpec{
				NodeClassRef: &apis.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Taints:       []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}},
				Requirements: []apis.NodeSelectorRequirementWithMinValues{
					{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpIn, Values: []string{"m5", "m6i", "c6i"}, MinValues: &two},
					{Key: scheduling.LabelCapacityType, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
				},
			},
		},
	}}
	pool, err := scheduling.NodePoolFromAPI(np)
	if err != nil {
		t.Fatal(err)
	}
	if pool.Weight != 7 || pool.NodeClass != "default" || pool.Labels["team"] != "a" || len(pool.Taints) != 1 {
		t.Errorf("pool %+v", pool)
	}
	if r, ok := pool.Requirements.Get("karpenter.k8s.aws/instance-family"); !ok || r.MinValues != 2 || !r.Has("m6i") {
		t.Errorf("family requirement %v", r)
	}
	if q := pool.Limits[corev1.ResourceCPU]; q.String() != "100" {
		t.Errorf("limits %v", pool.Limits)
	}
	bad := np.DeepCopy()
	bad.Spec.Template.Spec.Requirements[0].Operator = "Near"
	if _, err := scheduling.NodePoolFromAPI(bad); err == nil {
		t.Error("an unknown operator must be rejected")
	}

	cat, err := catalog.Builtin("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	its, err := scheduling.InstanceTypesFromCatalog(cat, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(its) != len(cat.Types) {
		t.Fatalf("%d types, catalog has %d", len(its), len(cat.Types))
	}
	// A class that needs nested virtualization keeps only the types with it.
	enabled := "enabled"
	nested := &apis.EC2NodeClass{Spec: apis.EC2NodeClassSpec{CPUOptions: &apis.CPUOptions{NestedVirtualization: &enabled}}}
	nv, err := scheduling.InstanceTypesFromCatalog(cat, nested, nil)
	if err != nil || len(nv) == 0 || len(nv) >= len(its) {
		t.Fatalf("nested virtualization: %d of %d types (%v)", len(nv), len(its), err)
	}
	for _, it := range its {
		a, c := it.Allocatable[corev1.ResourceMemory], it.Capacity[corev1.ResourceMemory]
		if a.Cmp(c) >= 0 || it.Labels[scheduling.LabelInstanceType] != it.Name || len(it.Offerings) == 0 {
			t.Fatalf("%s: allocatable %s capacity %s labels %v", it.Name, a.String(), c.String(), it.Labels)
		}
	}
	// End to end on the embedded catalog: tolerating pods land on the
	// cheapest on-demand member of the allowed families, with the pool's
	// label and taint, and minValues keeps two families in the options.
	tol := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	in := &scheduling.Input{Pods: pods(4, podOpts{cpu: "1", mem: "2Gi", tolerations: tol}), NodePools: []*scheduling.NodePool{pool},
		InstanceTypes: map[string][]*scheduling.InstanceType{"general": its}}
	plan := mustSolve(t, in)
	if len(plan.NodeClaims) == 0 || len(plan.Unschedulable) != 0 {
		t.Fatalf("plan %v", summary(plan))
	}
	// Right-sizing may split the pods over two smaller nodes when that is
	// cheaper; every claim keeps the pool's label, taint and minValues.
	for _, c := range plan.NodeClaims {
		fams := map[string]bool{}
		for _, name := range c.InstanceTypeOptions {
			it, _ := cat.Get(name)
			fams[it.Family] = true
		}
		if c.CapacityType != "on-demand" || c.Labels["team"] != "a" || c.Labels[scheduling.LabelNodeClass] != "default" || len(fams) < 2 {
			t.Errorf("claim %s %s labels %v families %v", c.InstanceType, c.CapacityType, c.Labels, fams)
		}
	}
}

func TestDynamicPoolsLeaveOutStaticPools(t *testing.T) {
	three := int64(3)
	cfg := &apis.Config{NodePools: []*apis.NodePool{
		{ObjectMeta: metav1.ObjectMeta{Name: "fixed"}, Spec: apis.NodePoolSpec{Replicas: &three}},
		{ObjectMeta: metav1.ObjectMeta{Name: "elastic"}},
	}}
	pools := []*scheduling.NodePool{{Name: "fixed"}, {Name: "elastic"}, {Name: "unconfigured"}}
	got := scheduling.DynamicPools(cfg, pools)
	if len(got) != 2 || got[0].Name != "elastic" || got[1].Name != "unconfigured" {
		t.Errorf("dynamic pools %v", got)
	}
}

// placedInput is a pool of class "placed" whose types come from the
// embedded catalog as a class with placement group pg sees them.
func placedInput(t *testing.T, pg catalog.PlacementGroup, types []string, pods []*corev1.Pod) *scheduling.Input {
	t.Helper()
	cat, err := catalog.Builtin("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	cat = cat.WithPlacementGroups(map[string]catalog.PlacementGroup{"placed": pg})
	nc := &apis.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "placed"}}
	its, err := scheduling.InstanceTypesFromCatalog(cat, nc, nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := &scheduling.NodePool{Name: "placed", NodeClass: "placed"}
	pool.Requirements = pool.Requirements.Add(req(scheduling.LabelCapacityType, in, "on-demand")).
		Add(req(scheduling.LabelInstanceType, in, types...))
	return &scheduling.Input{Pods: pods, NodePools: []*scheduling.NodePool{pool}, DefaultInstanceTypes: its}
}

func claimRequires(cp *scheduling.NodeClaimPlan, key string) []string {
	for _, r := range cp.Requirements {
		if r.Key == key && r.Operator == corev1.NodeSelectorOpIn {
			return r.Values
		}
	}
	return nil
}

// A partition placement group's partitions are offerings, as in Karpenter:
// a pod can select a partition or the group, the claim carries the
// partition it allows (the launch names it to EC2), a partition the group
// lacks leaves the pod pending, and topology spread uses partitions as
// domains.
func TestPlacementGroupPartitionsAreOfferings(t *testing.T) {
	pg := catalog.PlacementGroup{ID: "pg-1", Strategy: catalog.PlacementPartition, Partitions: 3}
	one := podOpts{cpu: "1", mem: "1Gi"}
	for _, c := range []struct {
		name string
		sel  map[string]string
		want []string // the claim's partition requirement; nil: unschedulable
	}{
		{"a partition", map[string]string{scheduling.LabelPlacementPartition: "2"}, []string{"2"}},
		{"the group", map[string]string{catalog.LabelPlacementGroupID: "pg-1"}, []string{}},
		{"another group", map[string]string{catalog.LabelPlacementGroupID: "pg-2"}, nil},
		{"a partition the group lacks", map[string]string{scheduling.LabelPlacementPartition: "4"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := one
			o.nodeSelector = c.sel
			plan := mustSolve(t, placedInput(t, pg, []string{"m5.large"}, pods(1, o)))
			if c.want == nil {
				if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 1 {
					t.Fatalf("want the pod unschedulable, got %d claims, %d unschedulable", len(plan.NodeClaims), len(plan.Unschedulable))
				}
				return
			}
			if len(plan.NodeClaims) != 1 {
				t.Fatalf("claims %d, unschedulable %v", len(plan.NodeClaims), plan.Unschedulable)
			}
			got := claimRequires(plan.NodeClaims[0], scheduling.LabelPlacementPartition)
			if len(c.want) > 0 && (len(got) != 1 || got[0] != c.want[0]) {
				t.Errorf("partition requirement %v, want %v", got, c.want)
			}
		})
	}

	t.Run("spread over partitions", func(t *testing.T) {
		o := one
		o.labels = map[string]string{"app": "db"}
		o.spread = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: scheduling.LabelPlacementPartition,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: o.labels}}}
		plan := mustSolve(t, placedInput(t, pg, []string{"m5.large"}, pods(3, o)))
		seen := map[string]bool{}
		for _, cp := range plan.NodeClaims {
			if got := claimRequires(cp, scheduling.LabelPlacementPartition); len(got) == 1 {
				seen[got[0]] = true
			}
		}
		if len(plan.NodeClaims) != 3 || len(seen) != 3 {
			t.Errorf("claims %d over partitions %v, want one in each of 3", len(plan.NodeClaims), seen)
		}
	})
}

// A cluster placement group takes only the types whose PlacementGroupInfo
// lists the cluster strategy (EC2 refuses the others); a partition group
// takes them.
func TestPlacementGroupStrategyFiltersTypes(t *testing.T) {
	cat, err := catalog.Builtin("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	var refuses string
	for _, it := range cat.Types {
		if !it.SupportsPlacement(catalog.PlacementCluster) {
			refuses = it.Name
			break
		}
	}
	if refuses == "" {
		t.Fatal("the embedded catalog has no type without the cluster strategy")
	}
	o := podOpts{cpu: "100m", mem: "128Mi"}
	cluster := catalog.PlacementGroup{ID: "pg-c", Strategy: catalog.PlacementCluster}
	if plan := mustSolve(t, placedInput(t, cluster, []string{refuses}, pods(1, o))); len(plan.NodeClaims) != 0 {
		t.Errorf("%s launched into a cluster group", refuses)
	}
	partition := catalog.PlacementGroup{ID: "pg-p", Strategy: catalog.PlacementPartition, Partitions: 2}
	if plan := mustSolve(t, placedInput(t, partition, []string{refuses}, pods(1, o))); len(plan.NodeClaims) != 1 {
		t.Errorf("%s refused by a partition group: %v", refuses, plan.Unschedulable)
	}
}
