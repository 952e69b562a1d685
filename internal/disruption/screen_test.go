package disruption

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/nodewright/nodewright/internal/apis/apistest"
)

// The screen only spares simulations that could not give a command: on
// random clusters, every consolidation it rules out (single nodes and the
// multi-node search's prefixes) gives no command when simulated.
func TestScreenNeverRulesOutACommand(t *testing.T) {
	ruledOut, tried := 0, 0
	check := func(name string, v *View) {
		checkRepackFloor(t, name, v)
		cands, _, err := Candidates(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		list := consolidatable(cands, &Decision{Eligible: map[string]int{}}, MethodSingleNode)
		scr := newScreen(v.Cluster, list)
		var sets [][]*Candidate
		for i, c := range list {
			sets = append(sets, []*Candidate{c}, list[:i+1])
		}
		for _, set := range sets {
			why, err := scr.hopeless(set)
			if err != nil {
				t.Fatal(err)
			}
			tried++
			if why == "" {
				continue
			}
			ruledOut++
			cmd, _, err := consolidate(ctx, v, nil, set, MethodMultiNode)
			if err != nil {
				t.Fatal(err)
			}
			if cmd != nil {
				t.Errorf("%s: the screen ruled out %v (%s), a simulation gives %s", name, names(set), why, fmtCmd(cmd))
			}
		}
	}
	for seed := range 12 {
		r := rand.New(rand.NewSource(int64(seed)))
		f := newFixture(t, fixOpt{budgets: []apistest.Budget{{Nodes: "100%"}}})
		for i := range 4 + r.Intn(8) {
			n := fmt.Sprintf("n%02d", i)
			f.node(n, []string{"m5.large", "m5.xlarge", "m5.2xlarge"}[r.Intn(3)])
			for j := range r.Intn(9) {
				f.pod(fmt.Sprintf("%s-p%d", n, j), n, []string{"100m", "500m", "1", "1500m"}[r.Intn(4)], []string{"256Mi", "1Gi", "3Gi"}[r.Intn(3)])
			}
		}
		check(fmt.Sprintf("seed %d", seed), f.view())
	}
	check("harness-shaped, full", harnessShaped(t, 24, 20))
	check("harness-shaped, half used", harnessShaped(t, 24, 40))
	t.Logf("%d of %d consolidations ruled out without a simulation", ruledOut, tried)
	if ruledOut == 0 {
		t.Error("the screen ruled nothing out")
	}
}

// checkRepackFloor: a pool whose re-pack the screen calls hopeless is one
// IdealCost finds not worthwhile.
func checkRepackFloor(t *testing.T, name string, v *View) {
	t.Helper()
	v.Settings.Defaults()
	for _, np := range v.Cluster.Config.NodePools {
		hopeless, err := repackHopeless(v, &Decision{}, np.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !hopeless {
			continue
		}
		ideal, current, ok, err := IdealCost(ctx, v.Cluster, np.Name)
		if err != nil {
			t.Fatal(err)
		}
		if ok && RepackWorthwhile(current, ideal, v.Settings) {
			t.Errorf("%s: re-packing pool %s called hopeless, yet its ideal plan costs $%.3f/h against $%.3f/h", name, np.Name, ideal, current)
		}
	}
}
