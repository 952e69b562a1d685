package scheduling

import (
	"context"
	"math"
)

// NewNodePrices returns, for each pod of in.Pods (by namespace/name), the
// lowest price a new node holding that pod could launch at: over the
// (NodePool, instance type) pairs the pod's hard constraints (node
// selector, required node affinity, volumes, tolerations of the pool's
// taints) admit and whose allocatable, less the pool's DaemonSet overhead,
// holds the pod whole, the cheapest offering the pool's and the pod's
// requirements allow; +Inf where there is none. No claim a solve of the
// same pools plans for the pod costs less, at its cheapest or expected
// price, whatever else it holds: a caller may rule out a plan that would
// need a new node for the pod without solving. in.Nodes are not read, and
// bound pods are priced as if pending (the nodes they are on left aside).
func NewNodePrices(in *Input) (map[string]float64, error) {
	cp := *in
	cp.Nodes = nil
	st := &state{ctx: context.Background(), in: &cp, space: newResourceSpace(), universe: map[string][]string{}, boundAsPending: true}
	st.groups = &groupBuilder{byKey: map[string]*topoGroup{}}
	if err := st.buildShapes(); err != nil {
		return nil, err
	}
	if err := st.buildPools(); err != nil {
		return nil, err
	}
	st.zero = make(resVec, st.space.dim())
	cols := st.columns()
	byHard := map[string][]float64{}
	out := make(map[string]float64, len(in.Pods))
	for _, s := range st.shapes {
		best := math.Inf(1)
		if s.invalid == "" {
			hk := hardKey(s)
			prices, ok := byHard[hk]
			if !ok {
				prices = st.classPrices(s, cols)
				byHard[hk] = prices
			}
			for j, p := range prices {
				if !math.IsNaN(p) && p < best && s.req.fits(st.zero, cols.avail[j]) {
					best = p
				}
			}
		}
		for _, p := range s.pods {
			out[podKey(p)] = best
		}
	}
	return out, nil
}
