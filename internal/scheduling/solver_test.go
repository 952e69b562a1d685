package scheduling_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Hand-checked fixtures. Prices: on-demand as given, spot 40% of it, in
// zones a, b and c unless a test says otherwise.
func testTypes() []*scheduling.InstanceType {
	return []*scheduling.InstanceType{
		mkType("c.large", 2, 4, 20, "amd64", 0.10),
		mkType("c.xlarge", 4, 8, 40, "amd64", 0.20),
		mkType("c.4xlarge", 16, 32, 110, "amd64", 0.80),
		mkType("g.large", 2, 4, 20, "arm64", 0.09),
	}
}

func odOnly(pool *scheduling.NodePool) *scheduling.NodePool {
	pool.Requirements = pool.Requirements.Add(req(scheduling.LabelCapacityType, in, "on-demand"))
	return pool
}

func mustSolve(t *testing.T, in *scheduling.Input) *scheduling.Plan {
	t.Helper()
	plan, err := scheduling.Solve(context.Background(), in)
	if err != nil {
		t.Fatalf("solve: %v", err)
	}
	checkPlan(t, in, plan)
	return plan
}

// summary renders claims as "type/zone/ct:[pods]" sorted, for exact comparisons.
func summary(plan *scheduling.Plan) []string {
	var out []string
	for _, c := range plan.NodeClaims {
		out = append(out, fmt.Sprintf("%s/%s/%s:%s", c.InstanceType, c.Zone, c.CapacityType, strings.Join(sortedCopy(c.Pods), ",")))
	}
	for _, n := range plan.ExistingNodes {
		out = append(out, fmt.Sprintf("node %s:%s", n.Name, strings.Join(sortedCopy(n.Pods), ",")))
	}
	for _, u := range plan.Unschedulable {
		out = append(out, "unschedulable "+u.Pod)
	}
	return sortedCopy(out)
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func expect(t *testing.T, plan *scheduling.Plan, want ...string) {
	t.Helper()
	got := summary(plan)
	if !reflect.DeepEqual(got, sortedCopy(want)) {
		t.Errorf("plan:\n  got  %q\n  want %q", got, sortedCopy(want))
		for _, u := range plan.Unschedulable {
			t.Logf("unschedulable %s: %s", u.Pod, u.Reason)
		}
	}
}

func reasonOf(plan *scheduling.Plan, pod string) string {
	for _, u := range plan.Unschedulable {
		if u.Pod == "default/"+pod {
			return u.Reason
		}
	}
	return ""
}

func pods(n int, o podOpts) []*corev1.Pod {
	var out []*corev1.Pod
	base := o.name
	if base == "" {
		base = "p"
	}
	for i := 0; i < n; i++ {
		o.name = fmt.Sprintf("%s%d", base, i)
		o.seq = i
		out = append(out, mkPod(o))
	}
	return out
}

func input(ps []*corev1.Pod, pools ...*scheduling.NodePool) *scheduling.Input {
	if len(pools) == 0 {
		pools = []*scheduling.NodePool{odOnly(&scheduling.NodePool{Name: "default"})}
	}
	return &scheduling.Input{Pods: ps, NodePools: pools, DefaultInstanceTypes: testTypes()}
}

func TestResourcesPickCheapestFittingType(t *testing.T) {
	// 3 x 1 cpu: c.xlarge ($0.20) beats two c.large ($0.20) on node count and
	// one c.large cannot hold 3 cpu; the amd/arm tie breaks on price: g.large
	// ($0.09) holds 1 pod... the solver packs all three on c.xlarge.
	plan := mustSolve(t, input(pods(3, podOpts{cpu: "1", mem: "1Gi", nodeSelector: map[string]string{scheduling.LabelArch: "amd64"}})))
	expect(t, plan, "c.xlarge/zone-a/on-demand:default/p0,default/p1,default/p2")
	if plan.CostPerHour != 0.20 {
		t.Errorf("cost %v", plan.CostPerHour)
	}
	c := plan.NodeClaims[0]
	if !reflect.DeepEqual(c.InstanceTypeOptions, []string{"c.xlarge", "c.4xlarge"}) {
		t.Errorf("options %v, want the fitting types cheapest first", c.InstanceTypeOptions)
	}
	for k, v := range map[string]string{scheduling.LabelNodePool: "default", scheduling.LabelZone: "zone-a", scheduling.LabelCapacityType: "on-demand",
		scheduling.LabelInstanceType: "c.xlarge", scheduling.LabelArch: "amd64", "karpenter.k8s.aws/instance-family": "c"} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if q := c.Allocatable[corev1.ResourceCPU]; q.String() != "4" {
		t.Errorf("allocatable cpu %s", q.String())
	}
}

func TestTooBigPodIsExplained(t *testing.T) {
	plan := mustSolve(t, input(pods(1, podOpts{cpu: "64", mem: "1Gi"})))
	expect(t, plan, "unschedulable default/p0")
	if r := reasonOf(plan, "p0"); !strings.Contains(r, "no instance type has room for cpu=64") || !strings.Contains(r, "c.4xlarge") {
		t.Errorf("reason %q", r)
	}
}

func TestSpotPreferredWhenAllowed(t *testing.T) {
	plan := mustSolve(t, input(pods(1, podOpts{cpu: "1", mem: "1Gi"}), &scheduling.NodePool{Name: "default"}))
	// Spot g.large costs 0.036, the cheapest offering of all.
	expect(t, plan, "g.large/zone-a/spot:default/p0")
	if d := plan.CostPerHour - 0.036; d > 1e-9 || d < -1e-9 {
		t.Errorf("cost %v", plan.CostPerHour)
	}
}

func TestUnavailableOfferingsAreSkipped(t *testing.T) {
	in := input(pods(1, podOpts{cpu: "1", mem: "1Gi"}), &scheduling.NodePool{Name: "default"})
	in.Unavailable = map[scheduling.OfferingKey]bool{}
	for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
		in.Unavailable[scheduling.OfferingKey{InstanceType: "g.large", Zone: z, CapacityType: "spot"}] = true
	}
	in.Unavailable[scheduling.OfferingKey{InstanceType: "c.large", Zone: "zone-a", CapacityType: "spot"}] = true
	plan := mustSolve(t, in)
	expect(t, plan, "c.large/zone-b/spot:default/p0")
}

