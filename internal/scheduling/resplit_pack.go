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

// packNode is one node of a candidate packing.
type packNode struct {
	typ   int
	used  resVec
	items []packItem
}

type packing struct {
	nodes []packNode
	cost  float64
}

// packer searches packings of a window's pods onto its bucket's types.
type packer struct {
	st   *state
	b    *resplitBucket
	work int
}

// windowItems totals the window's pods per shape, in the solver's shape
// order (largest first), so equal inputs give equal packings.
func windowItems(w []*node) []packItem {
	idx := map[*shape]int{}
	var items []packItem
	for _, nd := range w {
		for _, pr := range nd.placed {
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
// CPU-heavy and memory-heavy pods can land on different families.
func (pk *packer) best(items []packItem) packing {
	best := pk.homogeneous(items)
	if len(items) < 2 || len(items) > 16 {
		return best
	}
	byRatio := append([]packItem(nil), items...)
	sort.SliceStable(byRatio, func(i, j int) bool { return memPerCPU(byRatio[i].s) < memPerCPU(byRatio[j].s) })
	for cut := 1; cut < len(byRatio); cut++ {
		a := pk.homogeneous(byRatio[:cut])
		if a.nodes == nil || a.cost >= best.cost {
			continue
		}
		b := pk.homogeneous(byRatio[cut:])
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

// homogeneous fills nodes of one candidate type at a time (each node then
// right-sized) and keeps the cheapest result.
func (pk *packer) homogeneous(items []packItem) packing {
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
			if p := pk.fill(order, t); p.nodes != nil && p.better(best) {
				best = p
			}
		}
	}
	if best.nodes == nil {
		return packing{}
	}
	return best
}

// fill packs items first-fit onto nodes of type t, taking as many pods of
// each shape as fit in turn; nil if some pod fits no node of t.
func (pk *packer) fill(items []packItem, t int) packing {
	pk.work++
	avail := pk.b.pool.avail[t]
	left := make([]int, len(items))
	remaining := 0
	for i, it := range items {
		left[i] = it.n
		remaining += it.n
	}
	var out packing
	for remaining > 0 {
		nd := packNode{used: make(resVec, len(avail))}
		for i, it := range items {
			if left[i] == 0 {
				continue
			}
			k := it.s.req.fitCount(nd.used, avail, left[i])
			if k == 0 {
				continue
			}
			nd.used.addScaled(it.s.req, int64(k))
			nd.items = append(nd.items, packItem{s: it.s, n: k})
			left[i] -= k
			remaining -= k
		}
		if len(nd.items) == 0 {
			return packing{}
		}
		nd.typ = pk.rightSize(nd.used)
		out.cost += pk.st.typePrice(pk.b, nd.typ)
		out.nodes = append(out.nodes, nd)
	}
	return out
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
