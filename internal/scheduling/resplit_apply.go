package scheduling

import "fmt"

// materialize replaces the window's claims by the packing's nodes: nodes
// with pinned pods keep them and take their share, the window's other
// nodes are reused next (keeping their names), fresh claims are added for
// the rest, and leftover nodes are emptied (a claim with no pods is not
// launched). Nothing changes unless every new node has launchable
// options within the NodePool's limits and minValues.
func (st *state) materialize(b *resplitBucket, old []*node, pk packing) bool {
	charged, ok := st.chargesFor(b, old, pk)
	if !ok {
		return false
	}
	opts := make([]bitset, len(pk.nodes))
	for i, pn := range pk.nodes {
		if opts[i], ok = b.pool.fittingOptions(b.reqs, pn.used, charged[i]); !ok {
			return false
		}
	}
	ranges, spare := st.releaseMovable(old)
	p := b.pool
	for i, pn := range pk.nodes {
		nd := pn.home
		switch {
		case nd != nil:
		case len(spare) > 0:
			nd, spare = spare[0], spare[1:]
		default:
			nd = st.freshClaim(b)
		}
		for _, it := range pn.items {
			nd.placed = append(nd.placed, takePods(ranges, it)...)
			nd.used.addScaled(it.s.req, int64(it.n))
		}
		c := nd.claim
		c.options, c.cur, c.charged = opts[i], opts[i].first(), charged[i]
		c.maxAvail = p.maxAvailOf(opts[i])
		c.version++
	}
	return true
}

// chargesFor checks the NodePool's limits for the packing: the window's
// reservations are given back, and each new node reserves its own type's
// capacity (its options are capped there). Without limits nothing is
// reserved.
func (st *state) chargesFor(b *resplitBucket, old []*node, pk packing) ([][]int64, bool) {
	p := b.pool
	out := make([][]int64, len(pk.nodes))
	if p.nodesLimited && int64(len(pk.nodes)-len(old)) > p.nodesRemain {
		return nil, false
	}
	if len(p.limitNames) == 0 {
		p.nodesRemain -= int64(len(pk.nodes) - len(old))
		return out, true
	}
	remain := append([]int64(nil), p.limitRemain...)
	for _, nd := range old {
		for j, v := range nd.claim.charged {
			remain[j] += v
		}
	}
	for i, pn := range pk.nodes {
		out[i] = append([]int64(nil), p.limitUse[pn.typ]...)
		for j, v := range out[i] {
			remain[j] -= v
			if remain[j] < 0 {
				return nil, false
			}
		}
	}
	p.limitRemain = remain
	p.nodesRemain -= int64(len(pk.nodes) - len(old))
	return out, true
}

// fittingOptions is every type a claim may launch as: compatible with its
// requirements (so with a launchable offering), holding used, within the
// claim's reservation, and meeting minValues. False if none qualify.
func (p *poolState) fittingOptions(reqs Requirements, used resVec, charged []int64) (bitset, bool) {
	opts := newBitset(len(p.types))
	for i, t := range p.types {
		if vecLE(used, p.avail[i]) && p.withinCharge(i, charged) && typeCompatible(t, reqs) {
			opts.set(i)
		}
	}
	if opts.empty() {
		return nil, false
	}
	if p.minValues {
		// Strict even under BestEffort: a re-split is an optimisation and
		// must not lower a claim's minValues the greedy plan kept.
		if ok, _ := p.satisfiesMinValues(reqs, opts); !ok {
			return nil, false
		}
	}
	return opts, true
}

// maxAvailOf is the per-resource maximum over the options, for quick
// rejection.
func (p *poolState) maxAvailOf(opts bitset) resVec {
	var out resVec
	opts.each(func(i int) bool {
		if out == nil {
			out = p.avail[i].clone()
			return true
		}
		for j, v := range p.avail[i] {
			out[j] = max(out[j], v)
		}
		return true
	})
	return out
}

// releaseMovable takes the movable pods off the window's nodes, into a
// pool of ranges per shape, and returns the nodes left with nothing pinned
// (free to be reused for the packing's other nodes).
func (st *state) releaseMovable(old []*node) (map[*shape][]podRange, []*node) {
	ranges := map[*shape][]podRange{}
	var spare []*node
	for _, nd := range old {
		var kept []podRange
		used := make(resVec, len(nd.used))
		for _, pr := range nd.placed {
			if resplitMovable(pr.s, nd) {
				ranges[pr.s] = append(ranges[pr.s], pr)
				continue
			}
			kept = append(kept, pr)
			used.addScaled(pr.s.req, int64(pr.n))
		}
		nd.placed, nd.used = kept, used
		if len(kept) == 0 {
			spare = append(spare, nd)
		}
	}
	return ranges, spare
}

// takePods removes it.n pods of it.s from the pool of ranges.
func takePods(ranges map[*shape][]podRange, it packItem) []podRange {
	var out []podRange
	need := int32(it.n)
	rs := ranges[it.s]
	for need > 0 && len(rs) > 0 {
		r := &rs[0]
		k := min(need, r.n)
		out = append(out, podRange{s: it.s, start: r.start, n: k})
		r.start += k
		r.n -= k
		need -= k
		if r.n == 0 {
			rs = rs[1:]
		}
	}
	ranges[it.s] = rs
	return out
}

// freshClaim adds an empty claim to the bucket's pool and requirements.
func (st *state) freshClaim(b *resplitBucket) *node {
	st.claimSeq++
	hostname := fmt.Sprintf("hostname-placeholder-%05d", st.claimSeq)
	reqs := b.reqs.Add(Requirement{Key: LabelHostname, values: []string{hostname}})
	c := &claimState{pool: b.pool, reqs: reqs, hostname: hostname}
	nd := &node{idx: int32(len(st.nodes)), name: hostname, used: make(resVec, st.space.dim()), claim: c, taints: b.pool.taints}
	nd.ports = append(nd.ports, b.pool.daemonPorts(b.pool.all)...)
	st.nodes = append(st.nodes, nd)
	return nd
}