func TestNodeSelectorAndRequiredAffinityORTerms(t *testing.T) {
	arm := mustSolve(t, input(pods(1, podOpts{cpu: "1", nodeSelector: map[string]string{scheduling.LabelArch: "arm64"}})))
	expect(t, arm, "g.large/zone-a/on-demand:default/p0")
	// First term asks for a zone no type offers; the second term holds.
	aff := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: scheduling.LabelZone, Operator: in, Values: []string{"zone-x"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: scheduling.LabelZone, Operator: in, Values: []string{"zone-c"}}}},
		}}}}
	plan := mustSolve(t, input(pods(1, podOpts{cpu: "1", affinity: aff})))
	expect(t, plan, "g.large/zone-c/on-demand:default/p0")
}

func TestPreferredNodeAffinityHeaviestFirstThenRelaxed(t *testing.T) {
	pref := func(zone string, w int32) corev1.PreferredSchedulingTerm {
		return corev1.PreferredSchedulingTerm{Weight: w, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: scheduling.LabelZone, Operator: in, Values: []string{zone}}}}}
	}
	aff := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
		pref("zone-b", 10), pref("zone-x", 50), pref("zone-c", 1)}}}
	// zone-x (heaviest) is impossible, then zone-b (next heaviest) holds.
	plan := mustSolve(t, input(pods(1, podOpts{cpu: "1", affinity: aff})))
	expect(t, plan, "g.large/zone-b/on-demand:default/p0")
}

func TestTaintsAndReasons(t *testing.T) {
	gpuTaint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	tainted := odOnly(&scheduling.NodePool{Name: "default", Taints: []corev1.Taint{gpuTaint}})
	gpu := odOnly(&scheduling.NodePool{Name: "gpu", Taints: []corev1.Taint{gpuTaint},
		Requirements: scheduling.NewRequirements(req("karpenter.k8s.aws/instance-family", in, "c"))})
	p := pods(1, podOpts{cpu: "1", nodeSelector: map[string]string{scheduling.LabelArch: "arm64"}})
	plan := mustSolve(t, input(p, tainted, gpu))
	expect(t, plan, "unschedulable default/p0")
	want := `no NodePool tolerates taint dedicated=gpu:NoSchedule; NodePool "gpu" requires instance-family in [c] but pod requires arch in [arm64]`
	if r := reasonOf(plan, "p0"); r != want {
		t.Errorf("reason\n  got  %q\n  want %q", r, want)
	}
	tol := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule}}
	plan = mustSolve(t, input(pods(1, podOpts{cpu: "1", tolerations: tol}), tainted))
	expect(t, plan, "g.large/zone-a/on-demand:default/p0")
	if len(plan.NodeClaims[0].Taints) != 1 || plan.NodeClaims[0].Taints[0].Key != "dedicated" {
		t.Errorf("claim taints %v", plan.NodeClaims[0].Taints)
	}
	// Startup taints never block.
	startup := odOnly(&scheduling.NodePool{Name: "default", StartupTaints: []corev1.Taint{{Key: "cilium", Effect: corev1.TaintEffectNoSchedule}}})
	plan = mustSolve(t, input(pods(1, podOpts{cpu: "1"}), startup))
	expect(t, plan, "g.large/zone-a/on-demand:default/p0")
	// PreferNoSchedule is honoured first, then tolerated as the last relaxation.
	prefer := odOnly(&scheduling.NodePool{Name: "soft", Taints: []corev1.Taint{{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule}}})
	plan = mustSolve(t, input(pods(1, podOpts{cpu: "1"}), prefer))
	expect(t, plan, "g.large/zone-a/on-demand:default/p0")
}

