package scheduling

import (
	"math"
	"sort"
)

// resplit re-packs sets of claims that first-fit filling left expensive.
// Filling grows one claim until it holds everything that fits, then buys
// the cheapest type that holds it: with prices roughly linear in size,
// that ends in one big node, often a third idle, where two right-sized
// nodes, or nodes of different families for CPU-heavy and memory-heavy
// pods, cost less. For each window of interchangeable claims (same
// NodePool and requirements) it moves the pods free of per-node topology
// (the others stay, pinned, and share their node's room), searches
// re-packings onto candidate types and keeps one only if it is cheaper;
// every node then launches as the cheapest type that holds exactly its
// pods, with all fitting types still offered to CreateFleet.
func (st *state) resplit() {
	budget := resplitBudget
	// A pass re-packs each window once; a window that changed gives the
	// next pass new claims to combine, so passes repeat while they save.
	for pass := 0; pass < resplitPasses && budget > 0; pass++ {
		changed := false
		for _, b := range st.resplitBuckets() {
			for _, w := range b.windows() {
				if budget <= 0 {
					return
				}
				work, saved := st.resplitWindow(b, w)
				budget -= work
				changed = changed || saved
			}
		}
		if !changed {
			return
		}
	}
}

const resplitPasses = 3

// resplitBudget bounds the packing work (in greedy packs) of one solve, so
// a plan of thousands of claims costs milliseconds more, not seconds.
const resplitBudget = 20000

// resplitBucket is the claims that could swap pods freely: same pool,
// same requirements (hostname aside).
type resplitBucket struct {
	pool   *poolState
	reqs   Requirements // without hostname
	claims []*node
	cands  []int     // candidate types, cheapest first, no dominated type
	price  []float64 // per type under reqs; NaN until computed
}

func (st *state) resplitBuckets() []*resplitBucket {
	byKey := map[string]*resplitBucket{}
	var out []*resplitBucket
	for _, nd := range st.nodes {
		if nd.claim == nil || len(nd.placed) == 0 || !st.resplittable(nd) {
			continue
		}
		reqs := withoutKey(nd.claim.reqs, LabelHostname)
		key := nd.claim.pool.np.Name + "\x00" + reqs.canonical()
		b := byKey[key]
		if b == nil {
			b = &resplitBucket{pool: nd.claim.pool, reqs: reqs}
			byKey[key] = b
			out = append(out, b)
		}
		b.claims = append(b.claims, nd)
	}
	for _, b := range out {
		b.price = make([]float64, len(b.pool.types))
		for i := range b.price {
			b.price[i] = math.NaN()
		}
		b.cands = st.candidateTypes(b)
	}
	return out
}

// resplittable reports whether nd holds a pod the pass may move.
func (st *state) resplittable(nd *node) bool {
	for _, pr := range nd.placed {
		if resplitMovable(pr.s, nd) {
			return true
		}
	}
	return false
}

// resplitMovable reports whether pods of s on nd may move to any node of
// the same bucket: no host ports, no pod affinity, no topology counted per
// node, and every other topology key already decided by the claim (so all
// nodes of the bucket are in the same domain and counts do not change).
// Other pods stay where they are (pinned) and only their room is shared.
func resplitMovable(s *shape, nd *node) bool {
	if !movable(s) {
		return false
	}
	for _, gs := range [][]*topoGroup{s.owned, s.countedBy, s.inverseAnti} {
		for _, g := range gs {
			if g.key == LabelHostname {
				return false
			}
			if r, ok := nd.claim.reqs.Get(g.key); !ok || !r.Finite() || r.Len() != 1 {
				return false
			}
		}
	}
	return true
}

func withoutKey(rs Requirements, key string) Requirements {
	out := make(Requirements, 0, len(rs))
	for _, r := range rs {
		if r.Key != key {
			out = append(out, r)
		}
	}
	return out
}

// candidateTypes lists the bucket's types that every pod on its claims may
// use, dropping any type another one beats on price and every resource.
func (st *state) candidateTypes(b *resplitBucket) []int {
	p := b.pool
	allowed := newBitset(len(p.types))
	for i, t := range p.types {
		if typeCompatible(t, b.reqs) {
			allowed.set(i)
		}
	}
	for _, nd := range b.claims {
		for _, pr := range nd.placed {
			m := st.mask(pr.s, p)
			for w := range allowed {
				allowed[w] &= m[w]
			}
		}
	}
	var out []int
	allowed.each(func(i int) bool {
		if st.typePrice(b, i) > 0 && !dominated(p, out, i) {
			out = append(out, i)
		}
		return true
	})
	return out
}

// dominated reports whether a cheaper-or-equal kept type has at least as
// much of every resource (types come cheapest first).
func dominated(p *poolState, kept []int, i int) bool {
	for _, k := range kept {
		if vecLE(p.avail[i], p.avail[k]) {
			return true
		}
	}
	return false
}

