package scheduling

import "math"

// coverLP is the linear program "buy a fractional amount x_j >= 0 of each
// column j (an instance type at its price) so that every resource's total
// capacity covers its demand, at least cost":
//
//	min  Σ cost_j x_j   s.t.  Σ_j cap_j[r] x_j >= demand[r]  for every r
//
// It has one row per resource (a handful), so a dense two-phase simplex
// over a (rows+1) x (columns + 2 rows) tableau is exact and cheap: the
// optimum uses at most one column per row.
type coverLP struct {
	cost   []float64
	cap    [][]float64 // per column, per row
	demand []float64
}

const lpEps = 1e-9

// solve returns the optimum, or ok=false when some demand cannot be covered
// by any column.
func (lp *coverLP) solve() (float64, bool) {
	v, _, ok := lp.solveReduced(false)
	return v, ok
}

// solveX returns the optimum and the optimal amount of each column.
func (lp *coverLP) solveX() (float64, []float64, bool) {
	rows := lp.rowsWithDemand()
	x := make([]float64, len(lp.cost))
	if len(rows) == 0 {
		return 0, x, true
	}
	t := lp.tableau(rows)
	obj, ok := t.twoPhase(lp.cost)
	if !ok {
		return 0, nil, false
	}
	for i, b := range t.basis {
		if b < t.n {
			x[b] = t.rhs[i]
		}
	}
	return t.objectiveValue(obj), x, true
}

// solveReduced also returns, when asked, each column's reduced cost at the
// optimum: how much the objective must rise per unit of that column forced
// into the solution (0 for columns in the optimal basis).
func (lp *coverLP) solveReduced(wantReduced bool) (float64, []float64, bool) {
	rows := lp.rowsWithDemand()
	if len(rows) == 0 {
		if wantReduced {
			return 0, append([]float64(nil), lp.cost...), true
		}
		return 0, nil, true
	}
	t := lp.tableau(rows)
	obj, ok := t.twoPhase(lp.cost)
	if !ok {
		return 0, nil, false
	}
	var rc []float64
	if wantReduced {
		rc = make([]float64, t.n)
		for j := range rc {
			rc[j] = t.reducedCost(obj, j)
		}
	}
	return t.objectiveValue(obj), rc, true
}

// rowsWithDemand lists the resources with a positive demand; the others
// constrain nothing.
func (lp *coverLP) rowsWithDemand() []int {
	var rows []int
	for r, d := range lp.demand {
		if d > 0 {
			rows = append(rows, r)
		}
	}
	return rows
}

// tableau is a simplex tableau in equality form: structural columns, then
// one surplus and one artificial column per row. Rows are scaled by their
// demand so that CPU millicores and memory bytes have the same magnitude.
type tableau struct {
	a         [][]float64 // rows x cols
	rhs       []float64
	basis     []int
	cols      int
	n         int // structural columns
	allowArt  bool
	artFirst  int
	surpFirst int
}

func (lp *coverLP) tableau(rows []int) *tableau {
	n, m := len(lp.cost), len(rows)
	t := &tableau{n: n, cols: n + 2*m, surpFirst: n, artFirst: n + m, allowArt: true}
	for i, r := range rows {
		row := make([]float64, t.cols)
		for j := 0; j < n; j++ {
			row[j] = lp.cap[j][r] / lp.demand[r]
		}
		row[t.surpFirst+i] = -1
		row[t.artFirst+i] = 1
		t.a = append(t.a, row)
		t.rhs = append(t.rhs, 1)
		t.basis = append(t.basis, t.artFirst+i)
	}
	return t
}

// twoPhase finds a feasible basis (phase 1 drives the artificial variables
// out by minimizing their sum), then minimizes cost over the structural
// columns. It returns the phase-2 objective, or false if infeasible.
func (t *tableau) twoPhase(cost []float64) ([]float64, bool) {
	if !t.optimize(t.phase1Objective()) || t.objectiveValue(t.phase1Objective()) > 1e-7 {
		return nil, false
	}
	t.dropArtificials()
	obj := make([]float64, t.cols)
	copy(obj, cost)
	if !t.optimize(obj) {
		return nil, false // unbounded cannot happen with nonnegative costs
	}
	return obj, true
}