func TestCustomLabelsMustBeDefined(t *testing.T) {
	plan := mustSolve(t, input(pods(1, podOpts{cpu: "1", nodeSelector: map[string]string{"team": "a"}})))
	expect(t, plan, "unschedulable default/p0")
	if r := reasonOf(plan, "p0"); !strings.Contains(r, `label "team" is not defined by the NodePool`) {
		t.Errorf("reason %q", r)
	}
	labelled := odOnly(&scheduling.NodePool{Name: "team-a", Labels: map[string]string{"team": "a"}})
	plan = mustSolve(t, input(pods(1, podOpts{cpu: "1", nodeSelector: map[string]string{"team": "a"}}), labelled))
	expect(t, plan, "g.large/zone-a/on-demand:default/p0")
	if plan.NodeClaims[0].Labels["team"] != "a" {
		t.Errorf("labels %v", plan.NodeClaims[0].Labels)
	}
	// NotIn on an undefined custom label is fine: the node will lack it.
	notInAff := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "team", Operator: notIn, Values: []string{"b"}}}}}}}}
	plan = mustSolve(t, input(pods(1, podOpts{cpu: "1", affinity: notInAff})))
	expect(t, plan, "g.large/zone-a/on-demand:default/p0")
	// Requirement-defined label values become node labels.
	byReq := odOnly(&scheduling.NodePool{Name: "r", Requirements: scheduling.NewRequirements(req("team", in, "a", "b"))})
	plan = mustSolve(t, input(pods(1, podOpts{cpu: "1", nodeSelector: map[string]string{"team": "b"}}), byReq))
	expect(t, plan, "g.large/zone-a/on-demand:default/p0")
	if plan.NodeClaims[0].Labels["team"] != "b" {
		t.Errorf("labels %v", plan.NodeClaims[0].Labels)
	}
}

func spreadC(key string, skew int32, sel map[string]string, how corev1.UnsatisfiableConstraintAction) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{MaxSkew: skew, TopologyKey: key, WhenUnsatisfiable: how,
		LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}
}

func TestZonalSpread(t *testing.T) {
	l := map[string]string{"app": "web"}
	plan := mustSolve(t, input(pods(6, podOpts{cpu: "500m", labels: l, spread: []corev1.TopologySpreadConstraint{spreadC(scheduling.LabelZone, 1, l, corev1.DoNotSchedule)}})))
	zones := map[string]int{}
	for _, c := range plan.NodeClaims {
		zones[c.Zone] += len(c.Pods)
	}
	if !reflect.DeepEqual(zones, map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}) {
		t.Errorf("zones %v", zones)
	}
	if len(plan.NodeClaims) != 3 {
		t.Errorf("want one claim per zone, got %v", summary(plan))
	}
}

func TestHostnameSpreadAndMinDomains(t *testing.T) {
	l := map[string]string{"app": "web"}
	plan := mustSolve(t, input(pods(3, podOpts{cpu: "100m", labels: l, spread: []corev1.TopologySpreadConstraint{spreadC(scheduling.LabelHostname, 1, l, corev1.DoNotSchedule)}})))
	if len(plan.NodeClaims) != 3 {
		t.Errorf("hostname spread maxSkew 1: want 3 claims, got %v", summary(plan))
	}
	// minDomains 5 over 3 zones: the global minimum counts as 0, so each zone
	// takes at most maxSkew pods.
	c := spreadC(scheduling.LabelZone, 1, l, corev1.DoNotSchedule)
	five := int32(5)
	c.MinDomains = &five
	plan = mustSolve(t, input(pods(5, podOpts{cpu: "100m", labels: l, spread: []corev1.TopologySpreadConstraint{c}})))
	placed := 0
	for _, cl := range plan.NodeClaims {
		placed += len(cl.Pods)
	}
	if placed != 3 || len(plan.Unschedulable) != 2 {
		t.Errorf("minDomains: placed %d, unschedulable %d: %v", placed, len(plan.Unschedulable), summary(plan))
	}
}

func TestScheduleAnywayRelaxedUnderNodeLimit(t *testing.T) {
	l := map[string]string{"app": "web"}
	pool := odOnly(&scheduling.NodePool{Name: "default", Limits: rl("nodes", "1")})
	plan := mustSolve(t, input(pods(3, podOpts{cpu: "100m", labels: l, spread: []corev1.TopologySpreadConstraint{spreadC(scheduling.LabelHostname, 1, l, corev1.ScheduleAnyway)}}), pool))
	if len(plan.NodeClaims) != 1 || len(plan.NodeClaims[0].Pods) != 3 {
		t.Errorf("ScheduleAnyway must relax onto the single allowed node: %v", summary(plan))
	}
	plan = mustSolve(t, input(pods(3, podOpts{cpu: "100m", labels: l, spread: []corev1.TopologySpreadConstraint{spreadC(scheduling.LabelHostname, 1, l, corev1.DoNotSchedule)}}), pool))
	if len(plan.NodeClaims) != 1 || len(plan.Unschedulable) != 2 {
		t.Errorf("DoNotSchedule must not relax: %v", summary(plan))
	}
	if r := reasonOf(plan, "p1"); !strings.Contains(r, "node limit") {
		t.Errorf("reason %q", r)
	}
}

func existing(name, zone string, cpu string, ps ...*corev1.Pod) *scheduling.ExistingNode {
	return &scheduling.ExistingNode{Name: name, Initialized: true,
		Labels:      map[string]string{scheduling.LabelZone: zone, scheduling.LabelHostname: name, scheduling.LabelArch: "amd64"},
		Allocatable: rl("cpu", cpu, "memory", "16Gi", "pods", "110"), Pods: ps}
}

