package scheduling

import (
	"math"
	"sort"
	"strings"
)

// The lower bound of a plan is the cost of the cheapest fractional cover of
// the resources its new claims' pods request (CPU, memory, pods, GPUs and
// any other resource, daemon overhead already taken off every type) by the
// instance types those pods may use, at their cheapest allowed offering.
// No plan that places the same pods on new nodes can cost less, so
// cost/bound says how much any solver could still save.
//
// Pods differ in what they may use (architecture, capacity type, zone,
// NodePool taints): pods with the same hard constraints form a class whose
// columns are the (NodePool, type) pairs it may use. Classes that share no
// column are independent and their bounds add. Within a set of classes that
// share columns, every plan must cover, for each class g, the demand of all
// classes whose columns are a subset of g's with g's columns alone, so the
// largest of those LPs (and the LP of the whole set over all its columns) is
// a valid bound for it. For plans of few nodes each bound is raised to
// whole nodes (intcover.go): rounding up is then a large share of the cost.

// boundClass is the pods of one hard-constraint class.
type boundClass struct {
	price  []float64 // per global column; NaN where the class may not go
	sig    string    // which columns those are
	demand resVec
	// The plan's claims whose first pods are of this class: their launch
	// price and count (a claim's pods all share its column, so they fall
	// in one component).
	planCost  float64
	planNodes int
}

// maxBoundClasses caps the subset LPs: beyond it only the whole-component LP
// is used (still a valid bound, only weaker).
const maxBoundClasses = 48

// lowerBound returns the bound for the pods placed on new claims; it runs
// after plan(), which prices the claims.
func (st *state) lowerBound() float64 {
	classes, cols := st.boundClasses()
	total := 0.0
	budget := intCoverBudgetTotal
	for _, comp := range boundComponents(classes) {
		total += st.componentBound(classes, comp, cols, &budget)
	}
	return total
}

// Whole-node strengthening runs for components the plan covers with at
// most intCoverMaxNodes nodes, within a total budget of LP solves.
const (
	intCoverMaxNodes    = 40
	intCoverBudgetTotal = 4000
)

// boundColumns maps (pool, type) to a global column.
type boundColumns struct {
	base  []int // first column of each pool
	avail []resVec
}

func (st *state) columns() boundColumns {
	var c boundColumns
	n := 0
	for _, p := range st.pools {
		c.base = append(c.base, n)
		c.avail = append(c.avail, p.avail...)
		n += len(p.types)
	}
	return c
}

