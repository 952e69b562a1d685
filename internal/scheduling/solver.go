package scheduling

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// node is an existing node, an in-flight claim, or a claim planned in this
// solve. Claims carry a *claimState.
type node struct {
	idx    int32
	name   string
	labels map[string]string // existing nodes
	taints []corev1.Taint    // the taints that block scheduling now
	used   resVec
	alloc  resVec // existing nodes
	ports  []hostPort
	placed []podRange
	claim  *claimState
	src    *ExistingNode
	// anti are an existing node's pods with required anti-affinity.
	anti []*corev1.Pod
	pool string // an existing node's karpenter.sh/nodepool label
	// vols are an existing node's attached volumes against its CSI
	// drivers' limits (volumelimits.go); nil when nothing limits it.
	vols *volumeUsage
	// inRoomy marks membership of state.roomy.
	inRoomy bool
	// price is what a claim launches at, set when the plan is made.
	price float64
}

type podRange struct {
	s     *shape
	start int32
	n     int32
}

// state is one solve's working set.
type state struct {
	ctx      context.Context
	in       *Input
	space    *resourceSpace
	pools    []*poolState
	nodes    []*node
	shapes   []*shape
	groups   *groupBuilder
	universe map[string][]string
	nsLabels map[string]map[string]string
	variants int
	claimSeq int
	failed   []*Unschedulable
	opts     Options
	daemons  []*daemon
	zero     resVec
	rankBuf  []rankedOption
	topoKeys []string // topology keys other than hostname, sorted
	roomy    []int32  // nodes with room for the smallest pod (zero-cost pass)
	minReq   resVec   // per-resource minimum request over all shapes
	candBuf  []int32  // reused by every shape's candidate list
	// reservedUsed counts the plan's claims per capacity reservation.
	reservedUsed map[string]int
	// boundAsPending takes bound pods as pending (NewNodePrices).
	boundAsPending bool
	// volIdx resolves claims to PVs, classes and drivers.
	volIdx *volumeIndex
}

// Options tune a solve.
type Options struct {
	// NamespaceLabels resolves pod affinity namespaceSelectors.
	NamespaceLabels map[string]map[string]string
	// DisableRepack skips the final claim merge/downsize pass (and the
	// re-split pass after it).
	DisableRepack bool
	// DisableResplit skips only the re-split pass: greedy filling alone,
	// as Karpenter plans; benchmarks compare against it.
	DisableResplit bool
}

// Solve plans the placement of in.Pods. Equal input yields an equal plan.
// Pods that cannot be placed are listed with a reason; an error means the
// input itself is invalid (e.g. a NodePool requirement admits nothing).
func Solve(ctx context.Context, in *Input) (*Plan, error) {
	return SolveWithOptions(ctx, in, Options{})
}

// SolveWithOptions is Solve with tuning.
func SolveWithOptions(ctx context.Context, in *Input, opts Options) (*Plan, error) {
	st := &state{ctx: ctx, in: in, space: newResourceSpace(), universe: map[string][]string{}, nsLabels: opts.NamespaceLabels, opts: opts}
	st.groups = &groupBuilder{byKey: map[string]*topoGroup{}, nsLabels: opts.NamespaceLabels}
	if err := st.buildShapes(); err != nil {
		return nil, err
	}
	if err := st.buildPools(); err != nil {
		return nil, err
	}
	if err := st.buildExisting(); err != nil {
		return nil, err
	}
	st.buildVolumeUsage()
	st.zero = make(resVec, st.space.dim())
	st.buildUniverse()
	st.filteredDomains()
	st.linkGroups()
	st.orderShapes()
	if err := st.placeAll(); err != nil {
		return nil, err
	}
	if !opts.DisableRepack {
		st.repack()
		if !opts.DisableResplit {
			st.resplit()
		}
	}
	plan := st.plan()
	plan.LowerBoundPerHour = st.lowerBound()
	return plan, nil
}