// typePrice is what type i costs under the bucket's requirements (zone,
// capacity type): its cheapest allowed offering; 0 if it has none.
func (st *state) typePrice(b *resplitBucket, i int) float64 {
	if !math.IsNaN(b.price[i]) {
		return b.price[i]
	}
	o, ok := cheapestOffering(b.pool.types[i], b.reqs, "")
	b.price[i] = 0
	if ok {
		b.price[i] = o.Price
	}
	return b.price[i]
}

// windows are the claim sets to re-pack: the whole bucket when small,
// else its emptiest claims together; then each claim alone.
func (b *resplitBucket) windows() [][]*node {
	const small = 8
	if len(b.claims) <= small {
		out := [][]*node{b.claims}
		if len(b.claims) > 1 {
			for _, nd := range b.claims {
				out = append(out, []*node{nd})
			}
		}
		return out
	}
	byFill := append([]*node(nil), b.claims...)
	sort.SliceStable(byFill, func(i, j int) bool { return utilization(byFill[i]) < utilization(byFill[j]) })
	out := [][]*node{byFill[:small]}
	for _, nd := range byFill {
		out = append(out, []*node{nd})
	}
	return out
}

// utilization is the claim's fullest resource share of its current type.
func utilization(nd *node) float64 {
	avail := nd.claim.pool.avail[nd.claim.cur]
	u := 0.0
	for r, v := range nd.used {
		if avail[r] > 0 {
			u = math.Max(u, float64(v)/float64(avail[r]))
		}
	}
	return u
}

// resplitWindow re-packs one window when that is cheaper; it returns the
// packing work spent and whether the window changed.
func (st *state) resplitWindow(b *resplitBucket, w []*node) (int, bool) {
	live := w[:0:0]
	for _, nd := range w {
		if len(nd.placed) > 0 {
			live = append(live, nd)
		}
	}
	if len(live) == 0 || len(b.cands) == 0 {
		return 0, false
	}
	cur := 0.0
	for _, nd := range live {
		cur += st.typePrice(b, nd.claim.cur)
	}
	pk := &packer{st: st, b: b, pinned: pinnedNodes(live)}
	items := windowItems(live)
	if len(items) == 0 {
		return 0, false
	}
	if len(live) == 1 && cur <= pk.fractional(live[0].used)*1.02 {
		return 1, false // already within 2 % of what any type mix could do
	}
	best := pk.best(items)
	if best.nodes == nil || best.cost >= cur*(1-1e-6) {
		return pk.work, false
	}
	// The search prices types one at a time; a claim launches as CreateFleet
	// would (preferred capacity type first, then the cheapest option), so
	// the change is kept only if it is cheaper at the prices finalize uses.
	before := st.launchCost(live)
	undo := st.snapshot(b, live)
	if !st.materialize(b, live, best) {
		undo.restore(st)
		return pk.work, false
	}
	if st.launchCost(undo.touched(st)) >= before-1e-9 {
		undo.restore(st)
		return pk.work, false
	}
	return pk.work, true
}

// launchCost is what the claims are expected to launch at (see resolve
// and launchPrice): the objective the re-split pass minimizes.
func (st *state) launchCost(nodes []*node) float64 {
	total := 0.0
	for _, nd := range nodes {
		if len(nd.placed) == 0 {
			continue
		}
		ct, ranked := resolve(nd.claim, st.rankBuf, nil)
		st.rankBuf = ranked[:0]
		total += launchPrice(ct, ranked[:min(len(ranked), MaxInstanceTypeOptions)])
	}
	return total
}

// resplitUndo restores a window and its pool's limits after a trial.
type resplitUndo struct {
	nodes       []*node
	saved       []node
	claims      []claimState
	nodeCount   int
	claimSeq    int
	limitRemain []int64
	nodesRemain int64
}

func (st *state) snapshot(b *resplitBucket, w []*node) *resplitUndo {
	u := &resplitUndo{nodes: w, nodeCount: len(st.nodes), claimSeq: st.claimSeq,
		limitRemain: append([]int64(nil), b.pool.limitRemain...), nodesRemain: b.pool.nodesRemain}
	for _, nd := range w {
		u.saved = append(u.saved, *nd)
		u.claims = append(u.claims, *nd.claim)
	}
	return u
}

// touched is the window's nodes plus the fresh claims added since.
func (u *resplitUndo) touched(st *state) []*node {
	return append(append([]*node(nil), u.nodes...), st.nodes[u.nodeCount:]...)
}

func (u *resplitUndo) restore(st *state) {
	for i, nd := range u.nodes {
		c := nd.claim
		*nd = u.saved[i]
		*c = u.claims[i]
		nd.claim = c
	}
	st.nodes = st.nodes[:u.nodeCount]
	st.claimSeq = u.claimSeq
	p := u.nodes[0].claim.pool
	p.limitRemain, p.nodesRemain = u.limitRemain, u.nodesRemain
}
