package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

func requireExpr(exprs ...corev1.NodeSelectorRequirement) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}}}}
}

// A new node carries a value for each custom key its claim's requirements
// name, whatever the operator, as Karpenter's NodeClaimTemplate.ToNodeClaim
// labels it with Requirement.Any() of each (resolveCustomLabelsFromRequirements,
// sigs.k8s.io/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go),
// narrowed by the pods placed on it; a pod requiring the key then finds it
// (checkPlan checks every pod's affinity against the claim's labels).
func TestCustomKeyRequirementsLabelTheNode(t *testing.T) {
	exists := corev1.NodeSelectorRequirement{Key: "", Operator: corev1.NodeSelectorOpExists}
	cases := []struct {
		name      string
		pool      scheduling.Requirement
		pod       []corev1.NodeSelectorRequirement
		key, want string
	}{
		{"pool In several, pod Exists", req("rack", in, "r2", "r1"), nil, "rack", "r1"},
		{"pool In several, pod In one of them", req("rack", in, "r1", "r2"),
			[]corev1.NodeSelectorRequirement{{Key: "rack", Operator: corev1.NodeSelectorOpIn, Values: []string{"r2", "r3"}}}, "rack", "r2"},
		{"pool Exists, pod Exists", req("team", corev1.NodeSelectorOpExists), nil, "team", "0"},
		{"pool NotIn, pod Exists", req("team", notIn, "0", "1"), nil, "team", "2"},
		{"pool Gt, pod Exists", req("tier", corev1.NodeSelectorOpGt, "5"), nil, "tier", "6"},
		{"pool Exists, pod Gt and Lt", req("tier", corev1.NodeSelectorOpExists),
			[]corev1.NodeSelectorRequirement{{Key: "tier", Operator: corev1.NodeSelectorOpGt, Values: []string{"10"}},
				{Key: "tier", Operator: corev1.NodeSelectorOpLt, Values: []string{"20"}}}, "tier", "11"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := odOnly(&scheduling.NodePool{Name: "default", Requirements: scheduling.NewRequirements(tc.pool)})
			e := exists
			e.Key = tc.key
			exprs := append([]corev1.NodeSelectorRequirement{e}, tc.pod...)
			plan := mustSolve(t, input(pods(2, podOpts{cpu: "500m", affinity: requireExpr(exprs...)}), pool))
			if len(plan.NodeClaims) != 1 || len(plan.Unschedulable) != 0 {
				t.Fatalf("plan %v", summary(plan))
			}
			if got := plan.NodeClaims[0].Labels[tc.key]; got != tc.want {
				t.Errorf("label %s=%q, want %q (labels %v)", tc.key, got, tc.want, plan.NodeClaims[0].Labels)
			}
		})
	}
}

// DoesNotExist, and well-known keys (decided by the instance type and
// offering, not picked), put no such label on the node.
func TestNoPickedLabelForDoesNotExistOrWellKnownKeys(t *testing.T) {
	pool := odOnly(&scheduling.NodePool{Name: "default", Requirements: scheduling.NewRequirements(
		req("team", corev1.NodeSelectorOpDoesNotExist), req(scheduling.LabelZone, in, "zone-a", "zone-b"),
		req("karpenter.k8s.aws/instance-family", corev1.NodeSelectorOpExists))})
	plan := mustSolve(t, input(pods(1, podOpts{cpu: "500m"}), pool))
	l := plan.NodeClaims[0].Labels
	if _, ok := l["team"]; ok {
		t.Errorf("DoesNotExist key labelled: %v", l)
	}
	if l[scheduling.LabelZone] != plan.NodeClaims[0].Zone || l["karpenter.k8s.aws/instance-family"] != "g" {
		t.Errorf("well-known labels %v", l)
	}
}