// placeAll places every shape in order. Like Karpenter, pods that fail
// are retried after the others, round after round, until a round places
// nothing: a pod with affinity to a smaller pod sorts before it and only
// fits once that pod is placed.
func (st *state) placeAll() error {
	queue := st.shapes
	for len(queue) > 0 {
		var retry []*shape
		progress := 0
		for i, s := range queue {
			// Checking every 64 shapes keeps cancellation prompt and cheap.
			if i&63 == 0 && st.ctx.Err() != nil {
				return fmt.Errorf("solve: %w", st.ctx.Err())
			}
			before := s.placedSoFar
			if !st.placeShape(s) {
				retry = append(retry, s)
			}
			progress += s.placedSoFar - before
		}
		if progress == 0 {
			for _, s := range retry {
				st.fail(s, s.unplacedReason)
			}
			return nil
		}
		queue = retry
	}
	return nil
}

// mask returns the pool's types compatible with the shape's requirements.
func (st *state) mask(s *shape, p *poolState) bitset {
	if s.masks == nil {
		s.masks = map[*poolState]bitset{}
	}
	if m, ok := s.masks[p]; ok {
		return m
	}
	m := p.mask(s.reqs)
	if len(s.ports) > 0 {
		m = m.and(p.portFree(s.ports))
	}
	s.masks[p] = m
	return m
}

// placeShape places every pod of s: existing nodes and claims with room
// first, then claims that can grow into a bigger type, then new claims;
// relaxing preferences when nothing more fits.
func (st *state) placeShape(s *shape) bool {
	if s.invalid != "" {
		st.fail(s, s.invalid)
		return true
	}
	// Shapes are placed one at a time, so they share one candidate buffer.
	s.cands, s.seen = st.candBuf[:0], 0
	// Without topology terms, nothing this shape does can give another node
	// room for it: once a pass over paid-for room comes back empty, later
	// ones would too (growth and new claims are sized to be full).
	noRoom := false
	for s.placedSoFar < len(s.pods) {
		n := len(s.pods) - s.placedSoFar
		placed := 0
		if !noRoom {
			placed = st.pass(s, n)
			noRoom = placed == 0 && len(s.owned) == 0 && len(s.inverseAnti) == 0
		}
		if placed == 0 {
			placed = st.grow(s, n)
		}
		if placed == 0 {
			placed = st.openClaim(s, n)
		}
		if placed > 0 {
			continue
		}
		if st.relax(s) != "" {
			noRoom = false
			continue
		}
		break
	}
	// The shape is done for this round: its caches are garbage now (a
	// retry rebuilds them, since other shapes change the nodes meanwhile).
	st.candBuf = s.cands[:0]
	s.cands, s.masks, s.ideals, s.excl, s.seen = nil, nil, nil, nil, 0
	return s.placedSoFar == len(s.pods)
}

func (st *state) fail(s *shape, reason string) {
	if reason == "" {
		reason = "no node or NodePool can take the pod"
	}
	for _, p := range s.pods[s.placedSoFar:] {
		st.failed = append(st.failed, &Unschedulable{Pod: podKey(p), Reason: reason, PodRef: p})
	}
	s.placedSoFar = len(s.pods)
}

// pass walks the nodes that still have room for the smallest pod of any
// shape, placing as many pods of s as fit in room already paid for
// (existing nodes, and claims' current cheapest type). Full nodes leave the
// list, so later passes only look where something could still fit.
func (st *state) pass(s *shape, n int) int {
	placed := 0
	out := st.roomy[:0]
	for i, ni := range st.roomy {
		if placed == n {
			out = append(out, st.roomy[i:]...)
			break
		}
		nd := st.nodes[ni]
		if !st.hasRoom(nd) {
			nd.inRoomy = false
			continue
		}
		out = append(out, ni)
		if s.excl.has(int(ni)) {
			continue
		}
		k, never := st.try(s, nd, n-placed)
		if never {
			s.excl.set(int(ni))
			continue
		}
		placed += k
	}
	st.roomy = out
	return placed
}

// hasRoom reports whether nd could take the smallest pod of any shape
// without growing.
func (st *state) hasRoom(nd *node) bool {
	if nd.claim == nil {
		return st.minReq.fits(nd.used, nd.alloc)
	}
	return st.minReq.fits(nd.used, nd.claim.pool.avail[nd.claim.cur])
}

func (st *state) addRoomy(nd *node) {
	if !nd.inRoomy && st.hasRoom(nd) {
		nd.inRoomy = true
		st.roomy = append(st.roomy, nd.idx)
	}
}
