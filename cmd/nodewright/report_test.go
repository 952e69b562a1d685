package main

import (
	"strings"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/decision"
)

// TestReportOnDynalite reads records the functions' own code wrote to a
// table and prints them in the three formats.
func TestReportOnDynalite(t *testing.T) {
	ctx := integration(t, "starts dynalite", 3*time.Minute)
	table, st := dynaliteTable(ctx, t)
	now := time.Now()
	claim := decision.Claim{Node: decision.Node{Name: "default-abc", NodePool: "default", InstanceType: "m5.xlarge", Zone: "us-east-1a", CapacityType: "spot", Price: 0.0712}}
	for _, r := range []struct {
		kind string
		at   time.Time
		v    any
	}{
		{decision.KindLaunch, now.Add(-3 * time.Hour), decision.Launch{Claims: []decision.Claim{{Node: decision.Node{Name: "old-one"}}}}},
		{decision.KindLaunch, now.Add(-time.Minute), decision.Launch{At: now.Add(-time.Minute), Claims: []decision.Claim{claim}}},
		{decision.KindFleet, now.Add(-time.Minute), decision.Fleet{At: now.Add(-time.Minute), CostPerHour: 0.864, PlanCostPerHour: 0.5,
			Opportunity: &decision.Opportunity{Method: "single-node-consolidation", Action: "replace", SavingsPerHr: 0.288,
				Nodes: []decision.Node{{Name: "karp-1", Owner: "karpenter", InstanceType: "m5.2xlarge", Price: 0.384}}}}},
	} {
		if err := decision.Put(ctx, st, r.kind, "test", r.at, r.v); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run(t, newReportCmd(), "--table", table, "--since", "2h")
	if err != nil || !strings.Contains(out, "default-abc") || strings.Contains(out, "old-one") || !strings.Contains(out, "karp-1 (karpenter") ||
		!strings.Contains(out, "0.2880") {
		t.Errorf("report: %v\n%s", err, out)
	}
	if out, err := run(t, newReportCmd(), "--table", table, "-o", "json"); err != nil || !strings.Contains(out, `"planPerHour": 0.5`) {
		t.Errorf("report -o json: %v\n%s", err, out)
	}
	if out, err := run(t, newReportCmd(), "--table", table, "-o", "html"); err != nil || !strings.Contains(out, "<svg") || !strings.Contains(out, "default-abc") {
		t.Errorf("report -o html: %v\n%s", err, out)
	}
	if _, err := run(t, newReportCmd(), "--table", table, "-o", "yaml"); err == nil || exitCode(err) != exitUsage {
		t.Errorf("report -o yaml: %v", err)
	}
}
