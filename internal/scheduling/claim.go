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

// try places up to limit pods of s on nd in room already paid for (an
// existing node's allocatable, a claim's current cheapest type); never
// reports that nd can never take this shape variant (so it leaves the
// shape's candidates).
func (st *state) try(s *shape, nd *node, limit int) (placed int, never bool) {
	c := nd.claim
	if c == nil {
		return st.tryExisting(s, nd, limit)
	}
	// No paid-for room is the common miss and the cheapest test, so it
	// comes before admits; the growth pass decides the rest.
	if !s.req.fits(nd.used, c.pool.avail[c.cur]) {
		return 0, false
	}
	limit, ok := admits(s, nd, limit)
	if !ok {
		return 0, true
	}
	mask := st.mask(s, c.pool)
	if !mask.has(c.cur) {
		return 0, false
	}
	k := s.req.fitCount(nd.used, c.pool.avail[c.cur], limit)
	if k == 0 {
		return 0, false
	}
	tr := st.topology(s, nd, k)
	if tr.allow == 0 {
		return 0, tr.permanent
	}
	return st.commitMost(s, nd, tr.allow, tr.narrow, mask), false
}

// tryExisting is try on an existing or in-flight node: its labels, taints
// and allocatable are fixed, so whatever fails now fails for good (except
// topology, which says so itself).
func (st *state) tryExisting(s *shape, nd *node, limit int) (placed int, never bool) {
	limit, ok := hostPortLimit(s, nd, limit)
	if !ok || nd.src.MarkedForDeletion || untoleratedTaint(s.tolerations, nd.taints, !s.toleratePrefer) != nil || !s.reqs.MatchesLabels(nd.labels) {
		return 0, true
	}
	k := s.req.fitCount(nd.used, nd.alloc, limit)
	if k == 0 {
		return 0, true
	}
	// None of the shape's pods can attach here: the node's volumes only
	// grow, so for good.
	if k = st.attachLimit(s, nd, k); k == 0 {
		return 0, true
	}
	tr := st.topology(s, nd, k)
	if tr.allow == 0 {
		return 0, tr.permanent
	}
	st.commit(s, nd, tr.allow)
	return tr.allow, false
}

// admits is the check before any placement on claim nd, shared by the pass
// over paid-for room (try) and the growth pass (stepOf): host ports free,
// room for a pod in the claim's largest option, the pool's taints
// tolerated, requirements compatible. A claim's ports and usage only grow
// and its options and requirements only narrow, so a claim that fails can
// never take this shape variant. It returns how many pods the claim may
// take at most.
func admits(s *shape, nd *node, limit int) (int, bool) {
	c := nd.claim
	limit, ok := hostPortLimit(s, nd, limit)
	if !ok || !s.req.fits(nd.used, c.maxAvail) {
		return 0, false
	}
	if len(c.pool.taints) > 0 && untoleratedTaint(s.tolerations, c.pool.taints, !s.toleratePrefer) != nil {
		return 0, false
	}
	if len(s.reqs) > 0 && c.reqs.Compatible(s.reqs) != nil {
		return 0, false
	}
	return limit, true
}

// hostPortLimit caps limit at one pod when the shape uses host ports (two
// would conflict with each other) and reports false when nd's ports
// already conflict.
func hostPortLimit(s *shape, nd *node, limit int) (int, bool) {
	if len(s.ports) == 0 {
		return limit, true
	}
	if portsConflict(nd.ports, s.ports) {
		return 0, false
	}
	return 1, true
}

// commitMost places as many of k pods on claim nd as one of its options
// holds: the narrowing and the requirements merged may leave no type with
// room for all k, so it halves until one fits. It returns the pods placed.
func (st *state) commitMost(s *shape, nd *node, k int, narrow []narrowing, mask bitset) int {
	for ; k > 0; k /= 2 {
		if st.commitClaim(s, nd, k, narrow, mask) {
			return k
		}
	}
	return 0
}

