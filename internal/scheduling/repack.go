package scheduling

import "sort"

// repack improves the new claims after placement, never raising the plan's
// cost: pods only move into room another claim already pays for (its
// current cheapest type), and a move set is kept only when it empties a
// claim (merge) or lets a claim drop to a cheaper type (downsize). Moves
// keep every constraint: requirements, taints, host ports, and topology
// (a pod keeps its zone-like domains; hostname spread, anti-affinity and
// their counts are re-checked on the target). finalize then launches each
// remaining claim as the cheapest type that fits what it holds.
func (st *state) repack() {
	rp := &repacker{st: st, budget: 16*len(st.in.Pods) + 4096}
	for _, nd := range st.nodes {
		if nd.claim != nil && len(nd.placed) > 0 {
			rp.claims = append(rp.claims, nd)
		}
	}
	if len(rp.claims) < 2 {
		return
	}
	// The smallest request of any pod that could move: claims with less
	// room than this in some resource can never be a target.
	for _, sh := range st.shapes {
		if !movable(sh) {
			continue
		}
		if rp.minReq == nil {
			rp.minReq = sh.req.clone()
		}
		for d, x := range sh.req {
			rp.minReq[d] = min(rp.minReq[d], x)
		}
	}
	if rp.minReq == nil {
		return
	}
	rp.open = append([]*node(nil), rp.claims...)
	price := func(nd *node) float64 { return nd.claim.pool.types[nd.claim.cur].rankPrice }
	byPrice := append([]*node(nil), rp.claims...)
	sort.SliceStable(byPrice, func(i, j int) bool { return price(byPrice[i]) < price(byPrice[j]) })
	for _, a := range byPrice {
		if rp.budget <= 0 {
			return
		}
		rp.tryEmpty(a)
	}
	// Shrinking gets its own budget: merging may have spent the first.
	rp.budget = 64*len(st.in.Pods) + 4096
	for i := len(byPrice) - 1; i >= 0; i-- {
		a := byPrice[i]
		for rp.budget > 0 && len(a.placed) > 0 && rp.tryShrink(a) {
		}
	}
}

type repacker struct {
	st     *state
	claims []*node
	open   []*node // claims that may still have room for a move
	minReq resVec
	budget int
	// undo log of the move set under trial
	saved  map[*node]savedNode
	counts []countDelta
}

type savedNode struct {
	used   resVec
	placed []podRange
}

type countDelta struct {
	m     map[string]int32
	key   string
	delta int32
}

func (rp *repacker) begin() {
	rp.saved = map[*node]savedNode{}
	rp.counts = rp.counts[:0]
}

func (rp *repacker) touch(nd *node) {
	if _, ok := rp.saved[nd]; !ok {
		rp.saved[nd] = savedNode{used: nd.used.clone(), placed: append([]podRange(nil), nd.placed...)}
	}
}

func (rp *repacker) bump(m map[string]int32, key string, d int32) {
	m[key] += d
	rp.counts = append(rp.counts, countDelta{m, key, d})
}

func (rp *repacker) rollback() {
	for nd, s := range rp.saved {
		nd.used, nd.placed = s.used, s.placed
	}
	for i := len(rp.counts) - 1; i >= 0; i-- {
		c := rp.counts[i]
		c.m[c.key] -= c.delta
	}
	rp.saved = nil
}

// commit refreshes the options of every claim the move set touched.
func (rp *repacker) commit() bool {
	for nd := range rp.saved {
		if !rp.refreshOptions(nd) {
			rp.rollback()
			return false
		}
	}
	rp.saved = nil
	return true
}

// refreshOptions recomputes a claim's options from its pool: every type
// compatible with its requirements that fits what it now holds.
func (rp *repacker) refreshOptions(nd *node) bool {
	c := nd.claim
	nd.placed = compactRanges(nd.placed)
	if len(nd.placed) == 0 {
		return true
	}
	// Domains the claim was counted in only because its options allowed
	// nothing else must stay put when cheaper options come back: pin them.
	for _, key := range rp.st.topoKeys {
		if doms, decided := rp.st.domainsOf(nd, key, nil); decided {
			if r, ok := c.reqs.Get(key); !ok || !r.Finite() || len(r.Values()) != 1 {
				c.reqs = c.reqs.Add(Requirement{Key: key, values: []string{doms[0]}})
			}
		}
	}
	opts, ok := c.pool.fittingOptions(c.reqs, nd.used, c.charged)
	if !ok {
		return false
	}
	c.options, c.cur, c.maxAvail = opts, opts.first(), c.pool.maxAvailOf(opts)
	c.version++
	return true
}

func compactRanges(rs []podRange) []podRange {
	out := rs[:0]
	for _, r := range rs {
		if r.n > 0 {
			out = append(out, r)
		}
	}
	return out
}

// movable reports whether pods of s may ever leave their claim: no host
// ports, no pod affinity either way (moving could strand a follower).
func movable(s *shape) bool {
	if len(s.ports) > 0 {
		return false
	}
	for _, g := range s.owned {
		if g.kind == kindAffinity {
			return false
		}
	}
	for _, g := range s.countedBy {
		if g.kind == kindAffinity {
			return false
		}
	}
	return true
}