func TestSpreadNodePolicies(t *testing.T) {
	l := map[string]string{"app": "web"}
	pool := odOnly(&scheduling.NodePool{Name: "default"})
	// nodeAffinityPolicy: zone-a and zone-b hold one matching pod each; the
	// pod may only use a or b. Honor (default) ignores empty zone-c for the
	// minimum, so skew in zone-a is 1; Ignore counts zone-c, so skew is 2.
	aff := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: scheduling.LabelZone, Operator: in, Values: []string{"zone-a", "zone-b"}}}}}}}}
	mk := func(policy *corev1.NodeInclusionPolicy) *scheduling.Input {
		c := spreadC(scheduling.LabelZone, 1, l, corev1.DoNotSchedule)
		c.NodeAffinityPolicy = policy
		p := mkPod(podOpts{name: "new", cpu: "100m", labels: l, affinity: aff, spread: []corev1.TopologySpreadConstraint{c}})
		in := input([]*corev1.Pod{p}, pool)
		in.Nodes = []*scheduling.ExistingNode{
			existing("na", "zone-a", "1", mkPod(podOpts{name: "wa", cpu: "1", labels: l})),
			existing("nb", "zone-b", "1", mkPod(podOpts{name: "wb", cpu: "1", labels: l})),
		}
		return in
	}
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	expect(t, mustSolve(t, mk(&honor)), "g.large/zone-a/on-demand:default/new")
	expect(t, mustSolve(t, mk(&ignore)), "unschedulable default/new")

	// nodeTaintsPolicy: zone-a's node is tainted and holds two matching pods.
	// Ignore (default) counts them, so the pod must go elsewhere; Honor skips
	// the tainted node, so zone-a is as empty as the others and wins the tie.
	mk2 := func(policy *corev1.NodeInclusionPolicy) *scheduling.Input {
		c := spreadC(scheduling.LabelZone, 1, l, corev1.DoNotSchedule)
		c.NodeTaintsPolicy = policy
		p := mkPod(podOpts{name: "new", cpu: "100m", labels: l, spread: []corev1.TopologySpreadConstraint{c}})
		in := input([]*corev1.Pod{p}, pool)
		n := existing("na", "zone-a", "1", mkPod(podOpts{name: "w1", cpu: "100m", labels: l}), mkPod(podOpts{name: "w2", cpu: "100m", labels: l}))
		n.Taints = []corev1.Taint{{Key: "maint", Effect: corev1.TaintEffectNoSchedule}}
		in.Nodes = []*scheduling.ExistingNode{n}
		return in
	}
	expect(t, mustSolve(t, mk2(nil)), "g.large/zone-b/on-demand:default/new")
	expect(t, mustSolve(t, mk2(&honor)), "g.large/zone-a/on-demand:default/new")
}

func TestMatchLabelKeys(t *testing.T) {
	mk := func(keys []string) *scheduling.Input {
		sel := map[string]string{"app": "web"}
		c := spreadC(scheduling.LabelHostname, 1, sel, corev1.DoNotSchedule)
		c.MatchLabelKeys = keys
		p := mkPod(podOpts{name: "new", cpu: "100m", labels: map[string]string{"app": "web", "pod-template-hash": "v2"}, spread: []corev1.TopologySpreadConstraint{c}})
		in := input([]*corev1.Pod{p})
		in.Nodes = []*scheduling.ExistingNode{existing("n1", "zone-a", "4", mkPod(podOpts{name: "old", cpu: "100m", labels: map[string]string{"app": "web", "pod-template-hash": "v1"}}))}
		return in
	}
	expect(t, mustSolve(t, mk([]string{"pod-template-hash"})), "node n1:default/new")
	expect(t, mustSolve(t, mk(nil)), "g.large/zone-a/on-demand:default/new")
}

func podAff(kind string, key string, sel map[string]string) *corev1.Affinity {
	term := []corev1.PodAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: sel}, TopologyKey: key}}
	switch kind {
	case "affinity":
		return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term}}
	case "anti":
		return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term}}
	case "prefer-anti":
		return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term[0]}}}}
	case "prefer-affinity":
		return &corev1.Affinity{PodAffinity: &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term[0]}}}}
	}
	panic(kind)
}

