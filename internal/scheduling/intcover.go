package scheduling

import (
	"container/heap"
	"math"
)

// intCover strengthens an LP bound for small plans, where buying whole
// nodes is what costs: the cheapest multiset of whole instance types whose
// summed capacity covers the demand (still ignoring how pods split between
// nodes, so it stays a lower bound of any plan). It is a best-first branch
// and bound on the LP: a column the LP buys a fraction f of is branched
// into "exactly 0..floor(f) of it" and "at least ceil(f)". The smallest LP
// bound among open branches is a valid bound at any moment, so running out
// of budget only weakens the answer.
type intCover struct {
	cost   []float64
	cap    [][]float64
	upper  float64 // a known cover's cost (the plan's): nothing above matters
	budget int     // LP solves left
}

// intCoverBudget bounds the LP solves of one strengthening.
const intCoverBudget = 300

// coverNode is a branch: units already bought, columns no longer allowed.
type coverNode struct {
	spent   float64
	demand  []float64
	removed []bool
	bound   float64
	x       []float64 // LP amounts over all columns (0 where removed)
}

type coverQueue []*coverNode

func (q coverQueue) Len() int           { return len(q) }
func (q coverQueue) Less(i, j int) bool { return q[i].bound < q[j].bound }
func (q coverQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *coverQueue) Push(x any)        { *q = append(*q, x.(*coverNode)) }
func (q *coverQueue) Pop() any {
	old := *q
	n := old[len(old)-1]
	*q = old[:len(old)-1]
	return n
}

// bound returns a lower bound on the integer cover of demand, between the
// LP optimum and upper.
func (ic *intCover) bound(demand []float64) float64 {
	ic.pruneDominated()
	root := &coverNode{demand: demand, removed: ic.removedInit()}
	if !ic.solve(root) {
		return 0
	}
	q := &coverQueue{root}
	for q.Len() > 0 {
		n := heap.Pop(q).(*coverNode)
		if n.bound >= ic.upper-1e-9 {
			return ic.upper
		}
		j, f := ic.fractional(n)
		if j < 0 || ic.budget <= 0 {
			// An integral LP optimum is this branch's best cover, and it is
			// the smallest bound left: nothing open can beat it.
			return math.Min(ic.upper, n.bound)
		}
		for _, child := range ic.branch(n, j, f) {
			if ic.solve(child) {
				heap.Push(q, child)
			}
		}
	}
	return ic.upper
}

// removedInit marks the columns pruneDominated dropped.
func (ic *intCover) removedInit() []bool {
	r := make([]bool, len(ic.cost))
	for j, c := range ic.cost {
		r[j] = math.IsInf(c, 1)
	}
	return r
}

// pruneDominated drops a column another beats on price and every
// resource: a cover using it is no cheaper than one using the other.
func (ic *intCover) pruneDominated() {
	for j := range ic.cost {
		for k := range ic.cost {
			if k == j || math.IsInf(ic.cost[k], 1) || ic.cost[k] > ic.cost[j] {
				continue
			}
			if ic.cost[k] == ic.cost[j] && k > j && capLE(ic.cap[k], ic.cap[j]) {
				continue // identical columns: keep the first
			}
			if capLE(ic.cap[j], ic.cap[k]) {
				ic.cost[j] = math.Inf(1)
				break
			}
		}
	}
}

func capLE(a, b []float64) bool {
	for r := range a {
		if a[r] > b[r] {
			return false
		}
	}
	return true
}

// solve computes the branch's LP bound; false if it cannot cover.
func (ic *intCover) solve(n *coverNode) bool {
	ic.budget--
	sub := coverLP{demand: n.demand}
	var idx []int
	for j := range ic.cost {
		if !n.removed[j] {
			sub.cost = append(sub.cost, ic.cost[j])
			sub.cap = append(sub.cap, ic.cap[j])
			idx = append(idx, j)
		}
	}
	v, x, ok := sub.solveX()
	if !ok {
		return false
	}
	n.bound = n.spent + v
	n.x = make([]float64, len(ic.cost))
	for i, j := range idx {
		n.x[j] = x[i]
	}
	return true
}

// fractional picks the column bought in the largest fraction; -1 when the
// LP solution is whole.
func (ic *intCover) fractional(n *coverNode) (int, float64) {
	best, bestFrac := -1, 1e-6
	for j, v := range n.x {
		frac := math.Min(v-math.Floor(v), math.Ceil(v)-v)
		if frac > bestFrac {
			best, bestFrac = j, frac
		}
	}
	if best < 0 {
		return -1, 0
	}
	return best, n.x[best]
}

// branch splits n on column j bought f times: exactly k of it for every k
// up to floor(f) (then no more of it), or at least ceil(f).
func (ic *intCover) branch(n *coverNode, j int, f float64) []*coverNode {
	var out []*coverNode
	for k := 0; k <= int(math.Floor(f)); k++ {
		c := ic.buy(n, j, k)
		c.removed[j] = true
		out = append(out, c)
	}
	return append(out, ic.buy(n, j, int(math.Ceil(f))))
}

// buy is n with k more units of column j bought.
func (ic *intCover) buy(n *coverNode, j, k int) *coverNode {
	c := &coverNode{spent: n.spent + float64(k)*ic.cost[j], removed: append([]bool(nil), n.removed...)}
	c.demand = make([]float64, len(n.demand))
	for r := range n.demand {
		c.demand[r] = math.Max(0, n.demand[r]-float64(k)*ic.cap[j][r])
	}
	return c
}
