package scheduling

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

func (st *state) buildShapes() error {
	selectorKeys := collectSelectorKeys(st.in.Pods, st.in.Nodes)
	st.volIdx = newVolumeIndex(st.in)
	vols := st.volIdx
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
		if p.Spec.NodeName != "" && !st.boundAsPending {
			// Bound pods are not pending; say so rather than drop them.
			st.failed = append(st.failed, &Unschedulable{Pod: podKey(p), Reason: "already bound to node " + p.Spec.NodeName, PodRef: p})
			continue
		}
		reqList := st.in.Requests.Of(p)
		req := st.space.vector(reqList, true)
		req[resPods] = 1
		volReqs, volErr := vols.requirements(p)
		volKey := volReqs.key()
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
		s.attach = st.shapeAttachments(s)
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
func (st *state) initShape(s *shape, p *corev1.Pod, volReqs volumeAlternatives) {
	base, terms, prefs, err := podNodeRequirements(p)
	if err != nil {
		s.invalid = err.Error()
		return
	}
	ignore := st.in.Policy.IgnorePreferences
	s.baseReqs, s.requiredTerms = withVolumes(base, terms, volReqs)
	if !ignore {
		s.preferredNode = prefs
	}
	s.tolerations = p.Spec.Tolerations
	s.ports = podHostPortsFast(p)
	for i := range p.Spec.TopologySpreadConstraints {
		c := &p.Spec.TopologySpreadConstraints[i]
		// Karpenter's PreferencePolicy Ignore keeps only DoNotSchedule
		// spreads (v1.14.1 scheduling/topology.go newForTopologies).
		if ignore && c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		g, err := st.groups.spreadGroup(p, c, base, terms)
		if err != nil {
			s.invalid = err.Error()
			return
		}
		s.spreads = append(s.spreads, spreadTerm{group: g, anyway: c.WhenUnsatisfiable == corev1.ScheduleAnyway})
	}
	if a := p.Spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil && !st.affinityTerms(s, p, kindAffinity,
			pa.RequiredDuringSchedulingIgnoredDuringExecution, st.preferred(pa.PreferredDuringSchedulingIgnoredDuringExecution), &s.affinity, &s.prefAffinity) {
			return
		}
		if pa := a.PodAntiAffinity; pa != nil && !st.affinityTerms(s, p, kindAnti,
			pa.RequiredDuringSchedulingIgnoredDuringExecution, st.preferred(pa.PreferredDuringSchedulingIgnoredDuringExecution), &s.antiAffinity, &s.prefAnti) {
			return
		}
		byWeight := func(ts []affinityTerm) {
			sort.SliceStable(ts, func(i, j int) bool { return ts[i].weight > ts[j].weight })
		}
		byWeight(s.prefAffinity)
		byWeight(s.prefAnti)
	}
	st.activate(s)
}

// preferred is a pod's preferred (anti-)affinity terms, none under
// PreferencePolicy Ignore (Karpenter v1.14.1 counts only required
// anti-affinity then: scheduling/topology.go Update).
func (st *state) preferred(terms []corev1.WeightedPodAffinityTerm) []corev1.WeightedPodAffinityTerm {
	if st.in.Policy.IgnorePreferences {
		return nil
	}
	return terms
}

// affinityTerms adds a pod's required and preferred terms of one kind
// (pod affinity or anti-affinity) to the shape as groups. An invalid term
// makes the shape invalid, with the reason, and returns false.
func (st *state) affinityTerms(s *shape, p *corev1.Pod, kind topoKind, required []corev1.PodAffinityTerm,
	preferred []corev1.WeightedPodAffinityTerm, req, pref *[]affinityTerm) bool {
	add := func(t *corev1.PodAffinityTerm, weight int32, dst *[]affinityTerm) bool {
		g, err := st.groups.affinityGroup(kind, p, t)
		if err != nil {
			s.invalid = err.Error()
			return false
		}
		*dst = append(*dst, affinityTerm{group: g, weight: weight})
		return true
	}
	for i := range required {
		if !add(&required[i], 0, req) {
			return false
		}
	}
	for i := range preferred {
		if !add(&preferred[i].PodAffinityTerm, preferred[i].Weight, pref) {
			return false
		}
	}
	return true
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
		p := newPoolState(np, its, st.space, daemons, st.in.Unavailable)
		p.relaxMinValues = st.in.Policy.MinValuesBestEffort
		st.pools = append(st.pools, p)
	}
	st.daemons = daemons
	return nil
}

// buildExisting digests the existing and in-flight nodes (initialized
// first, then by name), charges them to their NodePool's limits, and seeds
// the anti-affinity of the pods already on them.
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
	seen := make(map[string]bool, len(nodes))
	for _, en := range nodes {
		if en == nil || en.Name == "" {
			return fmt.Errorf("existing node without a name")
		}
		if seen[en.Name] {
			return fmt.Errorf("existing node %s listed twice", en.Name)
		}
		seen[en.Name] = true
		n := st.existingNode(en)
		if p, ok := poolByName[n.pool]; ok {
			c := en.Capacity
			if c == nil {
				c = en.Allocatable
			}
			p.chargeExisting(c)
		}
		st.nodes = append(st.nodes, n)
		st.addRoomy(n)
	}
	return st.seedExistingAntiAffinity()
}

// existingNode is en as the solver sees it once pending pods could arrive:
// the taints that block scheduling then, and the room its pods take (on a
// node still starting, also the DaemonSet pods still to come).
func (st *state) existingNode(en *ExistingNode) *node {
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
	d := en.digest(st.in.Requests)
	n.alloc = st.space.values(d.alloc)
	n.used = st.space.values(d.used)
	n.used[resPods] = d.count
	n.ports = append(n.ports, d.ports...)
	if !en.Initialized {
		// Daemons not yet running will claim their share once it starts.
		for _, ds := range st.daemons {
			if d.daemons[ds.uid] && ds.uid != "" || d.daemons[ds.name] {
				continue
			}
			if ds.matchesNode(n.labels, append(append([]corev1.Taint(nil), en.Taints...), en.StartupTaints...)) {
				st.addExistingPod(n, ds.req, ds.ports)
			}
		}
	}
	n.anti, n.pool = d.anti, d.pool
	return n
}

// addExistingPod counts one pod's requests and host ports on node n.
func (st *state) addExistingPod(n *node, req corev1.ResourceList, ports []hostPort) {
	v := st.space.vector(req, false)
	v[resPods] = 1
	n.used.addScaled(v, 1)
	n.ports = append(n.ports, ports...)
}

// seedExistingAntiAffinity makes existing pods' required anti-affinity
// terms keep matching pending pods away.
func (st *state) seedExistingAntiAffinity() error {
	for _, n := range st.nodes {
		for _, p := range n.anti {
			a := p.Spec.Affinity
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
			p.addDomains(key, set)
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

// addDomains adds to set the values of key a node of pool p could carry:
// from the offerings it could launch (zone, capacity type, zone ID) or its
// types' labels, and the values its requirements list.
func (p *poolState) addDomains(key string, set map[string]bool) {
	r, constrained := p.reqs.Get(key)
	f := launchFilterOf(p.reqs)
	for _, t := range p.types {
		switch {
		case isOfferingKey(key):
			for j := range t.offerings {
				o := &t.offerings[j]
				// Only offerings this pool could launch make a domain.
				if !f.allows(o) {
					continue
				}
				if v, ok := offeringLabel(o, key); ok && v != "" && (!constrained || r.Has(v)) {
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
