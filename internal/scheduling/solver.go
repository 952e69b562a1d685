package scheduling

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"sort"
	"strings"

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
	st.zero = make(resVec, st.space.dim())
	st.buildUniverse()
	st.linkGroups()
	st.orderShapes()
	// Like Karpenter, pods that fail are retried after the others, round
	// after round, until a round places nothing: a pod with affinity to a
	// smaller pod sorts before it and only fits once that pod is placed.
	queue := st.shapes
	for round := 0; len(queue) > 0; round++ {
		var retry []*shape
		progress := 0
		for i, s := range queue {
			if i&63 == 0 && ctx.Err() != nil {
				return nil, fmt.Errorf("solve: %w", ctx.Err())
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
			break
		}
		queue = retry
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

func (st *state) buildShapes() error {
	selectorKeys := collectSelectorKeys(st.in.Pods, st.in.Nodes)
	vols := newVolumeIndex(st.in)
	byKey := map[string]*shape{}
	var w keyWriter
	names := make(map[string]bool, len(st.in.Pods))
	for _, p := range st.in.Pods {
		if p == nil {
			return fmt.Errorf("pending pods: nil pod")
		}
		if names[podKey(p)] {
			return fmt.Errorf("pending pods: %s listed twice", podKey(p))
		}
		names[podKey(p)] = true
		if p.Spec.NodeName != "" {
			// Bound pods are not pending; say so rather than drop them.
			st.failed = append(st.failed, &Unschedulable{Pod: podKey(p), Reason: "already bound to node " + p.Spec.NodeName, PodRef: p})
			continue
		}
		reqList := PodRequests(p)
		req, _ := st.space.vector(reqList, true)
		req[resPods] = 1
		volReqs, volErr := vols.requirements(p)
		volKey := volReqs.canonical()
		if volErr != nil {
			volKey = "!" + volErr.Error()
		}
		w.b = w.b[:0]
		writeShapeKey(&w, p, req, selectorKeys, volKey)
		if s, ok := byKey[string(w.b)]; ok {
			s.pods = append(s.pods, p)
			continue
		}
		s := &shape{id: len(st.shapes), ns: p.Namespace, req: req, pods: []*corev1.Pod{p}}
		s.labels = map[string]string{}
		for k, v := range p.Labels {
			if selectorKeys[k] {
				s.labels[k] = v
			}
		}
		if volErr != nil {
			s.invalid = volErr.Error()
		}
		st.initShape(s, p, volReqs)
		byKey[string(w.b)] = s
		st.shapes = append(st.shapes, s)
	}
	// Vectors built before later pods registered new resources are shorter.
	for _, s := range st.shapes {
		if len(s.req) < st.space.dim() {
			s.req = append(s.req, make(resVec, st.space.dim()-len(s.req))...)
		}
		sort.SliceStable(s.pods, func(i, j int) bool { return podLess(s.pods[i], s.pods[j]) })
		if st.minReq == nil {
			st.minReq = s.req.clone()
		}
		for d, x := range s.req {
			st.minReq[d] = min(st.minReq[d], x)
		}
	}
	if st.minReq == nil {
		st.minReq = make(resVec, st.space.dim())
	}
	return nil
}

// orderShapes sorts shapes first-fit-decreasing (CPU, memory, creation,
// UID) like Karpenter, with one deviation for cost: shapes whose pods each
// need a node of their own (required hostname anti-affinity against their
// own kind) go first. They fix the node count, and every pod placed after
// them can fill the room those nodes leave instead of growing other nodes;
// placed last (smallest first) they would open near-empty nodes nothing
// smaller is left to fill.
func (st *state) orderShapes() {
	for _, s := range st.shapes {
		for _, t := range s.antiAffinity {
			if t.group.key == LabelHostname && t.group.selects(s.ns, s.labels, st.nsLabels) {
				s.opener = true
			}
		}
	}
	sort.SliceStable(st.shapes, func(i, j int) bool {
		a, b := st.shapes[i], st.shapes[j]
		if a.opener != b.opener {
			return a.opener
		}
		if a.req[resCPU] != b.req[resCPU] {
			return a.req[resCPU] > b.req[resCPU]
		}
		if a.req[resMemory] != b.req[resMemory] {
			return a.req[resMemory] > b.req[resMemory]
		}
		return podLess(a.pods[0], b.pods[0])
	})
	for i, s := range st.shapes {
		s.rank = i
	}
}

func isStartupTaint(t corev1.Taint, startup []corev1.Taint) bool {
	for _, st := range startup {
		if st.Key == t.Key && st.Effect == t.Effect {
			return true
		}
	}
	return false
}

func podLess(a, b *corev1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.UID != b.UID {
		return a.UID < b.UID
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// initShape digests the representative pod's constraints.
func (st *state) initShape(s *shape, p *corev1.Pod, volReqs Requirements) {
	base, terms, prefs, err := podNodeRequirements(p)
	if err != nil {
		s.invalid = err.Error()
		return
	}
	s.baseReqs = base.Intersect(volReqs)
	s.requiredTerms = terms
	s.preferredNode = prefs
	s.tolerations = p.Spec.Tolerations
	s.ports = podHostPortsFast(p)
	for i := range p.Spec.TopologySpreadConstraints {
		c := &p.Spec.TopologySpreadConstraints[i]
		g, err := st.groups.spreadGroup(p, c, base, terms)
		if err != nil {
			s.invalid = err.Error()
			return
		}
		s.spreads = append(s.spreads, spreadTerm{group: g, anyway: c.WhenUnsatisfiable == corev1.ScheduleAnyway})
	}
	if a := p.Spec.Affinity; a != nil {
		add := func(kind topoKind, t *corev1.PodAffinityTerm, weight int32, dst *[]affinityTerm) bool {
			g, err := st.groups.affinityGroup(kind, p, t)
			if err != nil {
				s.invalid = err.Error()
				return false
			}
			*dst = append(*dst, affinityTerm{group: g, weight: weight})
			return true
		}
		if a.PodAffinity != nil {
			for i := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if !add(kindAffinity, &a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i], 0, &s.affinity) {
					return
				}
			}
			for i := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				t := &a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i]
				if !add(kindAffinity, &t.PodAffinityTerm, t.Weight, &s.prefAffinity) {
					return
				}
			}
		}
		if a.PodAntiAffinity != nil {
			for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if !add(kindAnti, &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i], 0, &s.antiAffinity) {
					return
				}
			}
			for i := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				t := &a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i]
				if !add(kindAnti, &t.PodAffinityTerm, t.Weight, &s.prefAnti) {
					return
				}
			}
		}
		byWeight := func(ts []affinityTerm) {
			sort.SliceStable(ts, func(i, j int) bool { return ts[i].weight > ts[j].weight })
		}
		byWeight(s.prefAffinity)
		byWeight(s.prefAnti)
	}
	st.activate(s)
}

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

