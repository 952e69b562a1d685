package scheduling

import (
	"math"
	"math/rand"
	"testing"
)

// A cover LP with a known optimum: CPU-heavy and memory-heavy columns mix.
func TestCoverLPMixesColumns(t *testing.T) {
	lp := coverLP{
		cost:   []float64{1, 1, 3},
		cap:    [][]float64{{4, 1}, {1, 4}, {4, 4}},
		demand: []float64{10, 10},
	}
	v, ok := lp.solve()
	// 2 of each of the first two columns cover (10, 10) exactly: cost 4.
	if !ok || math.Abs(v-4) > 1e-9 {
		t.Fatalf("optimum %v %v, want 4", v, ok)
	}
	lp.demand = []float64{10, 0}
	if v, ok = lp.solve(); !ok || math.Abs(v-2.5) > 1e-9 {
		t.Fatalf("CPU only: %v, want 2.5", v)
	}
	lp.demand = []float64{10, 10, 1}
	lp.cap = [][]float64{{4, 1, 0}, {1, 4, 0}, {4, 4, 0}}
	if _, ok = lp.solve(); ok {
		t.Fatal("a resource no column offers must be infeasible")
	}
}

// The whole-node bound never exceeds the true cheapest whole-node cover
// (found by exhaustive search), at any budget, and reaches it when the
// budget suffices; it never falls below the LP.
func TestIntCoverIsABoundAndTight(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	for trial := 0; trial < 300; trial++ {
		n := 2 + r.Intn(4)
		var costs []float64
		var caps [][]float64
		for j := 0; j < n; j++ {
			c := []float64{float64(1 + r.Intn(16)), float64(1 + r.Intn(32))}
			caps = append(caps, c)
			costs = append(costs, (c[0]*0.04+c[1]*0.005)*(0.7+0.6*r.Float64()))
		}
		demand := []float64{float64(1 + r.Intn(40)), float64(1 + r.Intn(80))}
		exact := bruteCover(costs, caps, demand)
		lpv, _ := (&coverLP{cost: costs, cap: caps, demand: demand}).solve()
		for _, budget := range []int{1, 5, 100000} {
			ic := intCover{cost: append([]float64(nil), costs...), cap: caps, upper: exact * 1.5, budget: budget}
			got := ic.bound(demand)
			if got > exact+1e-9 || got < lpv-1e-9 {
				t.Fatalf("trial %d budget %d: bound %.4f, exact %.4f, LP %.4f", trial, budget, got, exact, lpv)
			}
			if budget == 100000 && math.Abs(got-exact) > 1e-9 {
				t.Fatalf("trial %d: unbounded search gave %.4f, exact %.4f", trial, got, exact)
			}
		}
	}
}

// bruteCover enumerates every count vector up to what covers the demand.
func bruteCover(costs []float64, caps [][]float64, demand []float64) float64 {
	best := math.Inf(1)
	var rec func(j int, d []float64, spent float64)
	rec = func(j int, d []float64, spent float64) {
		if spent >= best {
			return
		}
		if allCovered(d) {
			best = spent
			return
		}
		if j == len(costs) {
			return
		}
		maxQ := 0
		for k := range d {
			if d[k] > 0 && caps[j][k] > 0 {
				maxQ = max(maxQ, int(math.Ceil(d[k]/caps[j][k])))
			}
		}
		for q := 0; q <= maxQ; q++ {
			rest := make([]float64, len(d))
			for k := range d {
				rest[k] = math.Max(0, d[k]-float64(q)*caps[j][k])
			}
			rec(j+1, rest, spent+float64(q)*costs[j])
		}
	}
	rec(0, demand, 0)
	return best
}

func allCovered(d []float64) bool {
	for _, v := range d {
		if v > 1e-9 {
			return false
		}
	}
	return true
}

// solveGE agrees with the cover LP on cover problems, and handles linking
// rows (right-hand side 0): buying x of a column pays for what w uses.
func TestSolveGE(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for trial := 0; trial < 200; trial++ {
		n := 1 + r.Intn(6)
		lp := coverLP{demand: []float64{float64(1 + r.Intn(50)), float64(r.Intn(90))}}
		for j := 0; j < n; j++ {
			lp.cap = append(lp.cap, []float64{float64(1 + r.Intn(16)), float64(r.Intn(64))})
			lp.cost = append(lp.cost, 0.1+r.Float64())
		}
		want, wantOK := lp.solve()
		var rows [][]float64
		var rhs []float64
		for k, d := range lp.demand {
			row := make([]float64, n)
			for j := range row {
				row[j] = lp.cap[j][k]
			}
			rows, rhs = append(rows, row), append(rhs, d)
		}
		got, ok := solveGE(lp.cost, rows, rhs)
		if ok != wantOK || (ok && math.Abs(got-want) > 1e-6*math.Max(1, want)) {
			t.Fatalf("trial %d: solveGE %v %v, cover LP %v %v", trial, got, ok, want, wantOK)
		}
	}
	// x (cost 2) has capacity 4; w must reach 10 and may only use what x
	// pays for: x >= 2.5, cost 5.
	got, ok := solveGE([]float64{2, 0}, [][]float64{{0, 1}, {4, -1}}, []float64{10, 0})
	if !ok || math.Abs(got-5) > 1e-9 {
		t.Fatalf("linked LP: %v %v, want 5", got, ok)
	}
}
