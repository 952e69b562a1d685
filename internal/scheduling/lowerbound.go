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
// a valid bound for it.

// boundClass is the pods of one hard-constraint class.
type boundClass struct {
	price  []float64 // per global column; NaN where the class may not go
	demand resVec
}

// maxBoundClasses caps the subset LPs: beyond it only the whole-component LP
// is used (still a valid bound, only weaker).
const maxBoundClasses = 48

// lowerBound returns the bound for the pods placed on new claims.
func (st *state) lowerBound() float64 {
	classes, cols := st.boundClasses()
	total := 0.0
	for _, comp := range boundComponents(classes) {
		total += st.componentBound(classes, comp, cols)
	}
	return total
}

// boundColumns maps (pool, type) to a global column and back.
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

// boundClasses groups the pods on new claims by their hard constraints.
func (st *state) boundClasses() ([]*boundClass, boundColumns) {
	cols := st.columns()
	byKey := map[string]*boundClass{}
	var keys []string
	for _, nd := range st.nodes {
		if nd.claim == nil {
			continue
		}
		for _, pr := range nd.placed {
			key := hardKey(pr.s)
			c := byKey[key]
			if c == nil {
				c = &boundClass{price: st.classPrices(pr.s, cols), demand: make(resVec, st.space.dim())}
				byKey[key] = c
				keys = append(keys, key)
			}
			c.demand.addScaled(pr.s.req, int64(pr.n))
		}
	}
	sort.Strings(keys)
	out := make([]*boundClass, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out, cols
}

// hardKey identifies a shape's hard constraints: node requirements (with
// every OR term) and tolerations. Preferences are not constraints.
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

// componentBound is the largest of the component's valid LP bounds.
func (st *state) componentBound(classes []*boundClass, comp []int, cols boundColumns) float64 {
	best := st.coverBound(classes, comp, cols)
	if len(comp) == 1 || len(comp) > maxBoundClasses {
		return best
	}
	for _, g := range comp {
		var within []int
		for _, h := range comp {
			if subsetColumns(classes[h].price, classes[g].price) {
				within = append(within, h)
			}
		}
		best = math.Max(best, st.coverBoundOn(classes, within, minPrices(classes, within, classes[g].price), cols))
	}
	return best
}

// minPrices is, on the columns of cols, the cheapest price any member
// pays there: a member may get a column cheaper than the class that
// defines the column set (e.g. it also allows spot).
func minPrices(classes []*boundClass, members []int, cols []float64) []float64 {
	out := append([]float64(nil), cols...)
	for j := range out {
		if math.IsNaN(out[j]) {
			continue
		}
		for _, ci := range members {
			if p := classes[ci].price[j]; !math.IsNaN(p) && p < out[j] {
				out[j] = p
			}
		}
	}
	return out
}

func subsetColumns(h, g []float64) bool {
	for j := range h {
		if !math.IsNaN(h[j]) && math.IsNaN(g[j]) {
			return false
		}
	}
	return true
}

// coverBound is the LP of the classes' total demand over every column any
// of them may use, each at the cheapest price any of them gets.
func (st *state) coverBound(classes []*boundClass, members []int, cols boundColumns) float64 {
	price := make([]float64, len(cols.avail))
	for j := range price {
		price[j] = math.NaN()
		for _, ci := range members {
			if p := classes[ci].price[j]; !math.IsNaN(p) && (math.IsNaN(price[j]) || p < price[j]) {
				price[j] = p
			}
		}
	}
	return st.coverBoundOn(classes, members, price, cols)
}

// coverBoundOn solves the LP of the members' total demand over the columns
// with a price in price. A demand no column can cover gives 0: the pods are
// placed, so this only happens for resources no type reports, and the
// bound must stay a bound.
func (st *state) coverBoundOn(classes []*boundClass, members []int, price []float64, cols boundColumns) float64 {
	demand := make([]float64, st.space.dim())
	for _, ci := range members {
		for r, v := range classes[ci].demand {
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
			if r < len(cols.avail[j]) && cols.avail[j][r] > 0 {
				capacity[r] = float64(cols.avail[j][r])
			}
		}
		lp.cost = append(lp.cost, p)
		lp.cap = append(lp.cap, capacity)
	}
	v, ok := lp.solve()
	if !ok {
		return 0
	}
	return v
}