// boundClasses groups the pods on new claims by their hard constraints
// and by the columns one of them fits on (a pod needs a node that holds
// it whole, which is what makes big pods' bound tight).
func (st *state) boundClasses() ([]*boundClass, boundColumns) {
	cols := st.columns()
	hard := map[string][]float64{}
	byKey := map[string]*boundClass{}
	byShape := map[*shape]*boundClass{}
	var keys []string
	classOf := func(s *shape) *boundClass {
		if c, ok := byShape[s]; ok {
			return c
		}
		hk := hardKey(s)
		prices, ok := hard[hk]
		if !ok {
			prices = st.classPrices(s, cols)
			hard[hk] = prices
		}
		fit, sig := fitPrices(prices, s.req, cols, st.zero)
		key := hk + "#" + sig
		c := byKey[key]
		if c == nil {
			c = &boundClass{price: fit, sig: sig, demand: make(resVec, st.space.dim())}
			byKey[key] = c
			keys = append(keys, key)
		}
		byShape[s] = c
		return c
	}
	for _, nd := range st.nodes {
		if nd.claim == nil || len(nd.placed) == 0 {
			continue
		}
		for i, pr := range nd.placed {
			c := classOf(pr.s)
			c.demand.addScaled(pr.s.req, int64(pr.n))
			if i == 0 {
				c.planCost += nd.price
				c.planNodes++
			}
		}
	}
	sort.Strings(keys)
	out := make([]*boundClass, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out, cols
}

// fitPrices keeps the columns where one pod of req fits, with a signature
// of which those are.
func fitPrices(prices []float64, req resVec, cols boundColumns, zero resVec) ([]float64, string) {
	out := make([]float64, len(prices))
	sig := make([]byte, 0, len(prices)/8+1)
	var bits byte
	for j, p := range prices {
		out[j] = math.NaN()
		if !math.IsNaN(p) && req.fits(zero, cols.avail[j]) {
			out[j] = p
			bits |= 1 << (j & 7)
		}
		if j&7 == 7 {
			sig, bits = append(sig, bits), 0
		}
	}
	return out, string(append(sig, bits))
}

func hardKey(s *shape) string {
	var b strings.Builder
	b.WriteString(s.baseReqs.canonical())
	for _, t := range s.requiredTerms {
		b.WriteString("|")
		b.WriteString(t.canonical())
	}
	b.WriteString("#")
	for _, t := range s.tolerations {
		b.WriteString(t.Key + "=" + t.Value + ":" + string(t.Effect) + ":" + string(t.Operator) + ";")
	}
	return b.String()
}

// classPrices is the cheapest offering each (pool, type) column gives the
// shape under any of its required terms; NaN where it may not go.
func (st *state) classPrices(s *shape, cols boundColumns) []float64 {
	price := make([]float64, len(cols.avail))
	for i := range price {
		price[i] = math.NaN()
	}
	terms := []Requirements{s.baseReqs}
	if len(s.requiredTerms) > 0 {
		terms = terms[:0]
		for _, t := range s.requiredTerms {
			terms = append(terms, s.baseReqs.Intersect(t))
		}
	}
	for pi, p := range st.pools {
		if untoleratedTaint(s.tolerations, p.taints, false) != nil {
			continue
		}
		for _, term := range terms {
			if p.reqs.Compatible(term) != nil {
				continue
			}
			merged := p.reqs.Intersect(term)
			p.mask(term).each(func(i int) bool {
				o, ok := cheapestOffering(p.types[i], merged, "")
				j := cols.base[pi] + i
				if ok && (math.IsNaN(price[j]) || o.Price < price[j]) {
					price[j] = o.Price
				}
				return true
			})
		}
	}
	return price
}

// boundComponents partitions classes into sets that share no column.
func boundComponents(classes []*boundClass) [][]int {
	parent := make([]int, len(classes))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	owner := map[int]int{}
	for ci, c := range classes {
		for j, p := range c.price {
			if math.IsNaN(p) {
				continue
			}
			if o, ok := owner[j]; ok {
				parent[find(ci)] = find(o)
			} else {
				owner[j] = ci
			}
		}
	}
	byRoot := map[int][]int{}
	var roots []int
	for i := range classes {
		r := find(i)
		if _, ok := byRoot[r]; !ok {
			roots = append(roots, r)
		}
		byRoot[r] = append(byRoot[r], i)
	}
	out := make([][]int, 0, len(roots))
	for _, r := range roots {
		out = append(out, byRoot[r])
	}
	return out
}

// componentBound is the largest of the component's valid bounds.
func (st *state) componentBound(classes []*boundClass, comp []int, cols boundColumns, budget *int) float64 {
	upper, nodes := 0.0, 0
	for _, ci := range comp {
		upper += classes[ci].planCost
		nodes += classes[ci].planNodes
	}
	b := boundSolver{st: st, classes: classes, cols: cols, upper: upper, budget: budget}
	b.whole = nodes <= intCoverMaxNodes && !math.IsInf(upper, 1)
	all := make([]float64, len(cols.avail))
	for j := range all {
		all[j] = math.NaN()
	}
	best := b.cover(comp, minPrices(classes, comp, all, true))
	if len(comp) == 1 || len(comp) > maxBoundClasses {
		return best
	}
	best = math.Max(best, b.coupled(comp))
	done := map[string]bool{}
	for _, g := range comp {
		// Classes on the same columns have the same subset bound.
		if done[classes[g].sig] {
			continue
		}
		done[classes[g].sig] = true
		var within []int
		for _, h := range comp {
			if subsetColumns(classes[h].price, classes[g].price) {
				within = append(within, h)
			}
		}
		best = math.Max(best, b.cover(within, minPrices(classes, within, classes[g].price, false)))
	}
	return best
}

func subsetColumns(h, g []float64) bool {
	for j := range h {
		if !math.IsNaN(h[j]) && math.IsNaN(g[j]) {
			return false
		}
	}
	return true
}

// minPrices is the cheapest price any member pays on each column of cols
// (on every column any member may use, when union is set): a member may
// get a column cheaper than the class that defines the column set, e.g.
// because it also allows spot.
func minPrices(classes []*boundClass, members []int, cols []float64, union bool) []float64 {
	out := append([]float64(nil), cols...)
	for j := range out {
		if math.IsNaN(out[j]) && !union {
			continue
		}
		for _, ci := range members {
			if p := classes[ci].price[j]; !math.IsNaN(p) && (math.IsNaN(out[j]) || p < out[j]) {
				out[j] = p
			}
		}
	}
	return out
}

// boundSolver solves one component's bounds.
type boundSolver struct {
	st      *state
	classes []*boundClass
	cols    boundColumns
	upper   float64 // what the plan pays for the component
	whole   bool    // raise bounds to whole nodes
	budget  *int    // LP solves left for that
}

// cover bounds the members' total demand over the columns with a price.
// A demand no column can cover gives 0: the pods are placed, so this only
// happens for resources no type reports, and the bound must stay a bound.
func (b *boundSolver) cover(members []int, price []float64) float64 {
	demand := make([]float64, b.st.space.dim())
	for _, ci := range members {
		for r, v := range b.classes[ci].demand {
			demand[r] += float64(v)
		}
	}
	lp := coverLP{demand: demand}
	for j, p := range price {
		if math.IsNaN(p) {
			continue
		}
		capacity := make([]float64, len(demand))
		for r := range capacity {
			if r < len(b.cols.avail[j]) && b.cols.avail[j][r] > 0 {
				capacity[r] = float64(b.cols.avail[j][r])
			}
		}
		lp.cost = append(lp.cost, p)
		lp.cap = append(lp.cap, capacity)
	}
	if b.whole && *b.budget > 0 {
		ic := intCover{cost: lp.cost, cap: lp.cap, upper: b.upper, budget: min(intCoverBudget, *b.budget)}
		start := ic.budget
		v := ic.bound(demand)
		*b.budget -= start - ic.budget
		return v
	}
	v, ok := lp.solve()
	if !ok {
		return 0
	}
	return v
}
