package scheduling_test

import (
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// A NodePool whose requirements admit no value is left out of the solve,
// as Karpenter's NewScheduler drops a NodePool whose requirements filter
// out all instance types ("skipping, nodepool requirements filtered out all
// instance types", sigs.k8s.io/karpenter v1.14.1
// pkg/controllers/provisioning/scheduling/scheduler.go), and the others
// still provision.
func TestNodePoolAdmittingNoValueIsSkipped(t *testing.T) {
	conflict := odOnly(&scheduling.NodePool{Name: "conflict", Weight: 50, Requirements: scheduling.NewRequirements(
		req(scheduling.LabelArch, in, "amd64"))})
	conflict.Requirements = conflict.Requirements.Add(req(scheduling.LabelArch, in, "arm64"))
	good := odOnly(&scheduling.NodePool{Name: "good"})
	ps := pods(2, podOpts{cpu: "1"})
	ps = append(ps, pods(1, podOpts{name: "pinned", cpu: "1", nodeSelector: map[string]string{scheduling.LabelNodePool: "conflict"}})...)
	in := input(ps, conflict, good)
	plan := mustSolve(t, in)
	expect(t, plan, "g.large/zone-a/on-demand:default/p0,default/p1", "unschedulable default/pinned0")
	for _, c := range plan.NodeClaims {
		if c.NodePool != "good" {
			t.Errorf("claim %s from %s, want good", c.Name, c.NodePool)
		}
	}
	want := `NodePool "conflict" is skipped: its requirements on "kubernetes.io/arch" admit no value`
	if r := reasonOf(plan, "pinned0"); !strings.Contains(r, want) {
		t.Errorf("reason %q, want it to contain %q", r, want)
	}
	if len(plan.SkippedNodePools) != 1 || plan.SkippedNodePools[0].NodePool != "conflict" ||
		plan.SkippedNodePools[0].Reason != `its requirements on "kubernetes.io/arch" admit no value` {
		t.Errorf("skipped pools %+v", plan.SkippedNodePools)
	}
}
