package scheduling_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/simulation"
)

// qualityScenarios are the realistic workloads under testdata/quality, each
// a config.yaml (NodePools and EC2NodeClasses) and a workload.yaml, solved
// on the real us-east-1 catalog in ../shared/aws-data. The Karpenter
// side-by-side module (karpentercompare) reads the same folders.
func qualityScenarios(tb testing.TB) (names []string, catalogDir string) {
	catalogDir = filepath.Join(repoRoot(tb), "..", "shared", "aws-data")
	if _, err := os.Stat(filepath.Join(catalogDir, "instance-types.json.gz")); err != nil {
		tb.Skipf("shared aws-data not present at %s", catalogDir)
	}
	entries, err := os.ReadDir(filepath.Join("testdata", "quality"))
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, catalogDir
}

func loadScenario(tb testing.TB, name, catalogDir string) *simulation.Setup {
	dir := filepath.Join("testdata", "quality", name)
	setup, err := simulation.Load(simulation.Sources{
		Config: filepath.Join(dir, "config.yaml"), Workload: filepath.Join(dir, "workload.yaml"),
		Catalog: catalogDir, Region: "us-east-1",
	})
	if err != nil {
		tb.Fatalf("scenario %s: %v", name, err)
	}
	return setup
}

// BenchmarkPlanQuality reports, per scenario, the plan's $/h, its lower
// bound and their ratio, and what the plan would cost without the re-split
// pass (greedy filling alone, Karpenter's strategy).
//
//	go test -run='^$' -bench=BenchmarkPlanQuality -benchtime=1x ./internal/scheduling/
func BenchmarkPlanQuality(b *testing.B) {
	names, catalogDir := qualityScenarios(b)
	worst := 0.0
	for _, name := range names {
		setup := loadScenario(b, name, catalogDir)
		b.Run(name, func(b *testing.B) {
			var plan, greedy *scheduling.Plan
			for i := 0; i < b.N; i++ {
				in := setup.Input
				var err error
				if plan, err = scheduling.Solve(context.Background(), &in); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			in := setup.Input
			greedy, err := scheduling.SolveWithOptions(context.Background(), &in, scheduling.Options{DisableResplit: true})
			if err != nil {
				b.Fatal(err)
			}
			if len(plan.Unschedulable) > 0 {
				b.Fatalf("%d pods unschedulable, first: %s", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
			}
			worst = max(worst, plan.CostOverLowerBound())
			b.ReportMetric(plan.CostPerHour, "$/h")
			b.ReportMetric(plan.LowerBoundPerHour, "lb-$/h")
			b.ReportMetric(plan.CostOverLowerBound(), "cost/lb")
			b.ReportMetric(greedy.CostPerHour, "greedy-$/h")
			b.ReportMetric(plan.ExpectedCostPerHour, "expected-$/h")
			b.ReportMetric(float64(len(plan.NodeClaims)), "nodes")
		})
	}
	b.Logf("worst cost/lb %.3f over %d scenarios", worst, len(names))
}

// TestPlanQualityNeverWorseThanGreedy holds the re-split pass to its
// promise on every scenario: never a dearer plan than filling alone, never
// a plan below the lower bound (which would mean the bound is wrong), and
// every pod placed.
func TestPlanQualityNeverWorseThanGreedy(t *testing.T) {
	names, catalogDir := qualityScenarios(t)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			setup := loadScenario(t, name, catalogDir)
			in := setup.Input
			plan, err := scheduling.Solve(context.Background(), &in)
			if err != nil {
				t.Fatal(err)
			}
			in = setup.Input
			greedy, err := scheduling.SolveWithOptions(context.Background(), &in, scheduling.Options{DisableResplit: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Unschedulable) != len(greedy.Unschedulable) {
				t.Fatalf("unschedulable: %d with re-split, %d without", len(plan.Unschedulable), len(greedy.Unschedulable))
			}
			if plan.ExpectedCostPerHour > greedy.ExpectedCostPerHour+1e-9 {
				t.Errorf("re-split plan $%.4f/h (expected) costs more than greedy filling's $%.4f/h", plan.ExpectedCostPerHour, greedy.ExpectedCostPerHour)
			}
			if plan.LowerBoundPerHour <= 0 || plan.CostPerHour < plan.LowerBoundPerHour-1e-9 {
				t.Errorf("plan $%.4f/h against lower bound $%.4f/h", plan.CostPerHour, plan.LowerBoundPerHour)
			}
			t.Logf("%s: $%.4f/h, %.3fx the lower bound $%.4f/h; greedy $%.4f/h", name, plan.CostPerHour, plan.CostOverLowerBound(), plan.LowerBoundPerHour, greedy.CostPerHour)
		})
	}
}
