package scheduling

import (
	"context"
	"math"

	corev1 "k8s.io/api/core/v1"
)

// NewNodeFloor is what any new node a solve could give a pod costs at
// least. A solve's claim holding the pod costs no less than Price, at its
// cheapest or expected price, whatever else it holds; and no less than
// PerUnit[r] times its allocatable of r (less DaemonSet overhead), for r
// CPU (millicores), memory (bytes) and pods, so new nodes holding such
// pods and, together, x of r cost at least x*PerUnit[r].
type NewNodeFloor struct {
	Price   float64
	PerUnit [3]float64
}

// FloorResources are the resources of NewNodeFloor.PerUnit, in order.
var FloorResources = [3]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods}

// NewNodePrices returns, for each pod of in.Pods (by namespace/name), the
// floor of the new nodes a solve could give it: over the (NodePool,
// instance type) pairs the pod's hard constraints (node selector, required
// node affinity, volumes, tolerations of the pool's taints) admit and whose
// allocatable, less the pool's DaemonSet overhead, holds the pod whole, at
// the cheapest offering the pool's and the pod's requirements allow. Where
// there is none, every field is +Inf. A caller may rule out a plan that
// would need new nodes for such pods without solving. Pods with the same
// constraints share one floor. in.Nodes are not read, and bound pods are
// priced as if pending (the nodes they are on left aside).
func NewNodePrices(in *Input) (map[string]*NewNodeFloor, error) {
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
	out := make(map[string]*NewNodeFloor, len(in.Pods))
	for _, s := range st.shapes {
		f := &NewNodeFloor{Price: math.Inf(1), PerUnit: [3]float64{math.Inf(1), math.Inf(1), math.Inf(1)}}
		if s.invalid == "" {
			hk := hardKey(s)
			prices, ok := byHard[hk]
			if !ok {
				prices = st.classPrices(s, cols)
				byHard[hk] = prices
			}
			for j, p := range prices {
				if math.IsNaN(p) || !s.req.fits(st.zero, cols.avail[j]) {
					continue
				}
				f.Price = min(f.Price, p)
				for r, dim := range []int{resCPU, resMemory, resPods} {
					if a := cols.avail[j][dim]; a > 0 { // a type without any of r holds none of it
						f.PerUnit[r] = min(f.PerUnit[r], p/float64(a))
					}
				}
			}
		}
		for _, p := range s.pods {
			out[podKey(p)] = f
		}
	}
	return out, nil
}
