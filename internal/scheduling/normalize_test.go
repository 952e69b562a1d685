package scheduling_test

import (
	"context"
	"testing"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// A requirement on a beta twin narrows the types as its stable key does, as
// Karpenter normalizes it (NormalizedLabels, sigs.k8s.io/karpenter v1.14.1
// pkg/apis/v1/labels.go; pkg/scheduling/requirement.go).
func TestBetaLabelKeysAreNormalized(t *testing.T) {
	// The cheapest type for one 1-cpu pod is g.large (arm64, $0.09).
	pool := odOnly(&scheduling.NodePool{Name: "default", Requirements: scheduling.NewRequirements(
		req("beta.kubernetes.io/arch", in, "amd64"))})
	plan := mustSolve(t, input(pods(1, podOpts{cpu: "1"}), pool))
	expect(t, plan, "c.large/zone-a/on-demand:default/p0")
	if l := plan.NodeClaims[0].Labels; l[scheduling.LabelArch] != "amd64" {
		t.Errorf("labels %v", l)
	}
	// A pod's nodeSelector on the beta twin. (Not through checkPlan: its
	// matcher reads the beta key, which the kubelet, not the claim, sets.)
	in := input(pods(1, podOpts{cpu: "1", nodeSelector: map[string]string{"beta.kubernetes.io/arch": "amd64"}}))
	plan, err := scheduling.Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, plan, "c.large/zone-a/on-demand:default/p0")
}
