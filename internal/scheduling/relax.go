package scheduling

import "fmt"

// activate recomputes the shape's effective constraints for its current
// relaxation level and forgets per-variant caches.
func (st *state) activate(s *shape) {
	st.variants++
	s.variant = st.variants
	reqs := s.baseReqs
	if len(s.requiredTerms) > 0 {
		reqs = reqs.Intersect(s.requiredTerms[s.termIdx])
	}
	if s.prefNodeIdx < len(s.preferredNode) {
		reqs = reqs.Intersect(s.preferredNode[s.prefNodeIdx].reqs)
	}
	s.reqs = reqs
	s.owned = s.owned[:0]
	anyway := 0
	for _, sp := range s.spreads {
		if sp.anyway {
			anyway++
			if anyway <= s.anywayDropped {
				continue
			}
		}
		s.owned = append(s.owned, sp.group)
	}
	for _, t := range s.affinity {
		s.owned = append(s.owned, t.group)
	}
	for _, t := range s.prefAffinity[min(s.prefAffDropped, len(s.prefAffinity)):] {
		s.owned = append(s.owned, t.group)
	}
	for _, t := range s.antiAffinity {
		s.owned = append(s.owned, t.group)
	}
	for _, t := range s.prefAnti[min(s.prefAntiDropped, len(s.prefAnti)):] {
		s.owned = append(s.owned, t.group)
	}
	s.owned = dedupeGroups(s.owned)
	s.masks, s.ideals = nil, nil
	s.excl = s.excl[:0]
	s.cands = s.cands[:0]
	s.seen = 0
}

func dedupeGroups(gs []*topoGroup) []*topoGroup {
	out := gs[:0]
	for i, g := range gs {
		dup := false
		for _, h := range gs[:i] {
			if h == g {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, g)
		}
	}
	return out
}

// relax drops the next preference in Karpenter's order and reports what it
// dropped ("" when nothing is left to relax).
func (st *state) relax(s *shape) string {
	var what string
	anywayTotal := 0
	for _, sp := range s.spreads {
		if sp.anyway {
			anywayTotal++
		}
	}
	switch {
	case s.termIdx+1 < len(s.requiredTerms):
		s.termIdx++
		what = fmt.Sprintf("tried required node affinity term %d", s.termIdx+1)
	case s.prefAffDropped < len(s.prefAffinity):
		s.prefAffDropped++
		what = "dropped a preferred pod affinity term"
	case s.prefAntiDropped < len(s.prefAnti):
		s.prefAntiDropped++
		what = "dropped a preferred pod anti-affinity term"
	case s.prefNodeIdx < len(s.preferredNode):
		s.prefNodeIdx++
		what = "dropped a preferred node affinity term"
	case s.anywayDropped < anywayTotal:
		s.anywayDropped++
		what = "dropped a ScheduleAnyway topology spread"
	case !s.toleratePrefer:
		s.toleratePrefer = true
		what = "tolerated PreferNoSchedule taints"
	default:
		return ""
	}
	st.activate(s)
	return what
}
