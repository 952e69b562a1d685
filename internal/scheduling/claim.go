package scheduling

import (
	"fmt"
	"math/bits"
)

// claimState is a NodeClaim being planned.
type claimState struct {
	pool     *poolState
	reqs     Requirements
	hostname string
	options  bitset // types that fit everything placed so far
	cur      int    // cheapest option (options are ordered by price)
	maxAvail resVec // per-resource max over options, for quick rejection
	version  int    // bumps whenever reqs or options change
	viable   map[string]viableCache
	merged   []int   // shape variants already intersected into reqs
	charged  []int64 // NodePool limit reserved at creation (limit order)
}

// try places up to limit pods of s on nd; perm reports that nd can never
// take this shape variant (so it leaves the candidate list).
func (st *state) try(s *shape, nd *node, limit int, growth bool) (int, bool) {
	if len(s.ports) > 0 {
		if portsConflict(nd.ports, s.ports) {
			return 0, true
		}
		limit = 1
	}
	c := nd.claim
	if c == nil {
		if growth {
			return 0, false
		}
		if nd.src.MarkedForDeletion || untoleratedTaint(s.tolerations, nd.taints, !s.toleratePrefer) != nil || !s.reqs.MatchesLabels(nd.labels) {
			return 0, true
		}
		k := s.req.fitCount(nd.used, nd.alloc, limit)
		if k == 0 {
			return 0, true
		}
		tr := st.topology(s, nd, k)
		if tr.allow == 0 {
			return 0, tr.permanent
		}
		st.commit(s, nd, tr.allow)
		return tr.allow, false
	}
	if !growth && !s.req.fits(nd.used, c.pool.avail[c.cur]) {
		return 0, false // no paid-for room; the growth pass decides the rest
	}
	if !s.req.fits(nd.used, c.maxAvail) {
		return 0, true
	}
	if (len(c.pool.taints) > 0 && untoleratedTaint(s.tolerations, c.pool.taints, !s.toleratePrefer) != nil) ||
		(len(s.reqs) > 0 && c.reqs.Compatible(s.reqs) != nil) {
		return 0, true
	}
	mask := st.mask(s, c.pool)
	k := 0
	if !growth {
		if !mask.has(c.cur) {
			return 0, false
		}
		k = s.req.fitCount(nd.used, c.pool.avail[c.cur], limit)
	} else {
		c.options.each(func(i int) bool {
			if mask.has(i) {
				k = max(k, s.req.fitCount(nd.used, c.pool.avail[i], limit))
			}
			return k < limit
		})
		if k == 0 {
			return 0, true
		}
	}
	if k == 0 {
		return 0, false
	}
	tr := st.topology(s, nd, k)
	if tr.allow == 0 {
		return 0, tr.permanent
	}
	for k = tr.allow; k > 0; k /= 2 {
		if st.commitClaim(s, nd, k, tr.narrow, mask) {
			return k, false
		}
	}
	return 0, false
}

// commitClaim merges the shape's requirements and narrowings into the claim,
// keeps the options that still fit k more pods, and places them. It
// changes nothing and returns false when no option would remain.
func (st *state) commitClaim(s *shape, nd *node, k int, narrow []narrowing, mask bitset) bool {
	c := nd.claim
	reqs := c.reqs
	merged := false
	for _, v := range c.merged {
		if v == s.variant {
			merged = true
			break
		}
	}
	if !merged && len(s.reqs) > 0 {
		reqs = reqs.Intersect(s.reqs)
	}
	for _, nw := range narrow {
		reqs = reqs.Add(Requirement{Key: nw.key, values: nw.values})
	}
	changed := !reqs.Equal(c.reqs)
	used := nd.used.clone()
	used.addScaled(s.req, int64(k))
	opts := newBitset(len(c.pool.types))
	maxAvail := make(resVec, len(used))
	found := false
	for wi, w := range c.options {
		w &= mask[wi]
		for w != 0 {
			i := wi<<6 + bits.TrailingZeros64(w)
			w &= w - 1
			av := c.pool.avail[i]
			if !vecLE(used, av) || (changed && !typeCompatible(c.pool.types[i], reqs)) {
				continue
			}
			opts[wi] |= 1 << (uint(i) & 63)
			found = true
			for j, v := range av {
				maxAvail[j] = max(maxAvail[j], v)
			}
		}
	}
	if !found {
		return false
	}
	if c.pool.minValues {
		if ok, _ := c.pool.satisfiesMinValues(reqs, opts); !ok {
			return false
		}
	}
	var decidedBefore []bool
	for _, nw := range narrow {
		_, d := st.domainsOf(nd, nw.key, nil)
		decidedBefore = append(decidedBefore, d)
	}
	if changed || !opts.equal(c.options) {
		c.version++ // invalidates cached viable domains
	}
	c.reqs = reqs
	c.options = opts
	c.cur = opts.first()
	c.maxAvail = maxAvail
	if !merged && len(s.reqs) > 0 {
		c.merged = append(c.merged, s.variant)
	}
	for i, nw := range narrow {
		if !decidedBefore[i] {
			st.recordDecided(nd, nw.key)
		}
	}
	st.commit(s, nd, k)
	if int(nd.idx) < len(st.nodes) && st.nodes[nd.idx] == nd {
		st.addRoomy(nd) // a bigger type may leave room again
	}
	return true
}

