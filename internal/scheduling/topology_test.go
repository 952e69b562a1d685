package scheduling_test

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Hand-checked topology cases: zonal and hostname spread, spread node
// policies, matchLabelKeys, pod affinity and anti-affinity.

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
