package scheduling

import (
	"fmt"
	"strings"
)

// explain turns per-pool failures into one sentence a person can act on.
func (st *state) explain(s *shape, reasons []string) string {
	var taintPools []string
	var taint string
	sameTaint := true
	var rest []string
	for i, r := range reasons {
		if i < len(st.pools) {
			p := st.pools[i]
			if p.skipped != "" {
				rest = append(rest, r)
				continue
			}
			if t := untoleratedTaint(s.tolerations, p.taints, !s.toleratePrefer); t != nil {
				ts := taintString(t)
				if taint != "" && ts != taint {
					sameTaint = false
				}
				taint = ts
				taintPools = append(taintPools, p.np.Name)
				if d := st.detail(s, p); d != "" {
					rest = append(rest, d)
				}
				continue
			}
			if strings.HasSuffix(r, "no instance type matches") {
				if d := st.detail(s, p); d != "" {
					r = d
				}
			} else if strings.HasSuffix(r, "no instance type has room") {
				r = st.roomDetail(s, p)
			}
		}
		rest = append(rest, r)
	}
	var out []string
	if len(taintPools) > 0 {
		if sameTaint && len(taintPools) == len(st.pools) {
			out = append(out, "no NodePool tolerates taint "+taint)
		} else {
			for _, name := range taintPools {
				p := st.poolByName(name)
				out = append(out, fmt.Sprintf("NodePool %q taint %s is not tolerated", name, taintString(untoleratedTaint(s.tolerations, p.taints, !s.toleratePrefer))))
			}
		}
	}
	out = append(out, rest...)
	return joinReasons(out)
}

func (st *state) poolByName(name string) *poolState {
	for _, p := range st.pools {
		if p.np.Name == name {
			return p
		}
	}
	return nil
}

// detail explains a requirement conflict between the shape and a pool's
// instance types: which pod requirement no type of the pool satisfies.
func (st *state) detail(s *shape, p *poolState) string {
	name := fmt.Sprintf("NodePool %q", p.np.Name)
	if inc := p.reqs.Compatible(s.reqs); inc != nil {
		return name + ": " + inc.Error()
	}
	if !p.mask(s.reqs).empty() {
		return ""
	}
	for i := range s.reqs {
		r := s.reqs[i]
		if p.mask(Requirements{r}).empty() {
			var poolSide []string
			for j := range p.np.Requirements {
				pr := &p.np.Requirements[j]
				if pr.Key != r.Key && isTypeLevelKey(pr.Key) {
					poolSide = append(poolSide, pr.String())
				}
			}
			if len(poolSide) == 0 {
				return fmt.Sprintf("no instance type of %s satisfies pod requirement %s", name, r.String())
			}
			return fmt.Sprintf("%s requires %s but pod requires %s", name, strings.Join(poolSide, ", "), r.String())
		}
	}
	return fmt.Sprintf("no instance type of %s satisfies pod requirements %s together", name, s.reqs.String())
}

func (st *state) roomDetail(s *shape, p *poolState) string {
	mask := p.mask(s.reqs)
	best := -1
	mask.each(func(i int) bool {
		if best < 0 || p.avail[i][resCPU] > p.avail[best][resCPU] || (p.avail[i][resCPU] == p.avail[best][resCPU] && p.avail[i][resMemory] > p.avail[best][resMemory]) {
			best = i
		}
		return true
	})
	need := st.space.describe(s.req)
	if best < 0 {
		return fmt.Sprintf("NodePool %q: no instance type has room for %s", p.np.Name, need)
	}
	short := st.space.firstExceeded(s.req, p.avail[best])
	return fmt.Sprintf("NodePool %q: no instance type has room for %s (largest, %s, leaves %s after DaemonSet overhead; short on %s)",
		p.np.Name, need, p.types[best].it.Name, st.space.describe(p.avail[best]), short)
}