// commit records k pods of s on nd (capacity already checked).
func (st *state) commit(s *shape, nd *node, k int) {
	nd.used.addScaled(s.req, int64(k))
	if len(s.ports) > 0 {
		nd.ports = append(nd.ports, s.ports...)
	}
	if l := len(nd.placed); l > 0 && nd.placed[l-1].s == s && int(nd.placed[l-1].start+nd.placed[l-1].n) == s.placedSoFar {
		nd.placed[l-1].n += int32(k)
	} else {
		nd.placed = append(nd.placed, podRange{s: s, start: int32(s.placedSoFar), n: int32(k)})
	}
	s.placedSoFar += k
	st.record(s, nd, k)
}

// openClaim starts a new claim from the first NodePool (by weight) that can
// take the shape, and places as many of its pods there as fit.
func (st *state) openClaim(s *shape, n int) int {
	var reasons []string
	for _, p := range st.pools {
		k, why := st.openClaimFrom(s, p, n)
		if k > 0 {
			return k
		}
		reasons = append(reasons, why)
	}
	if len(st.pools) == 0 {
		reasons = append(reasons, "no NodePools")
	}
	s.unplacedReason = st.explain(s, reasons)
	return 0
}

func (st *state) openClaimFrom(s *shape, p *poolState, n int) (int, string) {
	name := fmt.Sprintf("NodePool %q", p.np.Name)
	if t := untoleratedTaint(s.tolerations, p.taints, !s.toleratePrefer); t != nil {
		return 0, name + " taint " + taintString(t) + " is not tolerated"
	}
	if inc := p.reqs.Compatible(s.reqs); inc != nil {
		return 0, name + ": " + inc.Error()
	}
	if len(s.ports) > 0 && portsConflict(p.daemons, s.ports) {
		return 0, name + ": host ports conflict with its DaemonSets"
	}
	if len(p.types) == 0 {
		return 0, name + " has no launchable instance types (its requirements exclude every offering, or all are unavailable)"
	}
	mask := st.mask(s, p)
	if mask.empty() {
		return 0, name + ": no instance type matches"
	}
	if p.nodesExhausted() {
		return 0, name + ": node limit reached"
	}
	opts := newBitset(len(p.types))
	var maxAvail resVec
	k := 0
	anyFit, anyLimit := false, false
	mask.each(func(i int) bool {
		f := s.req.fitCount(st.zero, p.avail[i], n)
		if f == 0 {
			return true
		}
		anyFit = true
		if !p.withinLimits(i) {
			return true
		}
		anyLimit = true
		opts.set(i)
		k = max(k, f)
		if maxAvail == nil {
			maxAvail = p.avail[i].clone()
		} else {
			for j, v := range p.avail[i] {
				maxAvail[j] = max(maxAvail[j], v)
			}
		}
		return true
	})
	if !anyFit {
		return 0, name + ": no instance type has room"
	}
	if !anyLimit {
		return 0, name + ": limits exhausted"
	}
	if len(s.ports) > 0 {
		k = min(k, 1)
	}
	st.claimSeq++
	hostname := fmt.Sprintf("hostname-placeholder-%05d", st.claimSeq)
	reqs := p.reqs.Intersect(s.reqs).Add(Requirement{Key: LabelHostname, values: []string{hostname}})
	if p.minValues {
		if ok, why := p.satisfiesMinValues(reqs, opts); !ok {
			st.claimSeq--
			return 0, name + ": minValues: " + why
		}
	}
	c := &claimState{pool: p, reqs: reqs, hostname: hostname, options: opts, cur: opts.first(), maxAvail: maxAvail}
	nd := &node{idx: int32(len(st.nodes)), name: hostname, used: make(resVec, st.space.dim()), claim: c, taints: p.taints}
	nd.ports = append(nd.ports, p.daemons...)
	tr := st.topology(s, nd, k)
	if tr.allow == 0 {
		st.claimSeq--
		return 0, name + ": " + tr.reason()
	}
	fullMask := p.all
	for k = tr.allow; k > 0; k /= 2 {
		if st.commitClaim(s, nd, k, tr.narrow, fullMask) {
			break
		}
	}
	if k == 0 {
		st.claimSeq--
		return 0, name + ": no instance type is offered where the topology constraints lead"
	}
	st.nodes = append(st.nodes, nd)
	st.addRoomy(nd)
	c.charged = p.charge(c.options)
	return k, ""
}