func TestPodAffinity(t *testing.T) {
	db := map[string]string{"app": "db"}
	// Zone affinity follows the existing db pod to zone-b.
	in := input([]*corev1.Pod{mkPod(podOpts{name: "web", cpu: "100m", affinity: podAff("affinity", scheduling.LabelZone, db)})})
	in.Nodes = []*scheduling.ExistingNode{existing("n1", "zone-b", "1", mkPod(podOpts{name: "db", cpu: "1", labels: db}))}
	expect(t, mustSolve(t, in), "g.large/zone-b/on-demand:default/web")
	// Hostname affinity: only the db node qualifies; it has no room.
	in = input([]*corev1.Pod{mkPod(podOpts{name: "web", cpu: "100m", affinity: podAff("affinity", scheduling.LabelHostname, db)})})
	in.Nodes = []*scheduling.ExistingNode{existing("n1", "zone-b", "1", mkPod(podOpts{name: "db", cpu: "1", labels: db}))}
	plan := mustSolve(t, in)
	expect(t, plan, "unschedulable default/web")
	if r := reasonOf(plan, "web"); !strings.Contains(r, "pod affinity") {
		t.Errorf("reason %q", r)
	}
	// Nothing matches and the pod does not select itself: unschedulable.
	plan = mustSolve(t, input([]*corev1.Pod{mkPod(podOpts{name: "web", cpu: "100m", affinity: podAff("affinity", scheduling.LabelZone, db)})}))
	expect(t, plan, "unschedulable default/web")
	// Self-affinity bootstraps one zone and keeps every replica there.
	l := map[string]string{"app": "cache"}
	plan = mustSolve(t, input(pods(4, podOpts{cpu: "1500m", labels: l, affinity: podAff("affinity", scheduling.LabelZone, l)})))
	zones := map[string]bool{}
	for _, c := range plan.NodeClaims {
		zones[c.Zone] = true
	}
	if len(zones) != 1 || len(plan.Unschedulable) != 0 {
		t.Errorf("self-affinity spread over %v: %v", zones, summary(plan))
	}
	// The follower sorts first (bigger) but is retried after the db pod it
	// follows has been placed, like Karpenter's retry queue.
	plan = mustSolve(t, input([]*corev1.Pod{
		mkPod(podOpts{name: "web", cpu: "1500m", affinity: podAff("affinity", scheduling.LabelHostname, db)}),
		mkPod(podOpts{name: "db", cpu: "100m", labels: db, seq: 1}),
	}))
	expect(t, plan, "g.large/zone-a/on-demand:default/db,default/web")
	// Preferred affinity that cannot be met is relaxed.
	plan = mustSolve(t, input([]*corev1.Pod{mkPod(podOpts{name: "web", cpu: "100m", affinity: podAff("prefer-affinity", scheduling.LabelZone, db)})}))
	expect(t, plan, "g.large/zone-a/on-demand:default/web")
}

func TestPodAntiAffinity(t *testing.T) {
	l := map[string]string{"app": "web"}
	plan := mustSolve(t, input(pods(3, podOpts{cpu: "100m", labels: l, affinity: podAff("anti", scheduling.LabelHostname, l)})))
	if len(plan.NodeClaims) != 3 {
		t.Errorf("want one claim per replica: %v", summary(plan))
	}
	// An existing pod's anti-affinity keeps matching pods off its node.
	in := input([]*corev1.Pod{mkPod(podOpts{name: "web", cpu: "100m", labels: l})})
	in.Nodes = []*scheduling.ExistingNode{existing("n1", "zone-a", "4", mkPod(podOpts{name: "guard", cpu: "100m", affinity: podAff("anti", scheduling.LabelHostname, l)}))}
	expect(t, mustSolve(t, in), "g.large/zone-a/on-demand:default/web")
	// Zone anti-affinity: at most one replica per zone; the fourth cannot go anywhere.
	plan = mustSolve(t, input(pods(4, podOpts{cpu: "100m", labels: l, affinity: podAff("anti", scheduling.LabelZone, l)})))
	zones := map[string]int{}
	for _, c := range plan.NodeClaims {
		zones[c.Zone] += len(c.Pods)
	}
	if !reflect.DeepEqual(zones, map[string]int{"zone-a": 1, "zone-b": 1, "zone-c": 1}) || len(plan.Unschedulable) != 1 {
		t.Errorf("zone anti-affinity: %v", summary(plan))
	}
	// Preferred anti-affinity relaxes when only one node may exist.
	pool := odOnly(&scheduling.NodePool{Name: "default", Limits: rl("nodes", "1")})
	plan = mustSolve(t, input(pods(2, podOpts{cpu: "100m", labels: l, affinity: podAff("prefer-anti", scheduling.LabelHostname, l)}), pool))
	if len(plan.NodeClaims) != 1 || len(plan.NodeClaims[0].Pods) != 2 {
		t.Errorf("preferred anti-affinity should relax: %v", summary(plan))
	}
}

func TestHostPorts(t *testing.T) {
	plan := mustSolve(t, input(pods(2, podOpts{cpu: "100m", hostPort: 8080})))
	if len(plan.NodeClaims) != 2 {
		t.Errorf("two pods on one host port need two nodes: %v", summary(plan))
	}
	in := input(pods(1, podOpts{cpu: "100m", hostPort: 8080}))
	ds := mkPod(podOpts{name: "ds", cpu: "10m", hostPort: 8080})
	in.DaemonSets = []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "proxy", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: ds.Spec}}}}
	plan = mustSolve(t, in)
	expect(t, plan, "unschedulable default/p0")
	if r := reasonOf(plan, "p0"); !strings.Contains(r, "host ports conflict") {
		t.Errorf("reason %q", r)
	}
}

