package scheduling

import "math"

// coupled is the bound that keeps classes apart where they share nodes:
// every node of column t offers its capacity once, resource by resource,
// to the classes allowed on t, and each class's demand is met only from
// the columns it may use. Summing classes over a shared pool of columns
// (cover) lets a GPU pod that needs a 4-GPU node be covered by 1-GPU
// nodes; this does not. Any plan is a solution (node counts per column,
// the resources each class takes on them), so its LP value is a bound.
//
//	min Σ_t price_t x_t
//	Σ_{t∈S_g} w_gtr >= demand_gr           for every class g, resource r
//	cap_tr x_t - Σ_{g: t∈S_g} w_gtr >= 0    for every column t, resource r
//
// It has a row per column and resource, so it runs only on components
// with few columns once dominated ones are gone.
func (b *boundSolver) coupled(comp []int) float64 {
	cols := b.coupledColumns(comp)
	if len(cols) == 0 || len(cols) > coupledMaxColumns {
		return 0
	}
	res := b.demandedResources(comp)
	lp := coupledLP{b: b, comp: comp, cols: cols, res: res}
	lp.build()
	if len(lp.rows)*len(lp.cost) > coupledMaxCells {
		return 0
	}
	v, ok := solveGE(lp.cost, lp.rows, lp.rhs)
	if !ok {
		return 0
	}
	return v
}

// Size limits of the coupled LP (a dense tableau).
const (
	coupledMaxColumns = 64
	coupledMaxCells   = 400000
)

// coupledColumns lists the columns any member may use, dropping a column
// another one beats (no dearer, at least as big in every resource, and
// open to every member the first is open to).
func (b *boundSolver) coupledColumns(comp []int) []int {
	var cand []int
	price := b.minPrice(comp)
	for j, p := range price {
		if !math.IsNaN(p) {
			cand = append(cand, j)
		}
	}
	var out []int
	for _, j := range cand {
		beaten := false
		for _, k := range cand {
			if k != j && b.beats(comp, price, k, j) {
				beaten = true
				break
			}
		}
		if !beaten {
			out = append(out, j)
		}
	}
	return out
}

// beats reports whether column k makes column j useless; of two identical
// columns the lower index wins.
func (b *boundSolver) beats(comp []int, price []float64, k, j int) bool {
	if price[k] > price[j] || !vecLE(b.cols.avail[j], b.cols.avail[k]) {
		return false
	}
	for _, g := range comp {
		if !math.IsNaN(b.classes[g].price[j]) && math.IsNaN(b.classes[g].price[k]) {
			return false
		}
	}
	if price[k] == price[j] && vecLE(b.cols.avail[k], b.cols.avail[j]) {
		return k < j
	}
	return true
}

// minPrice is the cheapest price any member pays on each column.
func (b *boundSolver) minPrice(comp []int) []float64 {
	all := make([]float64, len(b.cols.avail))
	for j := range all {
		all[j] = math.NaN()
	}
	return minPrices(b.classes, comp, all, true)
}

// demandedResources are the resources some member asks for.
func (b *boundSolver) demandedResources(comp []int) []int {
	var out []int
	for r := 0; r < b.st.space.dim(); r++ {
		for _, g := range comp {
			if b.classes[g].demand[r] > 0 {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// coupledLP is the coupled bound's LP in rows form. Each resource is
// measured in units of the members' total demand of it, so that bytes and
// millicores give coefficients of the same magnitude.
type coupledLP struct {
	b     *boundSolver
	comp  []int
	cols  []int
	res   []int
	total []float64 // per resource position
	cost  []float64
	rows  [][]float64
	rhs   []float64
}

// build lays the variables out as x per column, then w per (member,
// column it may use, demanded resource), and writes both row families.
func (lp *coupledLP) build() {
	price := lp.b.minPrice(lp.comp)
	lp.total = make([]float64, len(lp.res))
	for ri, r := range lp.res {
		for _, g := range lp.comp {
			lp.total[ri] += float64(lp.b.classes[g].demand[r])
		}
	}
	lp.cost = make([]float64, len(lp.cols))
	for i, j := range lp.cols {
		lp.cost[i] = price[j]
	}
	// w index per (member, column position, resource position); -1 if none.
	w := make([][][]int, len(lp.comp))
	for gi, g := range lp.comp {
		w[gi] = make([][]int, len(lp.cols))
		for ci, j := range lp.cols {
			w[gi][ci] = make([]int, len(lp.res))
			for ri, r := range lp.res {
				w[gi][ci][ri] = -1
				if !math.IsNaN(lp.b.classes[g].price[j]) && lp.b.classes[g].demand[r] > 0 {
					w[gi][ci][ri] = len(lp.cost)
					lp.cost = append(lp.cost, 0)
				}
			}
		}
	}
	lp.demandRows(w)
	lp.linkRows(w)
}

func (lp *coupledLP) demandRows(w [][][]int) {
	for gi, g := range lp.comp {
		for ri, r := range lp.res {
			d := lp.b.classes[g].demand[r]
			if d <= 0 {
				continue
			}
			row := make([]float64, len(lp.cost))
			for ci := range lp.cols {
				if v := w[gi][ci][ri]; v >= 0 {
					row[v] = 1
				}
			}
			lp.rows = append(lp.rows, row)
			lp.rhs = append(lp.rhs, float64(d)/lp.total[ri])
		}
	}
}

func (lp *coupledLP) linkRows(w [][][]int) {
	for ci, j := range lp.cols {
		for ri, r := range lp.res {
			row := make([]float64, len(lp.cost))
			used := false
			for gi := range lp.comp {
				if v := w[gi][ci][ri]; v >= 0 {
					row[v] = -1
					used = true
				}
			}
			if !used {
				continue
			}
			row[ci] = float64(max(lp.b.cols.avail[j][r], 0)) / lp.total[ri]
			lp.rows = append(lp.rows, row)
			lp.rhs = append(lp.rhs, 0)
		}
	}
}
