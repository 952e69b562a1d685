package disruption

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/apis/apistest"
)

// Karpenter's score: (savings/pool cost) / (disruption/pool disruption),
// approved at 1/k = 0.5 or more.
func TestBalancedScore(t *testing.T) {
	pool := poolTotals{cost: 0.48, disruption: 15}
	for _, c := range []struct {
		savings, disruption, want float64
	}{
		{0.096, 13, (0.096 / 0.48) / (13.0 / 15)}, // a cheap node full of pods: 0.23
		{0.384, 2, (0.384 / 0.48) / (2.0 / 15)},   // an expensive, nearly idle node: 6
		{0, 1, 0}, {-0.1, 1, 0},                   // no savings: never
	} {
		if got := balancedScore(c.savings, c.disruption, pool); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("score(%v, %v) = %v, want %v", c.savings, c.disruption, got, c.want)
		}
	}
	if got := balancedScore(0.1, 1, poolTotals{}); got != 0 {
		t.Errorf("unknown totals: %v, want 0", got)
	}
}

// A Balanced pool of a cheap node running many pods and an expensive node
// running one: deleting the cheap node would save 20 % of the pool's cost
// for 87 % of its disruption, so Balanced refuses it (with a finding),
// while WhenEmptyOrUnderutilized deletes it.
func TestBalancedRefusesMovesNotWorthTheirDisruption(t *testing.T) {
	build := func(policy string) *Decision {
		f := newFixture(t, fixOpt{policy: policy, budgets: []apistest.Budget{{Nodes: "1"}}})
		f.node("a", "m5.large")
		for i := range 12 {
			f.pod(fmt.Sprintf("a-%d", i), "a", "50m", "64Mi")
		}
		f.node("b", "m5.2xlarge")
		f.pod("b-0", "b", "6", "1Gi") // only an m5.2xlarge holds it
		return f.decide()
	}
	deletesA := func(d *Decision) bool {
		return d.Command != nil && d.Command.Action() == ActionDelete && slices.Contains(d.Command.NodeNames(), "a")
	}
	if d := build("WhenEmptyOrUnderutilized"); !deletesA(d) {
		t.Fatalf("WhenEmptyOrUnderutilized: command %s, want a deleted", fmtCmd(d.Command))
	}
	d := build("Balanced")
	if deletesA(d) {
		t.Fatalf("Balanced deleted a: %s", fmtCmd(d.Command))
	}
	found := false
	for _, f := range d.Findings {
		found = found || (f.Node == "a" && strings.HasPrefix(f.Text, "Balanced: NodePool \"default\" would save 20.0% of its cost for 86.7% of its disruption"))
	}
	if !found {
		t.Errorf("no Balanced finding for a: %+v (command %s)", d.Findings, fmtCmd(d.Command))
	}
}

// Validation re-scores a Balanced delete against the fresh view: a node
// decided with one pod that has since taken ten more is now worth keeping,
// and the command is dropped with Balanced's reason instead of acted on.
func TestBalancedValidationRescoresDeletes(t *testing.T) {
	f := newFixture(t, fixOpt{policy: "Balanced", budgets: []apistest.Budget{{Nodes: "1"}}})
	f.node("a", "m5.large")
	f.pod("a-0", "a", "50m", "64Mi")
	f.node("b", "m5.2xlarge")
	f.pod("b-big", "b", "6", "1Gi") // only an m5.2xlarge holds it
	for i := range 10 {
		f.pod(fmt.Sprintf("b-%d", i), "b", "50m", "64Mi")
	}
	d := f.decide()
	if d.Command == nil || d.Command.Action() != ActionDelete || !slices.Equal(d.Command.NodeNames(), []string{"a"}) {
		t.Fatalf("decided %s, want a deleted", fmtCmd(d.Command))
	}
	if ok, why, err := Validate(ctx, f.view(), d.Command); err != nil || !ok {
		t.Fatalf("unchanged view: ok=%v why=%q err=%v", ok, why, err)
	}
	for i := range 10 {
		f.pod(fmt.Sprintf("a-new-%d", i), "a", "50m", "64Mi")
	}
	ok, why, err := Validate(ctx, f.view(), d.Command)
	if err != nil {
		t.Fatal(err)
	}
	if ok || !strings.HasPrefix(why, "Balanced: NodePool \"default\"") {
		t.Fatalf("after a took ten pods: ok=%v why=%q, want refused by Balanced", ok, why)
	}
}