func (st *state) buildPools() error {
	daemons, err := digestDaemonSets(st.in.DaemonSets)
	if err != nil {
		return err
	}
	for _, d := range daemons {
		st.space.vector(d.req, true)
	}
	for _, np := range sortedPools(st.in.NodePools) {
		if np == nil || np.Name == "" {
			return fmt.Errorf("nodepool without a name")
		}
		its, ok := st.in.InstanceTypes[np.Name]
		if !ok {
			its = st.in.DefaultInstanceTypes
		}
		p, err := newPoolState(np, its, st.space, daemons, st.in.Unavailable)
		if err != nil {
			return err
		}
		st.pools = append(st.pools, p)
	}
	st.daemons = daemons
	return nil
}

func (st *state) buildExisting() error {
	nodes := append([]*ExistingNode(nil), st.in.Nodes...)
	sort.SliceStable(nodes, func(i, j int) bool {
		if nodes[i].Initialized != nodes[j].Initialized {
			return nodes[i].Initialized
		}
		return nodes[i].Name < nodes[j].Name
	})
	poolByName := map[string]*poolState{}
	for _, p := range st.pools {
		poolByName[p.np.Name] = p
	}
	seen := map[string]bool{}
	for _, en := range nodes {
		if en == nil || en.Name == "" {
			return fmt.Errorf("existing node without a name")
		}
		if seen[en.Name] {
			return fmt.Errorf("existing node %s listed twice", en.Name)
		}
		seen[en.Name] = true
		n := &node{idx: int32(len(st.nodes)), name: en.Name, labels: en.Labels, src: en}
		if n.labels == nil {
			n.labels = map[string]string{}
		}
		for _, t := range en.Taints {
			if !en.Initialized && (IsEphemeralTaint(t) || isStartupTaint(t, en.StartupTaints)) {
				continue // gone by the time the node is ready
			}
			n.taints = append(n.taints, t)
		}
		if en.Initialized {
			n.taints = append(n.taints, en.StartupTaints...)
		}
		n.alloc, _ = st.space.vector(en.Allocatable, false)
		n.used = make(resVec, st.space.dim())
		present := map[string]bool{}
		for _, p := range en.Pods {
			v, _ := st.space.vector(PodRequests(p), false)
			v[resPods] = 1
			n.used.addScaled(v, 1)
			n.ports = append(n.ports, podHostPorts(p)...)
			for _, o := range p.OwnerReferences {
				if o.Kind == "DaemonSet" {
					present[string(o.UID)] = true
					present[p.Namespace+"/"+o.Name] = true
				}
			}
		}
		if !en.Initialized {
			// Daemons not yet running will claim their share once it starts.
			for _, d := range st.daemons {
				if present[d.uid] && d.uid != "" || present[d.name] {
					continue
				}
				if d.matchesNode(n.labels, append(append([]corev1.Taint(nil), en.Taints...), en.StartupTaints...)) {
					v, _ := st.space.vector(d.req, false)
					v[resPods] = 1
					n.used.addScaled(v, 1)
					n.ports = append(n.ports, d.ports...)
				}
			}
		}
		if p, ok := poolByName[en.Labels[LabelNodePool]]; ok {
			c := en.Capacity
			if c == nil {
				c = en.Allocatable
			}
			p.chargeExisting(c)
		}
		st.nodes = append(st.nodes, n)
		st.addRoomy(n)
	}
	// Existing pods' anti-affinity terms keep matching pending pods away.
	for _, n := range st.nodes {
		for _, p := range n.src.Pods {
			a := p.Spec.Affinity
			if a == nil || a.PodAntiAffinity == nil {
				continue
			}
			for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				g, err := st.groups.affinityGroup(kindAnti, p, &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i])
				if err != nil {
					return fmt.Errorf("pod %s on node %s: %w", podKey(p), n.name, err)
				}
				if d, ok := st.domainsOf(n, g.key, nil); ok {
					g.owners[d[0]]++
				}
			}
		}
	}
	return nil
}