func TestVolumeTopology(t *testing.T) {
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	sc := "gp3"
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: scheduling.LabelZone, Operator: in, Values: []string{"zone-c"}}}}}}}}}
	pvcs := []*corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unbound", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc}},
	}
	scs := []*storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "gp3"}, VolumeBindingMode: &wffc,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: scheduling.LabelZone, Values: []string{"zone-b"}}}}}}}
	withClaim := func(name, claim string) *corev1.Pod {
		p := mkPod(podOpts{name: name, cpu: "100m"})
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		return p
	}
	in := input([]*corev1.Pod{withClaim("a", "bound"), withClaim("b", "unbound"), withClaim("c", "missing")})
	in.PersistentVolumes, in.PersistentVolumeClaims, in.StorageClasses = []*corev1.PersistentVolume{pv}, pvcs, scs
	plan := mustSolve(t, in)
	expect(t, plan, "g.large/zone-c/on-demand:default/a", "g.large/zone-b/on-demand:default/b", "unschedulable default/c")
	if r := reasonOf(plan, "c"); !strings.Contains(r, `persistent volume claim "missing" not found`) {
		t.Errorf("reason %q", r)
	}
}

func TestDaemonSetOverheadPerInstanceType(t *testing.T) {
	// A 1-cpu daemon runs only on amd64 nodes, so a 1.5-cpu pod fits a
	// 2-cpu arm64 node but not a 2-cpu amd64 one.
	ds := mkPod(podOpts{name: "ds", cpu: "1", nodeSelector: map[string]string{scheduling.LabelArch: "amd64"}})
	in := input(pods(1, podOpts{cpu: "1500m"}))
	in.DefaultInstanceTypes = []*scheduling.InstanceType{
		mkType("c.large", 2, 4, 20, "amd64", 0.05), mkType("g.large", 2, 4, 20, "arm64", 0.09), mkType("c.xlarge", 4, 8, 40, "amd64", 0.20)}
	in.DaemonSets = []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "amd-agent", Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: ds.Spec}}}}
	plan := mustSolve(t, in)
	expect(t, plan, "g.large/zone-a/on-demand:default/p0")
	// On c.xlarge the daemon's share is part of the claim's requests.
	in.Pods = pods(1, podOpts{cpu: "2500m"})
	plan = mustSolve(t, in)
	expect(t, plan, "c.xlarge/zone-a/on-demand:default/p0")
	if q := plan.NodeClaims[0].Requests[corev1.ResourceCPU]; q.String() != "3500m" {
		t.Errorf("claim requests cpu %s, want pod + daemon = 3500m", q.String())
	}
}

func TestNodePoolLimits(t *testing.T) {
	types := []*scheduling.InstanceType{mkType("s", 2, 8, 20, "amd64", 0.10), mkType("l", 4, 16, 40, "amd64", 0.20)}
	// Limit 8 cpu; the first claim holds two 1.5-cpu pods (only "l" fits 3
	// cpu) and reserves 4; the second does the same; the fifth pod finds the
	// limit exhausted.
	pool := odOnly(&scheduling.NodePool{Name: "default", Limits: rl("cpu", "8")})
	in := input(pods(5, podOpts{cpu: "1500m"}), pool)
	in.DefaultInstanceTypes = types
	plan := mustSolve(t, in)
	if len(plan.NodeClaims) != 2 || len(plan.Unschedulable) != 1 {
		t.Fatalf("limits: %v", summary(plan))
	}
	if r := plan.Unschedulable[0].Reason; !strings.Contains(r, "limits exhausted") {
		t.Errorf("reason %q", r)
	}
	// Existing capacity of the pool counts: a 4-cpu node leaves room for one claim.
	in.Nodes = []*scheduling.ExistingNode{{Name: "old", Initialized: true, Labels: map[string]string{scheduling.LabelNodePool: "default"},
		Allocatable: rl("cpu", "4", "memory", "1Gi", "pods", "0"), Capacity: rl("cpu", "4")}}
	plan = mustSolve(t, in)
	if len(plan.NodeClaims) != 1 || len(plan.Unschedulable) != 3 {
		t.Errorf("limits with existing capacity: %v", summary(plan))
	}
}

func TestMinValues(t *testing.T) {
	fam := req("karpenter.k8s.aws/instance-family", exists)
	fam.MinValues = 2
	pool := odOnly(&scheduling.NodePool{Name: "default", Requirements: scheduling.NewRequirements(fam)})
	in := input(pods(1, podOpts{cpu: "1"}), pool)
	in.DefaultInstanceTypes = []*scheduling.InstanceType{
		mkType("a.large", 2, 4, 20, "amd64", 0.05), mkType("b.large", 2, 4, 20, "amd64", 0.07), mkType("b.xlarge", 4, 8, 20, "amd64", 0.14)}
	plan := mustSolve(t, in)
	expect(t, plan, "a.large/zone-a/on-demand:default/p0")
	if !reflect.DeepEqual(plan.NodeClaims[0].InstanceTypeOptions, []string{"a.large", "b.large", "b.xlarge"}) || plan.NodeClaims[0].MinValues["karpenter.k8s.aws/instance-family"] != 2 {
		t.Errorf("options %v minValues %v", plan.NodeClaims[0].InstanceTypeOptions, plan.NodeClaims[0].MinValues)
	}
	// A 3-cpu pod only fits family b: minValues cannot be met.
	in.Pods = pods(1, podOpts{cpu: "3"})
	plan = mustSolve(t, in)
	expect(t, plan, "unschedulable default/p0")
	if r := reasonOf(plan, "p0"); !strings.Contains(r, "minValues") {
		t.Errorf("reason %q", r)
	}
}

