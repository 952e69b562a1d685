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

func existing(name, zone string, cpu string, ps ...*corev1.Pod) *scheduling.ExistingNode {
	return &scheduling.ExistingNode{Name: name, Initialized: true,
		Labels:      map[string]string{scheduling.LabelZone: zone, scheduling.LabelHostname: name, scheduling.LabelArch: "amd64"},
		Allocatable: rl("cpu", cpu, "memory", "16Gi", "pods", "110"), Pods: ps}
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
	// A pool whose requirements admit no value is skipped, with the reason
	// (skippedpool_test.go); invalid input is an error naming what is wrong.
	bad := odOnly(&scheduling.NodePool{Name: "bad", Requirements: scheduling.NewRequirements(req("k", in, "a"), req("k", in, "b"))})
	plan = mustSolve(t, input(pods(1, podOpts{cpu: "1"}), bad))
	if r := reasonOf(plan, "p0"); r != `NodePool "bad" is skipped: its requirements on "k" admit no value` {
		t.Errorf("reason %q", r)
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
