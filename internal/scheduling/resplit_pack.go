package scheduling

import (
	"math"
	"sort"
)

// packItem is a count of pods of one shape.
type packItem struct {
	s *shape
	n int
}

// packNode is one node of a candidate packing: a window node that keeps
// pinned pods (home), or a node of movable pods only.
type packNode struct {
	home  *node
	typ   int
	used  resVec
	items []packItem
}

// pinnedNode is a window node with pods that may not move, and their room.
type pinnedNode struct {
	nd   *node
	used resVec
}

type packing struct {
	nodes []packNode
	cost  float64
}

// packer searches packings of a window's pods onto its bucket's types.
type packer struct {
	st     *state
	b      *resplitBucket
	pinned []pinnedNode
	work   int
}

// pinnedNodes lists the window's nodes holding pods that may not move.
func pinnedNodes(w []*node) []pinnedNode {
	var out []pinnedNode
	for _, nd := range w {
		var used resVec
		for _, pr := range nd.placed {
			if resplitMovable(pr.s, nd) {
				continue
			}
			if used == nil {
				used = make(resVec, len(nd.used))
			}
			used.addScaled(pr.s.req, int64(pr.n))
		}
		if used != nil {
			out = append(out, pinnedNode{nd: nd, used: used})
		}
	}
	return out
}

// windowItems totals the window's movable pods per shape, in the solver's
// shape order (largest first), so equal inputs give equal packings.
func windowItems(w []*node) []packItem {
	idx := map[*shape]int{}
	var items []packItem
	for _, nd := range w {
		for _, pr := range nd.placed {
			if !resplitMovable(pr.s, nd) {
				continue
			}
			i, ok := idx[pr.s]
			if !ok {
				i = len(items)
				idx[pr.s] = i
				items = append(items, packItem{s: pr.s})
			}
			items[i].n += int(pr.n)
		}
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].s.rank < items[j].s.rank })
	return items
}

// fractional is the cheapest a single type could hold used for if it could
// be bought in fractions: a claim near it has nothing to gain.
func (pk *packer) fractional(used resVec) float64 {
	best := math.Inf(1)
	for _, i := range pk.b.cands {
		avail := pk.b.pool.avail[i]
		share := 0.0
		for r, v := range used {
			if v > 0 {
				if avail[r] <= 0 {
					share = math.Inf(1)
					break
				}
				share = math.Max(share, float64(v)/float64(avail[r]))
			}
		}
		best = math.Min(best, share*pk.st.typePrice(pk.b, i))
	}
	return best
}

// best is the cheapest packing found: every candidate type filled in three
// pod orders (the solver's, memory-heavy first, CPU-heavy first), and the
// pods split by their memory-to-CPU ratio into two parts packed apart, so
// CPU-heavy and memory-heavy pods can land on different families. Pinned
// nodes are filled first, by the first part.
func (pk *packer) best(items []packItem) packing {
	best := pk.homogeneous(items, true)
	if len(items) < 2 || len(items) > 16 {
		return best
	}
	byRatio := append([]packItem(nil), items...)
	sort.SliceStable(byRatio, func(i, j int) bool { return memPerCPU(byRatio[i].s) < memPerCPU(byRatio[j].s) })
	for cut := 1; cut < len(byRatio); cut++ {
		a := pk.homogeneous(byRatio[:cut], true)
		if a.nodes == nil || !a.better(best) {
			continue
		}
		b := pk.homogeneous(byRatio[cut:], false)
		both := packing{nodes: append(append([]packNode(nil), a.nodes...), b.nodes...), cost: a.cost + b.cost}
		if b.nodes != nil && both.better(best) {
			best = both
		}
	}
	return best
}

func memPerCPU(s *shape) float64 {
	return float64(s.req[resMemory]) / float64(max(s.req[resCPU], 1))
}

// homogeneous fills the pinned nodes (when withPinned) and then nodes of
// one candidate type at a time, each node then right-sized, and keeps the
// cheapest result.
func (pk *packer) homogeneous(items []packItem, withPinned bool) packing {
	orders := [][]packItem{items}
	if len(items) > 1 {
		memFirst := append([]packItem(nil), items...)
		sort.SliceStable(memFirst, func(i, j int) bool { return memPerCPU(memFirst[i].s) > memPerCPU(memFirst[j].s) })
		cpuFirst := append([]packItem(nil), items...)
		sort.SliceStable(cpuFirst, func(i, j int) bool { return memPerCPU(cpuFirst[i].s) < memPerCPU(cpuFirst[j].s) })
		orders = append(orders, memFirst, cpuFirst)
	}
	best := packing{cost: math.Inf(1)}
	for _, t := range pk.b.cands {
		for _, order := range orders {
			if p := pk.fill(order, t, withPinned); p.nodes != nil && p.better(best) {
				best = p
			}
		}
	}
	if best.nodes == nil {
		return packing{}
	}
	return best
}

// fill packs items first-fit: into the pinned nodes (when withPinned, each
// up to type t, or its current type if its pinned pods outgrow t), then
// onto fresh nodes of type t, taking as many pods of each shape as fit in
// turn; nil if some pod fits no node of t.
func (pk *packer) fill(items []packItem, t int, withPinned bool) packing {
	pk.work++
	left := make([]int, len(items))
	remaining := 0
	for i, it := range items {
		left[i] = it.n
		remaining += it.n
	}
	var out packing
	add := func(nd packNode, capacity resVec) bool {
		remaining -= pk.take(&nd, items, left, capacity)
		if nd.typ = pk.rightSize(nd.used); nd.typ < 0 {
			return false
		}
		out.cost += pk.st.typePrice(pk.b, nd.typ)
		out.nodes = append(out.nodes, nd)
		return true
	}
	if withPinned {
		for _, p := range pk.pinned {
			capacity := pk.b.pool.avail[t]
			if !vecLE(p.used, capacity) {
				capacity = pk.b.pool.avail[p.nd.claim.cur]
			}
			if !add(packNode{home: p.nd, used: p.used.clone()}, capacity) {
				return packing{}
			}
		}
	}
	for remaining > 0 {
		before := remaining
		if !add(packNode{used: make(resVec, len(pk.b.pool.avail[t]))}, pk.b.pool.avail[t]) || remaining == before {
			return packing{}
		}
	}
	return out
}

// take moves as many pods as fit into nd, shape by shape in items' order,
// and returns how many it took.
func (pk *packer) take(nd *packNode, items []packItem, left []int, capacity resVec) int {
	took := 0
	for i, it := range items {
		if left[i] == 0 {
			continue
		}
		k := it.s.req.fitCount(nd.used, capacity, left[i])
		if k == 0 {
			continue
		}
		nd.used.addScaled(it.s.req, int64(k))
		nd.items = append(nd.items, packItem{s: it.s, n: k})
		left[i] -= k
		took += k
	}
	return took
}

// rightSize is the cheapest candidate type that holds used.
func (pk *packer) rightSize(used resVec) int {
	best, bestPrice := -1, math.Inf(1)
	for _, i := range pk.b.cands {
		if vecLE(used, pk.b.pool.avail[i]) {
			if p := pk.st.typePrice(pk.b, i); p < bestPrice {
				best, bestPrice = i, p
			}
		}
	}
	return best
}

// better prefers the cheaper packing, and at equal cost the one with fewer
// nodes (less daemon overhead, fewer launches).
func (p packing) better(o packing) bool {
	if o.nodes == nil || p.cost < o.cost-1e-9 {
		return true
	}
	return p.cost <= o.cost+1e-9 && len(p.nodes) < len(o.nodes)
}