func TestWeightsOrderPools(t *testing.T) {
	arm := odOnly(&scheduling.NodePool{Name: "arm", Weight: 10, Requirements: scheduling.NewRequirements(req(scheduling.LabelArch, in, "arm64"))})
	general := odOnly(&scheduling.NodePool{Name: "general"})
	// 1.5 cpu each, so repacking cannot fold one claim into the other.
	ps := []*corev1.Pod{mkPod(podOpts{name: "any", cpu: "1500m"}), mkPod(podOpts{name: "x86", cpu: "1500m", nodeSelector: map[string]string{scheduling.LabelArch: "amd64"}, seq: 1})}
	plan := mustSolve(t, input(ps, general, arm))
	expect(t, plan, "g.large/zone-a/on-demand:default/any", "c.large/zone-a/on-demand:default/x86")
	for _, c := range plan.NodeClaims {
		want := map[string]string{"default/any": "arm", "default/x86": "general"}[c.Pods[0]]
		if c.NodePool != want {
			t.Errorf("%s from %s, want %s", c.Pods[0], c.NodePool, want)
		}
	}
}

func TestExistingNodesFirstAndEphemeralTaints(t *testing.T) {
	in := input(pods(2, podOpts{cpu: "1"}))
	in.Nodes = []*scheduling.ExistingNode{existing("n1", "zone-a", "1500m")}
	expect(t, mustSolve(t, in), "node n1:default/p0", "g.large/zone-a/on-demand:default/p1")
	// An uninitialized (in-flight) node's not-ready taint is ignored; an
	// initialized node's is not.
	notReady := []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
	n := existing("n1", "zone-a", "4")
	n.Taints, n.Initialized = notReady, false
	in = input(pods(1, podOpts{cpu: "1"}))
	in.Nodes = []*scheduling.ExistingNode{n}
	expect(t, mustSolve(t, in), "node n1:default/p0")
	n.Initialized = true
	expect(t, mustSolve(t, in), "g.large/zone-a/on-demand:default/p0")
}

func TestDeterministicAndOptionsCapped(t *testing.T) {
	in := diverseInput(500)
	a, err := scheduling.Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := scheduling.Solve(context.Background(), diverseInput(500))
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Error("equal input gave different plans")
	}
	for _, c := range a.NodeClaims {
		if len(c.InstanceTypeOptions) > scheduling.MaxInstanceTypeOptions {
			t.Fatalf("claim %s has %d options", c.Name, len(c.InstanceTypeOptions))
		}
	}
	checkPlan(t, in, a)
}

func TestExtendedResources(t *testing.T) {
	gpu := mkType("g5.xlarge", 4, 16, 58, "amd64", 1.00)
	gpu.Allocatable["nvidia.com/gpu"] = rl("x", "1")["x"]
	gpu.Labels["karpenter.k8s.aws/instance-gpu-count"] = "1"
	p := mkPod(podOpts{name: "train", cpu: "1"})
	p.Spec.Containers[0].Resources.Limits = rl("nvidia.com/gpu", "1")
	in := input([]*corev1.Pod{p})
	in.DefaultInstanceTypes = append(testTypes(), gpu)
	plan := mustSolve(t, in)
	expect(t, plan, "g5.xlarge/zone-a/on-demand:default/train")
	if q := plan.NodeClaims[0].Allocatable["nvidia.com/gpu"]; q.String() != "1" {
		t.Errorf("allocatable must list the GPU: %v", plan.NodeClaims[0].Allocatable)
	}
	// Two GPUs fit nowhere; the reason says what is short.
	p2 := mkPod(podOpts{name: "big", cpu: "1"})
	p2.Spec.Containers[0].Resources.Limits = rl("nvidia.com/gpu", "2")
	in.Pods = []*corev1.Pod{p2}
	plan = mustSolve(t, in)
	expect(t, plan, "unschedulable default/big")
	if r := reasonOf(plan, "big"); !strings.Contains(r, "nvidia.com/gpu") {
		t.Errorf("reason %q", r)
	}
}

func TestStartupTaintsOnUninitializedNodes(t *testing.T) {
	n := existing("n1", "zone-a", "4")
	cilium := corev1.Taint{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}
	n.Taints, n.StartupTaints, n.Initialized = []corev1.Taint{cilium}, []corev1.Taint{cilium}, false
	in := input(pods(1, podOpts{cpu: "1"}))
	in.Nodes = []*scheduling.ExistingNode{n}
	expect(t, mustSolve(t, in), "node n1:default/p0")
	n.Initialized = true
	expect(t, mustSolve(t, in), "g.large/zone-a/on-demand:default/p0")
}

