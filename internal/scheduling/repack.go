package scheduling

import "sort"

// repack runs after placement: it empties the cheapest new claims whose
// pods are free of topology and host-port ties by moving those pods into
// room other new claims already pay for (their current cheapest type), so
// the emptied claims are dropped. Claims never move to a pricier type
// here, so the plan's cost only goes down; finalize then launches every
// remaining claim as the cheapest type that fits what it holds.
func (st *state) repack() {
	var claims []*node
	for _, nd := range st.nodes {
		if nd.claim != nil && len(nd.placed) > 0 {
			claims = append(claims, nd)
		}
	}
	if len(claims) < 2 {
		return
	}
	price := func(nd *node) float64 { return nd.claim.pool.types[nd.claim.cur].rankPrice }
	sort.SliceStable(claims, func(i, j int) bool { return price(claims[i]) < price(claims[j]) })
	type move struct {
		s      *shape
		start  int32
		n      int32
		target *node
	}
	removed := map[*node]bool{}
	for _, a := range claims {
		if !st.movable(a) {
			continue
		}
		tentative := map[*node]resVec{}
		var moves []move
		ok := true
		for _, pr := range a.placed {
			s := pr.s
			start, remaining := pr.start, pr.n
			for _, b := range claims {
				if remaining == 0 {
					break
				}
				if b == a || removed[b] {
					continue
				}
				c := b.claim
				if untoleratedTaint(s.tolerations, c.pool.taints, !s.toleratePrefer) != nil || c.reqs.Compatible(s.reqs) != nil {
					continue
				}
				if len(s.reqs) > 0 && !c.reqs.Intersect(s.reqs).Equal(c.reqs) {
					continue
				}
				if !st.mask(s, c.pool).has(c.cur) {
					continue
				}
				used, seen := tentative[b]
				if !seen {
					used = b.used.clone()
				}
				k := int32(s.req.fitCount(used, c.pool.avail[c.cur], int(remaining)))
				if k == 0 {
					continue
				}
				used.addScaled(s.req, int64(k))
				tentative[b] = used
				moves = append(moves, move{s: s, start: start, n: k, target: b})
				start += k
				remaining -= k
			}
			if remaining > 0 {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for _, m := range moves {
			m.target.placed = append(m.target.placed, podRange{s: m.s, start: m.start, n: m.n})
		}
		for b, used := range tentative {
			b.used = used
			c := b.claim
			opts := newBitset(len(c.pool.types))
			c.options.each(func(i int) bool {
				if vecLE(used, c.pool.avail[i]) {
					opts.set(i)
				}
				return true
			})
			c.options = opts
			c.cur = opts.first()
			c.version++
		}
		a.placed = nil
		removed[a] = true
	}
}

// movable reports whether every pod on the claim could sit on any other
// compatible claim without changing any topology count or host port.
func (st *state) movable(nd *node) bool {
	for _, pr := range nd.placed {
		s := pr.s
		if len(s.owned) > 0 || len(s.countedBy) > 0 || len(s.ports) > 0 {
			return false
		}
	}
	return true
}
