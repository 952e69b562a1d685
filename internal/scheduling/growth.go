package scheduling

import (
	"math"
	"math/bits"
)

// growPass grows one claim by one step: among the claims that could take
// the shape by moving up to a pricier type, it picks the one where the
// step costs least per pod placed (so memory-heavy pods go where memory is
// already paid for and only CPU is missing, and so on), and places as many
// pods as that step's type holds. The scan stops early at a claim whose
// step costs no more per pod than the pod's share of the most
// cost-efficient type: nothing can beat that by much.
func (st *state) growPass(s *shape, n int) int {
	type choice struct {
		nd     *node
		k      int
		rate   float64
		narrow []narrowing
		mask   bitset
	}
	var bestV choice
	var best *choice // points at bestV once something was found
	second := math.Inf(1)
	var lastPool *poolState
	var lastMask bitset
	var lastIdeal float64
	poolInfo := func(p *poolState) (bitset, float64) {
		if p != lastPool {
			lastPool, lastMask, lastIdeal = p, st.mask(s, p), st.idealRate(s, p)
		}
		return lastMask, lastIdeal
	}
	// stepOf sizes the next growth step of a claim; bound skips the
	// topology check (the costly part) when even an unconstrained step
	// could not beat that rate, reporting the optimistic rate instead.
	stepOf := func(nd *node, limit int, bound float64) (int, float64, topoResult, bitset, bool) {
		c := nd.claim
		if len(s.ports) > 0 {
			if portsConflict(nd.ports, s.ports) {
				return 0, 0, topoResult{}, nil, true
			}
			limit = 1
		}
		if !s.req.fits(nd.used, c.maxAvail) {
			return 0, 0, topoResult{}, nil, true
		}
		if (len(c.pool.taints) > 0 && untoleratedTaint(s.tolerations, c.pool.taints, !s.toleratePrefer) != nil) ||
			(len(s.reqs) > 0 && c.reqs.Compatible(s.reqs) != nil) {
			return 0, 0, topoResult{}, nil, true
		}
		mask, _ := poolInfo(c.pool)
		step := firstFit(c.options, mask, s.req, nd.used, c.pool.avail)
		if step < 0 {
			return 0, 0, topoResult{}, nil, true
		}
		k := s.req.fitCount(nd.used, c.pool.avail[step], limit)
		delta := c.pool.types[step].rankPrice - c.pool.types[c.cur].rankPrice
		if optimistic := delta / float64(k); optimistic >= bound {
			return 0, optimistic, topoResult{}, nil, false
		}
		tr := st.topology(s, nd, k)
		if tr.allow == 0 {
			return 0, 0, tr, nil, tr.permanent
		}
		return tr.allow, delta / float64(tr.allow), tr, mask, false
	}
	good := false // best is as good as it gets; stop scanning
	eval := func(ni int32) bool {
		nd := st.nodes[ni]
		if nd.claim == nil {
			return false
		}
		bound := math.Inf(1)
		if best != nil {
			bound = best.rate
		}
		k, rate, tr, mask, perm := stepOf(nd, n, bound)
		if perm {
			return true
		}
		if k == 0 {
			if rate > 0 && rate < second {
				second = rate
			}
			return false
		}
		if best == nil || rate < best.rate {
			if best != nil {
				second = best.rate
			}
			bestV = choice{nd: nd, k: k, rate: rate, narrow: tr.narrow, mask: mask}
			best = &bestV
			if _, ideal := poolInfo(nd.claim.pool); rate <= ideal {
				good, second = true, ideal
			}
		} else if rate < second {
			second = rate
		}
		return false
	}
	out := s.cands[:0]
	for i, ni := range s.cands {
		if good {
			out = append(out, s.cands[i:]...)
			break
		}
		if !eval(ni) {
			out = append(out, ni)
		} else {
			s.excl.set(int(ni))
		}
	}
	s.cands = out
	for ; !good && s.seen < len(st.nodes); s.seen++ {
		if !eval(int32(s.seen)) {
			s.cands = append(s.cands, int32(s.seen))
		} else {
			s.excl.set(s.seen)
		}
	}
	if best == nil {
		return 0
	}
	// Keep growing the chosen claim while its next step is no dearer per
	// pod than the runner-up's: nothing else changed, so this is what
	// re-running the pass would pick, without re-evaluating every claim.
	placed := 0
	k, narrow, mask := best.k, best.narrow, best.mask
	for {
		done := 0
		for kk := k; kk > 0; kk /= 2 {
			if st.commitClaim(s, best.nd, kk, narrow, mask) {
				done = kk
				break
			}
		}
		placed += done
		if done == 0 || placed >= n {
			return placed
		}
		var rate float64
		var tr topoResult
		var perm bool
		k, rate, tr, mask, perm = stepOf(best.nd, n-placed, math.Inf(1))
		if perm || k == 0 || rate > second {
			return placed
		}
		narrow = tr.narrow
	}
}

// firstFit returns the cheapest type in options∧mask that has room for
// req on top of used, or -1.
func firstFit(options, mask bitset, req, used resVec, avail []resVec) int {
	for wi, w := range options {
		w &= mask[wi]
		for w != 0 {
			t := bits.TrailingZeros64(w)
			i := wi<<6 + t
			if req.fits(used, avail[i]) {
				return i
			}
			w &= w - 1
		}
	}
	return -1
}

// idealRate is the shape's pod cost in the pool's most cost-efficient
// compatible type: that type's price times the pod's largest fractional
// share of any resource. Growth steps near it cannot be improved on much.
func (st *state) idealRate(s *shape, p *poolState) float64 {
	if v, ok := s.ideals[p]; ok {
		return v
	}
	best := math.Inf(1)
	st.mask(s, p).each(func(i int) bool {
		share := 0.0
		for d, x := range s.req {
			if x <= 0 {
				continue
			}
			a := p.avail[i][d]
			if a <= 0 {
				share = math.Inf(1)
				break
			}
			share = max(share, float64(x)/float64(a))
		}
		best = min(best, p.types[i].rankPrice*share)
		return true
	})
	if s.ideals == nil {
		s.ideals = map[*poolState]float64{}
	}
	s.ideals[p] = best
	return best
}