func TestInFlightNodeReservesDaemonOverhead(t *testing.T) {
	// An in-flight 2-cpu claim whose 1-cpu daemon has not started yet: only
	// 1 cpu is free for pending pods, so the second 1-cpu pod needs a new node.
	ds := mkPod(podOpts{name: "ds", cpu: "1"})
	n := existing("inflight-1", "zone-a", "2")
	n.Initialized, n.InFlight = false, true
	in := input(pods(2, podOpts{cpu: "1"}))
	in.Nodes = []*scheduling.ExistingNode{n}
	in.DaemonSets = []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system", UID: "ds-uid"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: ds.Spec}}}}
	in.DefaultInstanceTypes = []*scheduling.InstanceType{mkType("c.xlarge", 4, 8, 40, "amd64", 0.20)}
	expect(t, mustSolve(t, in), "node inflight-1:default/p0", "c.xlarge/zone-a/on-demand:default/p1")
	// Once the daemon pod is there it is counted as a pod, not reserved twice.
	running := mkPod(podOpts{name: "agent-x", cpu: "1"})
	running.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", UID: "ds-uid"}}
	n.Pods = []*corev1.Pod{running}
	expect(t, mustSolve(t, in), "node inflight-1:default/p0", "c.xlarge/zone-a/on-demand:default/p1")
}

func TestSpreadOverCapacityTypeAndCustomKeys(t *testing.T) {
	l := map[string]string{"app": "web"}
	// Capacity type: one spot, one on-demand.
	plan := mustSolve(t, input(pods(2, podOpts{cpu: "100m", labels: l, spread: []corev1.TopologySpreadConstraint{spreadC(scheduling.LabelCapacityType, 1, l, corev1.DoNotSchedule)}}),
		&scheduling.NodePool{Name: "default"}))
	cts := map[string]int{}
	for _, c := range plan.NodeClaims {
		cts[c.CapacityType] += len(c.Pods)
	}
	if !reflect.DeepEqual(cts, map[string]int{"spot": 1, "on-demand": 1}) {
		t.Errorf("capacity-type spread: %v", summary(plan))
	}
	// A custom key the NodePool defines: racks r1 and r2 take two pods each.
	racks := odOnly(&scheduling.NodePool{Name: "racks", Requirements: scheduling.NewRequirements(req("example.com/rack", in, "r1", "r2"))})
	plan = mustSolve(t, input(pods(4, podOpts{cpu: "100m", labels: l, spread: []corev1.TopologySpreadConstraint{spreadC("example.com/rack", 1, l, corev1.DoNotSchedule)}}), racks))
	byRack := map[string]int{}
	for _, c := range plan.NodeClaims {
		byRack[c.Labels["example.com/rack"]] += len(c.Pods)
	}
	if !reflect.DeepEqual(byRack, map[string]int{"r1": 2, "r2": 2}) {
		t.Errorf("custom-key spread: %v %v", byRack, summary(plan))
	}
}

func TestDegenerateInputs(t *testing.T) {
	// No pods: an empty plan, not nil slices.
	plan := mustSolve(t, input(nil))
	if plan.NodeClaims == nil || plan.Unschedulable == nil || plan.ExistingNodes == nil || plan.CostPerHour != 0 {
		t.Errorf("empty plan %+v", plan)
	}
	// No NodePools.
	noPools := input(pods(1, podOpts{cpu: "1"}))
	noPools.NodePools = nil
	plan = mustSolve(t, noPools)
	if r := reasonOf(plan, "p0"); r != "no NodePools" {
		t.Errorf("reason %q", r)
	}
	// A pool whose requirements exclude every offering.
	nowhere := &scheduling.NodePool{Name: "nowhere", Requirements: scheduling.NewRequirements(req(scheduling.LabelZone, in, "zone-x"))}
	plan = mustSolve(t, input(pods(1, podOpts{cpu: "1"}), nowhere))
	if r := reasonOf(plan, "p0"); !strings.Contains(r, `NodePool "nowhere" has no launchable instance types`) {
		t.Errorf("reason %q", r)
	}
	// A pod without requests still takes a pod slot.
	plan = mustSolve(t, input(pods(3, podOpts{})))
	if len(plan.NodeClaims) != 1 || len(plan.NodeClaims[0].Pods) != 3 {
		t.Errorf("request-less pods: %v", summary(plan))
	}
	// Invalid input is an error naming what is wrong.
	bad := odOnly(&scheduling.NodePool{Name: "bad", Requirements: scheduling.NewRequirements(req("k", in, "a"), req("k", in, "b"))})
	if _, err := scheduling.Solve(context.Background(), input(pods(1, podOpts{cpu: "1"}), bad)); err == nil || !strings.Contains(err.Error(), `nodepool bad: requirements on "k" admit no value`) {
		t.Errorf("err %v", err)
	}
	dup := input(append(pods(1, podOpts{cpu: "1"}), pods(1, podOpts{cpu: "1"})...))
	if _, err := scheduling.Solve(context.Background(), dup); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("err %v", err)
	}
	// A pod with an invalid spread constraint is reported, not dropped.
	badSpread := mkPod(podOpts{name: "x", cpu: "1", spread: []corev1.TopologySpreadConstraint{{MaxSkew: 0, TopologyKey: scheduling.LabelZone, LabelSelector: &metav1.LabelSelector{}}}})
	plan = mustSolve(t, input([]*corev1.Pod{badSpread}))
	if r := reasonOf(plan, "x"); !strings.Contains(r, "maxSkew must be positive") {
		t.Errorf("reason %q", r)
	}
}