// commitClaim merges the shape's requirements and narrowings into the claim,
// keeps the options that still fit k more pods, and places them. It
// changes nothing and returns false when no option would remain.
func (st *state) commitClaim(s *shape, nd *node, k int, narrow []narrowing, mask bitset) bool {
	c := nd.claim
	reqs := c.reqs
	// A shape variant's requirements are intersected into a claim once;
	// later commits of the same variant skip the intersection.
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
	opts, maxAvail := keepOptions(c, mask, used, reqs, changed)
	if opts == nil {
		return false
	}
	if c.pool.minValues {
		var ok bool
		if reqs, ok, _ = c.pool.keepMinValues(reqs, opts); !ok {
			return false
		}
	}
	// Pods placed while a narrowed key was open were not counted in its
	// groups; once the narrowing decides the domain, recordDecided counts
	// them (only for keys that were not decided already).
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

// keepOptions returns the claim's options in mask that have room for used
// and, when the requirements changed, are compatible with reqs, with their
// per-resource maximum; nil when none is left. It walks the bitset a word
// at a time: it runs on every commit.
func keepOptions(c *claimState, mask bitset, used resVec, reqs Requirements, changed bool) (bitset, resVec) {
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
		return nil, nil
	}
	return opts, maxAvail
}

// commit records k pods of s on nd (capacity already checked).
func (st *state) commit(s *shape, nd *node, k int) {
	nd.used.addScaled(s.req, int64(k))
	st.attachPlaced(s, nd, k)
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

// openClaimFrom opens a claim in pool p for up to n pods of s, or says
// why p cannot take the shape.
func (st *state) openClaimFrom(s *shape, p *poolState, n int) (int, string) {
	name := fmt.Sprintf("NodePool %q", p.np.Name)
	mask, why := st.poolRejects(s, p)
	if why != "" {
		return 0, name + why
	}
	opts, maxAvail, k, why := st.newClaimOptions(s, p, mask, n)
	if why != "" {
		return 0, name + why
	}
	if len(s.ports) > 0 {
		k = min(k, 1)
	}
	st.claimSeq++
	hostname := fmt.Sprintf("hostname-placeholder-%05d", st.claimSeq)
	reqs := p.reqs.Intersect(s.reqs).Add(Requirement{Key: LabelHostname, values: []string{hostname}})
	if p.minValues {
		var ok bool
		if reqs, ok, why = p.keepMinValues(reqs, opts); !ok {
			st.claimSeq--
			return 0, name + ": minValues: " + why
		}
	}
	c := &claimState{pool: p, reqs: reqs, hostname: hostname, options: opts, cur: opts.first(), maxAvail: maxAvail}
	nd := &node{idx: int32(len(st.nodes)), name: hostname, used: make(resVec, st.space.dim()), claim: c, taints: p.taints}
	nd.ports = append(nd.ports, p.daemonPorts(opts)...)
	tr := st.topology(s, nd, k)
	if tr.allow == 0 {
		st.claimSeq--
		return 0, name + ": " + tr.reason()
	}
	if k = st.commitMost(s, nd, tr.allow, tr.narrow, p.all); k == 0 {
		st.claimSeq--
		return 0, name + ": no instance type is offered where the topology constraints lead"
	}
	st.nodes = append(st.nodes, nd)
	st.addRoomy(nd)
	c.charged = p.charge(c.options)
	return k, ""
}

// poolRejects says, after the pool's name, why pool p cannot take shape s
// whatever the pod count, or returns the pool's types compatible with it.
func (st *state) poolRejects(s *shape, p *poolState) (bitset, string) {
	if p.skipped != "" {
		return nil, " is skipped: " + p.skipped
	}
	if t := untoleratedTaint(s.tolerations, p.taints, !s.toleratePrefer); t != nil {
		return nil, " taint " + taintString(t) + " is not tolerated"
	}
	if inc := p.reqs.Compatible(s.reqs); inc != nil {
		return nil, ": " + inc.Error()
	}
	if len(s.ports) > 0 && p.portFree(s.ports).empty() {
		return nil, ": host ports conflict with its DaemonSets"
	}
	if len(p.types) == 0 {
		return nil, " has no launchable instance types (its requirements exclude every offering, or all are unavailable)"
	}
	mask := st.mask(s, p)
	if mask.empty() {
		return nil, ": no instance type matches"
	}
	if p.nodesExhausted() {
		return nil, ": node limit reached"
	}
	return mask, ""
}

// newClaimOptions lists the types a new claim for s may start with:
// compatible (mask), with room for a pod and within the NodePool's limits.
// k is the most pods (at most n) one of them holds; why, after the pool's
// name, says what left no option.
func (st *state) newClaimOptions(s *shape, p *poolState, mask bitset, n int) (opts bitset, maxAvail resVec, k int, why string) {
	opts = newBitset(len(p.types))
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
		return true
	})
	if !anyFit {
		return nil, nil, 0, ": no instance type has room"
	}
	if !anyLimit {
		return nil, nil, 0, ": limits exhausted"
	}
	return opts, p.maxAvailOf(opts), k, ""
}
