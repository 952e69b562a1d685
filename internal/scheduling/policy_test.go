package scheduling_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// The same 3-cpu pod as TestMinValues: only family b fits it, so a pool
// asking for 2 families cannot keep its minValues. Karpenter's
// MIN_VALUES_POLICY=BestEffort makes the claim anyway with the values
// there are and marks it (v1.14.1 scheduling/nodeclaim.go CanAdd with
// relaxMinValues); Strict leaves the pod pending.
func TestMinValuesBestEffortRelaxesInsteadOfRefusing(t *testing.T) {
	fam := req("karpenter.k8s.aws/instance-family", exists)
	fam.MinValues = 2
	pool := odOnly(&scheduling.NodePool{Name: "default", Requirements: scheduling.NewRequirements(fam)})
	in := input(pods(1, podOpts{cpu: "3"}), pool)
	in.DefaultInstanceTypes = []*scheduling.InstanceType{
		mkType("a.large", 2, 4, 20, "amd64", 0.05), mkType("b.large", 2, 4, 20, "amd64", 0.07), mkType("b.xlarge", 4, 8, 20, "amd64", 0.14)}
	expect(t, mustSolve(t, in), "unschedulable default/p0")

	in.Policy.MinValuesBestEffort = true
	plan := mustSolve(t, in)
	expect(t, plan, "b.xlarge/zone-a/on-demand:default/p0")
	c := plan.NodeClaims[0]
	if !c.MinValuesRelaxed || c.MinValues["karpenter.k8s.aws/instance-family"] != 1 {
		t.Errorf("relaxed %v minValues %v, want relaxed to 1", c.MinValuesRelaxed, c.MinValues)
	}
	// A pod the pool can serve with two families keeps the pool's minValues.
	in.Pods = pods(1, podOpts{cpu: "1"})
	plan = mustSolve(t, in)
	if c := plan.NodeClaims[0]; c.MinValuesRelaxed || c.MinValues["karpenter.k8s.aws/instance-family"] != 2 {
		t.Errorf("relaxed %v minValues %v, want kept at 2", c.MinValuesRelaxed, c.MinValues)
	}
}

// PREFERENCE_POLICY=Ignore plans as if preferences were absent: a
// preferred node affinity for the dearer arm64 type and a ScheduleAnyway
// zone spread no longer shape the plan (Karpenter v1.14.1
// NewStrictPodRequirements, topology.go newForTopologies).
func TestIgnorePreferencesPlansWithoutThem(t *testing.T) {
	prefer := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
		Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: scheduling.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}}}}}}
	spread := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: scheduling.LabelZone, WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	types := []*scheduling.InstanceType{mkType("x.large", 4, 8, 20, "amd64", 0.10), mkType("y.large", 4, 8, 20, "arm64", 0.20)}
	build := func(policy scheduling.Policy) *scheduling.Plan {
		ps := pods(3, podOpts{cpu: "1", labels: map[string]string{"app": "web"}, affinity: prefer, spread: spread})
		in := input(ps, odOnly(&scheduling.NodePool{Name: "default"}))
		in.DefaultInstanceTypes = types
		in.Policy = policy
		return mustSolve(t, in)
	}
	respected := build(scheduling.Policy{})
	if got := strings.Join(summary(respected), " "); !strings.Contains(got, "y.large") || len(respected.NodeClaims) < 2 {
		t.Fatalf("respecting preferences: %s, want arm64 claims spread over zones", got)
	}
	ignored := build(scheduling.Policy{IgnorePreferences: true})
	if len(ignored.NodeClaims) != 1 || ignored.NodeClaims[0].InstanceType != "x.large" {
		t.Errorf("ignoring preferences: %s, want one x.large for the three pods", summary(ignored))
	}
}