// buildUniverse lists, per topology key, every domain a node could be in:
// values the NodePools and their instance types can produce, and existing
// nodes' labels.
func (st *state) buildUniverse() {
	keys := map[string]bool{}
	for _, g := range st.groups.groups {
		keys[g.key] = true
	}
	for key := range keys {
		if key == LabelHostname {
			continue
		}
		set := map[string]bool{}
		for _, p := range st.pools {
			r, constrained := p.reqs.Get(key)
			zr, _ := p.reqs.Get(LabelZone)
			cr, _ := p.reqs.Get(LabelCapacityType)
			ir, _ := p.reqs.Get(LabelZoneID)
			for _, t := range p.types {
				switch key {
				case LabelZone, LabelCapacityType, LabelZoneID:
					for _, o := range t.offerings {
						// Only offerings this pool could launch make a domain.
						if !o.Available || (zr != nil && !zr.Has(o.Zone)) || (cr != nil && !cr.Has(o.CapacityType)) ||
							(ir != nil && !ir.Matches(o.ZoneID, o.ZoneID != "")) {
							continue
						}
						v := o.Zone
						if key == LabelCapacityType {
							v = o.CapacityType
						} else if key == LabelZoneID {
							v = o.ZoneID
						}
						if v != "" && (!constrained || r.Has(v)) {
							set[v] = true
						}
					}
				default:
					if v, ok := t.it.Labels[key]; ok && (!constrained || r.Has(v)) {
						set[v] = true
					}
				}
			}
			if constrained && r.Finite() {
				for _, v := range r.Values() {
					set[v] = true
				}
			}
		}
		for _, n := range st.nodes {
			if v, ok := n.labels[key]; ok {
				set[v] = true
			}
		}
		vals := make([]string, 0, len(set))
		for v := range set {
			vals = append(vals, v)
		}
		sort.Strings(vals)
		st.universe[key] = vals
		st.topoKeys = append(st.topoKeys, key)
	}
	sort.Strings(st.topoKeys)
}

// linkGroups finds, for each shape, the groups whose selector matches its
// pods, and seeds every group's counts with the existing pods.
func (st *state) linkGroups() {
	for _, s := range st.shapes {
		for _, g := range st.groups.groups {
			if g.selects(s.ns, s.labels, st.nsLabels) {
				s.countedBy = append(s.countedBy, g)
				if g.kind == kindAnti {
					s.inverseAnti = append(s.inverseAnti, g)
				}
			}
		}
	}
	for _, n := range st.nodes {
		for _, p := range n.src.Pods {
			for _, g := range st.groups.groups {
				if !g.selects(p.Namespace, p.Labels, st.nsLabels) || !g.nodeCounts(n) {
					continue
				}
				if d, ok := st.domainsOf(n, g.key, nil); ok {
					g.counts[d[0]]++
				}
			}
		}
	}
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
			placed = st.growPass(s, n)
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
		k, perm := st.try(s, nd, n-placed, false)
		if perm {
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

// explain turns per-pool failures into one sentence a person can act on.
func (st *state) explain(s *shape, reasons []string) string {
	var taintPools []string
	var taint string
	sameTaint := true
	var rest []string
	for i, r := range reasons {
		if i < len(st.pools) {
			p := st.pools[i]
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