// canMove reports whether one pod of s may move from claim a to claim b
// without b paying for a bigger type or any constraint breaking.
func (rp *repacker) canMove(s *shape, a, b *node) bool {
	c := b.claim
	if b == a || len(b.placed) == 0 || !s.req.fits(b.used, c.pool.avail[c.cur]) {
		return false
	}
	rp.budget--
	if untoleratedTaint(s.tolerations, c.pool.taints, !s.toleratePrefer) != nil || c.reqs.Compatible(s.reqs) != nil {
		return false
	}
	if len(s.reqs) > 0 && !c.reqs.Intersect(s.reqs).Equal(c.reqs) {
		return false
	}
	if !rp.st.mask(s, c.pool).has(c.cur) {
		return false
	}
	check := func(g *topoGroup, owned bool) bool {
		if g.key != LabelHostname {
			da, okA := rp.st.domainsOf(a, g.key, nil)
			db, okB := rp.st.domainsOf(b, g.key, nil)
			if okA {
				// Leaving a decided domain could lower its count below what
				// pods already placed elsewhere relied on.
				return okB && da[0] == db[0] && g.nodeCounts(a) == g.nodeCounts(b)
			}
			// A merely counted pod on an undecided claim was never recorded;
			// it may go anywhere (move() records it if b is decided).
			return !owned && g.kind == kindSpread
		}
		if g.nodeCounts(a) != g.nodeCounts(b) {
			return false
		}
		h := c.hostname
		switch g.kind {
		case kindSpread:
			if !owned {
				return true
			}
			inc := int32(0)
			if g.selects(s.ns, s.labels, rp.st.nsLabels) {
				inc = 1
			}
			return g.counts[h]+inc <= g.maxSkew
		case kindAnti:
			if owned {
				return g.counts[h] == 0
			}
			return g.owners[h] == 0
		}
		return false
	}
	for _, g := range s.owned {
		if !check(g, true) {
			return false
		}
	}
	for _, g := range s.countedBy {
		if !check(g, false) {
			return false
		}
	}
	return true
}

// move shifts one pod (the last of range ri) from a to b.
func (rp *repacker) move(a *node, ri int, b *node) {
	rp.touch(a)
	rp.touch(b)
	r := &a.placed[ri]
	s := r.s
	r.n--
	idx := r.start + r.n
	a.used.addScaled(s.req, -1)
	b.used.addScaled(s.req, 1)
	if l := len(b.placed); l > 0 && b.placed[l-1].s == s && b.placed[l-1].start == idx+1 {
		b.placed[l-1].start, b.placed[l-1].n = idx, b.placed[l-1].n+1
	} else if l > 0 && b.placed[l-1].s == s && b.placed[l-1].start+b.placed[l-1].n == idx {
		b.placed[l-1].n++
	} else {
		b.placed = append(b.placed, podRange{s: s, start: idx, n: 1})
	}
	ha, hb := a.claim.hostname, b.claim.hostname
	for _, g := range s.countedBy {
		if g.key == LabelHostname {
			if g.nodeCounts(a) {
				rp.bump(g.counts, ha, -1)
				rp.bump(g.counts, hb, 1)
			}
			continue
		}
		if _, okA := rp.st.domainsOf(a, g.key, nil); !okA && g.kind == kindSpread && g.nodeCounts(b) {
			if db, okB := rp.st.domainsOf(b, g.key, nil); okB {
				rp.bump(g.counts, db[0], 1)
			}
		}
	}
	for _, t := range s.antiAffinity {
		if t.group.key == LabelHostname {
			rp.bump(t.group.owners, ha, -1)
			rp.bump(t.group.owners, hb, 1)
		}
	}
}

// target finds the first claim with paid-for room for one pod of s,
// dropping from the open list claims too full for any pod to move in.
func (rp *repacker) target(s *shape, a *node) *node {
	out := rp.open[:0]
	var found *node
	for i, b := range rp.open {
		if found != nil || rp.budget <= 0 {
			out = append(out, rp.open[i:]...)
			break
		}
		c := b.claim
		if len(b.placed) > 0 && !rp.minReq.fits(b.used, c.pool.avail[c.cur]) {
			continue
		}
		out = append(out, b)
		if rp.canMove(s, a, b) {
			found = b
		}
	}
	rp.open = out
	return found
}

// tryEmpty moves every pod off a; kept only if all of them find room.
func (rp *repacker) tryEmpty(a *node) bool {
	for _, r := range a.placed {
		if !movable(r.s) {
			return false
		}
	}
	rp.begin()
	for ri := len(a.placed) - 1; ri >= 0; ri-- {
		for a.placed[ri].n > 0 {
			b := rp.target(a.placed[ri].s, a)
			if b == nil {
				rp.rollback()
				return false
			}
			rp.move(a, ri, b)
		}
	}
	return rp.commit()
}

// tryShrink moves pods off a until it fits the next cheaper compatible
// type; kept only if it gets there.
func (rp *repacker) tryShrink(a *node) bool {
	c := a.claim
	curPrice := c.pool.types[c.cur].rankPrice
	goal := -1
	for i, t := range c.pool.types {
		if t.rankPrice >= curPrice {
			break
		}
		if typeCompatible(t, c.reqs) {
			goal = i // the priciest type still cheaper than the current one
		}
	}
	if goal < 0 {
		return false
	}
	avail := c.pool.avail[goal]
	over := func() bool { return !vecLE(a.used, avail) }
	rp.begin()
	rp.touch(a) // refreshed on commit even when nothing had to move
	for ri := len(a.placed) - 1; ri >= 0 && over(); ri-- {
		s := a.placed[ri].s
		if !movable(s) || !helps(s.req, a.used, avail) {
			continue
		}
		for a.placed[ri].n > 0 && over() && helps(s.req, a.used, avail) {
			b := rp.target(s, a)
			if b == nil {
				break
			}
			rp.move(a, ri, b)
		}
	}
	if over() {
		rp.rollback()
		return false
	}
	return rp.commit() && c.pool.types[c.cur].rankPrice < curPrice
}

// helps reports whether removing req reduces an overfull dimension.
func helps(req, used, avail resVec) bool {
	for i, x := range req {
		if x > 0 && used[i] > avail[i] {
			return true
		}
	}
	return false
}