// solveGE solves min cost·z s.t. rows·z >= rhs, z >= 0 for rhs >= 0 (a
// row with rhs 0 links variables: its surplus starts basic, no artificial
// needed). Rows are scaled to unit size first.
func solveGE(cost []float64, rows [][]float64, rhs []float64) (float64, bool) {
	n, m := len(cost), len(rows)
	t := &tableau{n: n, cols: n + 2*m, surpFirst: n, artFirst: n + m, allowArt: true}
	for i, r := range rows {
		scale := rhs[i]
		if scale <= 0 {
			for _, v := range r {
				scale = math.Max(scale, math.Abs(v))
			}
		}
		if scale == 0 {
			scale = 1
		}
		row := make([]float64, t.cols)
		for j := 0; j < n; j++ {
			row[j] = r[j] / scale
		}
		row[t.surpFirst+i] = -1
		basic := t.artFirst + i
		if rhs[i] > 0 {
			row[t.artFirst+i] = 1
		} else {
			for j := range row {
				row[j] = -row[j] // -a·z + s = 0: s is basic at zero
			}
			basic = t.surpFirst + i
		}
		t.a = append(t.a, row)
		t.rhs = append(t.rhs, math.Max(rhs[i], 0)/scale)
		t.basis = append(t.basis, basic)
	}
	obj, ok := t.twoPhase(cost)
	if !ok {
		return 0, false
	}
	return t.objectiveValue(obj), true
}

func (t *tableau) phase1Objective() []float64 {
	obj := make([]float64, t.cols)
	for j := t.artFirst; j < t.cols; j++ {
		obj[j] = 1
	}
	return obj
}

func (t *tableau) objectiveValue(obj []float64) float64 {
	v := 0.0
	for i, b := range t.basis {
		v += obj[b] * t.rhs[i]
	}
	return v
}

// dropArtificials forbids artificial columns from re-entering; any still
// basic sits at zero (a redundant row) and is harmless.
func (t *tableau) dropArtificials() { t.allowArt = false }

// optimize runs primal simplex with Bland's rule (no cycling) from the
// current basic feasible solution. It returns false if unbounded.
func (t *tableau) optimize(obj []float64) bool {
	for iter := 0; iter < 50*t.cols+100; iter++ {
		enter := t.entering(obj)
		if enter < 0 {
			return true
		}
		leave := t.leaving(enter)
		if leave < 0 {
			return false
		}
		t.pivot(leave, enter)
	}
	return true
}

// entering returns the lowest-index column with a negative reduced cost.
func (t *tableau) entering(obj []float64) int {
	limit := t.cols
	if !t.allowArt {
		limit = t.artFirst
	}
	for j := 0; j < limit; j++ {
		if t.isBasic(j) {
			continue
		}
		if t.reducedCost(obj, j) < -lpEps {
			return j
		}
	}
	return -1
}

func (t *tableau) reducedCost(obj []float64, j int) float64 {
	rc := obj[j]
	for i, b := range t.basis {
		rc -= obj[b] * t.a[i][j]
	}
	return rc
}

func (t *tableau) isBasic(j int) bool {
	for _, b := range t.basis {
		if b == j {
			return true
		}
	}
	return false
}

// leaving is the ratio test; ties go to the lowest basic index (Bland).
func (t *tableau) leaving(enter int) int {
	best, bestRatio := -1, math.Inf(1)
	for i := range t.a {
		if t.a[i][enter] <= lpEps {
			continue
		}
		r := t.rhs[i] / t.a[i][enter]
		if r < bestRatio-lpEps || (math.Abs(r-bestRatio) <= lpEps && best >= 0 && t.basis[i] < t.basis[best]) {
			best, bestRatio = i, r
		}
	}
	return best
}

func (t *tableau) pivot(row, col int) {
	p := t.a[row][col]
	for j := range t.a[row] {
		t.a[row][j] /= p
	}
	t.rhs[row] /= p
	for i := range t.a {
		if i == row || t.a[i][col] == 0 {
			continue
		}
		f := t.a[i][col]
		for j := range t.a[i] {
			t.a[i][j] -= f * t.a[row][j]
		}
		t.rhs[i] -= f * t.rhs[row]
	}
	t.basis[row] = col
}
