package scheduling

import (
	"math"
	"math/bits"
)

// grow grows one claim by one step: among the claims that could take the
// shape by moving up to a pricier type, it picks the one where the step
// costs least per pod placed (so memory-heavy pods go where memory is
// already paid for and only CPU is missing, and so on), and places as many
// pods as that step's type holds. The scan stops early at a claim whose
// step costs no more per pod than the pod's share of the most
// cost-efficient type: nothing can beat that by much.
func (st *state) grow(s *shape, n int) int {
	g := growPass{st: st, s: s, second: math.Inf(1)}
	g.scan(n)
	if g.nd == nil {
		return 0
	}
	return g.keepGrowing(n)
}

// growthStep is the next growth step of one claim for the shape.
type growthStep struct {
	k    int     // pods the step places; 0 when it places none now
	rate float64 // price increase per pod placed (see stepOf when k is 0)
	// narrow and mask are what commitClaim needs to take the step.
	narrow []narrowing
	mask   bitset
	never  bool // the claim can never take this shape variant
}

// growPass is one growth pass for a shape: the cheapest step per pod found
// so far, the runner-up's rate, and the last pool's mask and ideal rate
// (a shape's candidates come in runs of claims from one pool).
type growPass struct {
	st     *state
	s      *shape
	nd     *node // the claim of the best step; nil until one is found
	best   growthStep
	second float64 // the runner-up's rate per pod
	good   bool    // best is as good as it gets; stop scanning

	lastPool  *poolState
	lastMask  bitset
	lastIdeal float64
}

func (g *growPass) poolInfo(p *poolState) (bitset, float64) {
	if p != g.lastPool {
		g.lastPool, g.lastMask, g.lastIdeal = p, g.st.mask(g.s, p), g.st.idealRate(g.s, p)
	}
	return g.lastMask, g.lastIdeal
}

// stepOf sizes the next growth step of claim nd, taking at most limit
// pods. bound skips the topology check (the costly part) when even an
// unconstrained step could not beat that rate: the step then places no
// pod and its rate is the optimistic one.
func (g *growPass) stepOf(nd *node, limit int, bound float64) growthStep {
	s, c := g.s, nd.claim
	limit, ok := admits(s, nd, limit)
	if !ok {
		return growthStep{never: true}
	}
	mask, _ := g.poolInfo(c.pool)
	// Options only narrow and usage only grows, so no step now is none ever.
	step := firstFit(c.options, mask, s.req, nd.used, c.pool.avail)
	if step < 0 {
		return growthStep{never: true}
	}
	k := s.req.fitCount(nd.used, c.pool.avail[step], limit)
	delta := c.pool.types[step].rankPrice - c.pool.types[c.cur].rankPrice
	if optimistic := delta / float64(k); optimistic >= bound {
		return growthStep{rate: optimistic}
	}
	tr := g.st.topology(s, nd, k)
	if tr.allow == 0 {
		return growthStep{never: tr.permanent}
	}
	return growthStep{k: tr.allow, rate: delta / float64(tr.allow), narrow: tr.narrow, mask: mask}
}

// eval weighs claim ni's step against the best so far and reports whether
// the claim can never take the shape.
func (g *growPass) eval(ni int32, n int) bool {
	nd := g.st.nodes[ni]
	if nd.claim == nil {
		return false
	}
	bound := math.Inf(1)
	if g.nd != nil {
		bound = g.best.rate
	}
	step := g.stepOf(nd, n, bound)
	if step.never {
		return true
	}
	if step.k == 0 {
		// A skipped step still bounds the runner-up: keepGrowing stops
		// where another claim might do better.
		if step.rate > 0 && step.rate < g.second {
			g.second = step.rate
		}
		return false
	}
	if g.nd == nil || step.rate < g.best.rate {
		if g.nd != nil {
			g.second = g.best.rate
		}
		g.nd, g.best = nd, step
		if _, ideal := g.poolInfo(nd.claim.pool); step.rate <= ideal {
			g.good, g.second = true, ideal
		}
	} else if step.rate < g.second {
		g.second = step.rate
	}
	return false
}

// scan evaluates the shape's candidate claims, then the nodes it has not
// seen yet (claims opened since); claims that can never take the shape
// leave the candidates for good.
func (g *growPass) scan(n int) {
	s := g.s
	out := s.cands[:0]
	for i, ni := range s.cands {
		if g.good {
			out = append(out, s.cands[i:]...) // unscanned ones stay candidates
			break
		}
		if !g.eval(ni, n) {
			out = append(out, ni)
		} else {
			s.excl.set(int(ni))
		}
	}
	s.cands = out
	for ; !g.good && s.seen < len(g.st.nodes); s.seen++ {
		if !g.eval(int32(s.seen), n) {
			s.cands = append(s.cands, int32(s.seen))
		} else {
			s.excl.set(s.seen)
		}
	}
}

// keepGrowing takes the best step and keeps growing the chosen claim while
// its next step is no dearer per pod than the runner-up's: nothing else
// changed, so this is what re-running the pass would pick, without
// re-evaluating every claim.
func (g *growPass) keepGrowing(n int) int {
	placed := 0
	step := g.best
	for {
		done := g.st.commitMost(g.s, g.nd, step.k, step.narrow, step.mask)
		placed += done
		if done == 0 || placed >= n {
			return placed
		}
		step = g.stepOf(g.nd, n-placed, math.Inf(1))
		if step.never || step.k == 0 || step.rate > g.second {
			return placed
		}
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
