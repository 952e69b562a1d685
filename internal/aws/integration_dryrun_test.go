package aws_test

import (
	"strings"
	"testing"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// PlanLaunch (shadow mode) reads what Launch reads and writes nothing: every
// EC2 call it makes is a Describe or Get, and it answers with the type,
// zone and capacity type the real Launch of the same claim then gets.
func TestPlanLaunchWritesNothingAndMatchesLaunch(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	claim := newClaim("plan-1", in("karpenter.sh/capacity-type", "on-demand"))
	types := e.types("m5.large", "m5.xlarge", "c5.large")
	e.sim.ResetCalls()
	planned, price, err := e.p.PlanLaunch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	calls := e.sim.Calls("", "")
	if len(calls) == 0 {
		t.Fatal("PlanLaunch made no call: it did not read what Launch reads")
	}
	for _, c := range calls {
		if !strings.HasPrefix(c.Operation, "Describe") && !strings.HasPrefix(c.Operation, "Get") {
			t.Errorf("PlanLaunch called %s %s, a write", c.Service, c.Operation)
		}
	}
	if planned.ID != "" || planned.State != "planned" || planned.NodeClaim != "plan-1" || price <= 0 || planned.SubnetID == "" {
		t.Fatalf("planned %+v at $%v/h", planned, price)
	}
	launched, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	if launched.Type != planned.Type || launched.Zone != planned.Zone || launched.CapacityType != planned.CapacityType {
		t.Errorf("planned %s/%s/%s, launched %s/%s/%s", planned.Type, planned.Zone, planned.CapacityType,
			launched.Type, launched.Zone, launched.CapacityType)
	}
}
