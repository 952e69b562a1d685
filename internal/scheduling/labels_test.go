package scheduling_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// A pod's preferred node affinity values are not validated by the API
// server, yet a satisfiable preference becomes a label of the node launched
// for it, joined into the kubelet's --node-labels. A value such as
// "a,dedicated=pci" would add a label of the pod's choosing (and an invalid
// one makes a node that never joins); the pod is reported unschedulable with
// the reason instead, as Karpenter's provisioner does.
func TestInvalidLabelValuesMakeThePodUnschedulable(t *testing.T) {
	inject := mkPod(podOpts{name: "inject", cpu: "100m", mem: "64Mi"})
	inject.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a,dedicated=pci"}}},
		}}},
	}}
	badKey := mkPod(podOpts{name: "badkey", cpu: "100m", mem: "64Mi", nodeSelector: map[string]string{"bad key": "x"}})
	ok := mkPod(podOpts{name: "ok", cpu: "100m", mem: "64Mi"})
	// The pool lets pods choose a team, so a valid preference would be
	// honoured and become the node's label.
	pool := odOnly(&scheduling.NodePool{Name: "default"})
	pool.Requirements = pool.Requirements.Add(req("team", notIn, "none"))
	plan := mustSolve(t, input([]*corev1.Pod{inject, badKey, ok}, pool))
	for _, c := range plan.NodeClaims {
		for k, v := range c.Labels {
			if strings.ContainsAny(v, ",=") || k == "dedicated" {
				t.Errorf("claim label %s=%q reached the node", k, v)
			}
		}
	}
	if r := reasonOf(plan, "inject"); !strings.Contains(r, "invalid value") {
		t.Errorf("pod with an injecting preferred value: reason %q, want it unschedulable as invalid", r)
	}
	if r := reasonOf(plan, "badkey"); !strings.Contains(r, "invalid label key") {
		t.Errorf("pod with an invalid nodeSelector key: reason %q", r)
	}
	if r := reasonOf(plan, "ok"); r != "" {
		t.Errorf("a valid pod was refused: %s", r)
	}
}

func TestValidLabel(t *testing.T) {
	for _, c := range []struct {
		key, value string
		ok         bool
	}{
		{"team", "payments", true},
		{"example.com/tier", "", true},
		{"team", "a,dedicated=pci", false},
		{"team", "a b", false},
		{"bad key", "x", false},
		{"team", strings.Repeat("x", 64), false},
	} {
		if err := scheduling.ValidLabel(c.key, c.value); (err == nil) != c.ok {
			t.Errorf("ValidLabel(%q, %q) = %v, want ok=%v", c.key, c.value, err, c.ok)
		}
	}
}
