package scheduling_test

import (
	"context"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/scheduling"
)

func TestDiverseSmoke(t *testing.T) {
	for _, n := range []int{1000, 3000} {
		in := diverseInput(n)
		start := time.Now()
		plan, err := scheduling.Solve(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		placed := 0
		for _, c := range plan.NodeClaims {
			placed += len(c.Pods)
		}
		t.Logf("%d pods: %v (%.0f pods/s) claims=%d placed=%d unsched=%d cost=%.2f", n, d, float64(n)/d.Seconds(), len(plan.NodeClaims), placed, len(plan.Unschedulable), plan.CostPerHour)
		for i, u := range plan.Unschedulable {
			if i > 3 {
				break
			}
			t.Logf("unsched %s: %s", u.Pod, u.Reason)
		}
		checkPlan(t, in, plan)
	}
}
