package scheduling

import (
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// typeInfo is an instance type prepared for one NodePool.
type typeInfo struct {
	it        *InstanceType
	offerings []Offering // Available already false for ICE'd offerings
	rankPrice float64    // cheapest launchable offering the pool allows
}

// poolState is a NodePool prepared for one solve.
type poolState struct {
	np       *NodePool
	reqs     Requirements // template requirements + labels + nodepool name
	taints   []corev1.Taint
	types    []*typeInfo // cheapest first
	avail    []resVec    // allocatable minus compatible DaemonSet overhead
	overhead []resVec
	all      bitset
	// typePorts are, per type, the host ports of the DaemonSets that run on
	// it (Karpenter groups a template's types by their daemons:
	// buildDaemonOverheadGroups), so a daemon that runs only on other types
	// does not block a pod's port.
	typePorts [][]hostPort
	maskCache map[string]bitset

	// Limits left after existing nodes and planned claims. A remainder may
	// go negative (existing nodes can exceed a limit lowered after they
	// launched); negative and zero both mean "no more of this resource".
	limitNames   []corev1.ResourceName
	limitRemain  []int64
	limitUse     [][]int64 // per type, capacity in limitNames order
	nodesLimited bool      // false: limits.nodes unset, nodesRemain unused
	nodesRemain  int64
	minValues    bool
	// skipped says why no claim may come from the pool ("" when one may).
	skipped string
	// relaxMinValues is Policy.MinValuesBestEffort.
	relaxMinValues bool
}

// isTypeKey reports whether an instance type decides the label key.
func isTypeKey(it *InstanceType, key string) bool {
	if _, ok := it.Labels[key]; ok {
		return true
	}
	switch key {
	case LabelInstanceType, LabelArch, LabelOS:
		return true
	}
	return strings.HasPrefix(key, awsInstanceLabelPfx)
}

// isTypeLevelKey reports whether a key's value is decided by the instance
// type alone (not by zone, capacity type or NodePool).
func isTypeLevelKey(key string) bool {
	switch key {
	case LabelInstanceType, LabelArch, LabelOS:
		return true
	}
	return strings.HasPrefix(key, awsInstanceLabelPfx)
}

// typeCompatible reports whether some launchable offering of t meets reqs:
// type-level keys are checked against the type's labels, the offering keys
// (zone, zone ID, capacity type, reservation) against its available
// offerings, and everything else is left to the NodePool.
func typeCompatible(t *typeInfo, reqs Requirements) bool {
	for i := range reqs {
		r := &reqs[i]
		if isOfferingKey(r.Key) || !isTypeKey(t.it, r.Key) {
			continue
		}
		v, ok := t.it.Labels[r.Key]
		if !r.Matches(v, ok) {
			return false
		}
	}
	f := launchFilterOf(reqs)
	for i := range t.offerings {
		if f.allows(&t.offerings[i]) {
			return true
		}
	}
	return false
}

// cheapestOffering returns the cheapest available offering of t meeting reqs.
func cheapestOffering(t *typeInfo, reqs Requirements, capacityType string) (Offering, bool) {
	f := launchFilterOf(reqs)
	var best Offering
	found := false
	for _, o := range t.offerings {
		if (capacityType != "" && o.CapacityType != capacityType) || !f.allows(&o) {
			continue
		}
		if !found || o.Price < best.Price || (o.Price == best.Price && o.Zone < best.Zone) {
			best, found = o, true
		}
	}
	return best, found
}

func sortedPools(pools []*NodePool) []*NodePool {
	out := append([]*NodePool(nil), pools...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Weight != out[j].Weight {
			return out[i].Weight > out[j].Weight
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// daemon is a DaemonSet's pod template digested for overhead computation.
type daemon struct {
	name  string
	uid   string
	req   corev1.ResourceList
	reqs  []Requirements // OR terms (nodeSelector folded in); one empty term when unconstrained
	tols  []corev1.Toleration
	ports []hostPort
}

func digestDaemonSets(dss []*appsv1.DaemonSet) ([]*daemon, error) {
	var out []*daemon
	for _, ds := range dss {
		p := &corev1.Pod{Spec: ds.Spec.Template.Spec}
		base, terms, _, err := podNodeRequirements(p)
		if err != nil {
			return nil, fmt.Errorf("daemonset %s/%s: %w", ds.Namespace, ds.Name, err)
		}
		d := &daemon{name: ds.Namespace + "/" + ds.Name, uid: string(ds.UID), req: PodRequests(p), tols: p.Spec.Tolerations, ports: podHostPorts(p)}
		if len(terms) == 0 {
			d.reqs = []Requirements{base}
		}
		for _, t := range terms {
			d.reqs = append(d.reqs, base.Intersect(t))
		}
		out = append(out, d)
	}
	return out, nil
}

// compatibleWith reports whether the daemon would run on a node of type t
// from this pool: it tolerates the pool's taints and one of its node
// affinity terms fits the pool's requirements and the type.
func (d *daemon) compatibleWith(reqs Requirements, taints []corev1.Taint, t *typeInfo) bool {
	if untoleratedTaint(d.tols, taints, false) != nil {
		return false
	}
	for _, term := range d.reqs {
		if reqs.Compatible(term) != nil {
			continue
		}
		if t == nil || typeCompatible(t, reqs.Intersect(term)) {
			return true
		}
	}
	return false
}

func (d *daemon) matchesNode(labels map[string]string, taints []corev1.Taint) bool {
	if untoleratedTaint(d.tols, taints, false) != nil {
		return false
	}
	for _, term := range d.reqs {
		if term.MatchesLabels(labels) {
			return true
		}
	}
	return false
}

// newPoolState prepares NodePool np for a solve: its requirements (with its
// labels, name and node class), the types it may launch, the room
// DaemonSets leave on each, and its limits. A pool whose requirements
// admit no value gets no types and says why it is skipped.
func newPoolState(np *NodePool, its []*InstanceType, space *resourceSpace, daemons []*daemon, unavailable map[OfferingKey]bool) *poolState {
	p := &poolState{np: np, taints: np.Taints, maskCache: map[string]bitset{}}
	reqs := np.Requirements
	for k, v := range np.Labels {
		reqs = reqs.Add(Requirement{Key: NormalizedKey(k), values: []string{v}})
	}
	reqs = reqs.Add(Requirement{Key: LabelNodePool, values: []string{np.Name}})
	if np.NodeClass != "" {
		reqs = reqs.Add(Requirement{Key: LabelNodeClass, values: []string{np.NodeClass}})
	}
	p.reqs = reqs
	if ok, key := reqs.Satisfiable(); !ok {
		// Karpenter's NewScheduler skips such a NodePool ("skipping,
		// nodepool requirements filtered out all instance types",
		// pkg/controllers/provisioning/scheduling/scheduler.go) and
		// provisions from the others; its nodes still count.
		p.skipped = fmt.Sprintf("its requirements on %q admit no value", key)
		its = nil
	}
	for i := range reqs {
		if reqs[i].MinValues > 0 {
			p.minValues = true
		}
	}
	p.addTypes(its, unavailable)
	p.addOverhead(space, daemons)
	p.addLimits()
	return p
}

// addTypes keeps the instance types the pool's requirements allow, with
// the unavailable offerings marked, cheapest launchable offering first
// (then by name).
func (p *poolState) addTypes(its []*InstanceType, unavailable map[OfferingKey]bool) {
	for _, it := range its {
		t := &typeInfo{it: it, offerings: append([]Offering(nil), it.Offerings...)}
		for i := range t.offerings {
			o := &t.offerings[i]
			k := OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}
			if unavailable[k] {
				o.Available = false
			} else if o.ReservationID != "" {
				k.ReservationID = o.ReservationID
				o.Available = o.Available && !unavailable[k]
			}
		}
		if !typeCompatible(t, p.reqs) {
			continue
		}
		o, _ := cheapestOffering(t, p.reqs, "")
		t.rankPrice = o.Price
		p.types = append(p.types, t)
	}
	sort.SliceStable(p.types, func(i, j int) bool {
		if p.types[i].rankPrice != p.types[j].rankPrice {
			return p.types[i].rankPrice < p.types[j].rankPrice
		}
		return p.types[i].it.Name < p.types[j].it.Name
	})
}

// addOverhead works out, per type, the DaemonSet pods a node of the pool
// will run (those that tolerate its taints and match its labels) and the
// room they leave, and the host ports they hold. Startup taints are left
// out, as Karpenter v1.14.1 does (scheduler.go isDaemonPodCompatible
// checks the template's taints only): they go away once the node's agent
// is ready, and a daemon that waits for that still takes its room.
func (p *poolState) addOverhead(space *resourceSpace, daemons []*daemon) {
	np := p.np
	p.all = newBitset(len(p.types))
	taints := np.Taints
	for i, t := range p.types {
		alloc := space.vector(t.it.Allocatable, false)
		over := make(resVec, space.dim())
		var ports []hostPort
		for _, d := range daemons {
			if d.compatibleWith(p.reqs, taints, t) {
				v := space.vector(d.req, false)
				over.addScaled(v, 1)
				over[resPods]++
				ports = append(ports, d.ports...)
			}
		}
		p.typePorts = append(p.typePorts, ports)
		av := alloc.clone()
		for j := range av {
			av[j] -= over[j]
		}
		p.avail = append(p.avail, av)
		p.overhead = append(p.overhead, over)
		p.all.set(i)
	}
}

// addLimits reads the NodePool's limits (by resource name, nodes apart)
// and each type's capacity in those resources.
func (p *poolState) addLimits() {
	np := p.np
	names := make([]string, 0, len(np.Limits))
	for n := range np.Limits {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		rn := corev1.ResourceName(n)
		q := np.Limits[rn]
		if rn == "nodes" {
			p.nodesLimited, p.nodesRemain = true, q.Value()
			continue
		}
		p.limitNames = append(p.limitNames, rn)
		p.limitRemain = append(p.limitRemain, quantityValue(rn, q))
	}
	for _, t := range p.types {
		use := make([]int64, len(p.limitNames))
		capList := t.it.Capacity
		if capList == nil {
			capList = t.it.Allocatable
		}
		for i, rn := range p.limitNames {
			if q, ok := capList[rn]; ok {
				use[i] = quantityValue(rn, q)
			}
		}
		p.limitUse = append(p.limitUse, use)
	}
}

// chargeExisting subtracts an existing node's capacity from the limits.
// Remainders are allowed to go below zero: more existing nodes than the
// limit (or a limit lowered under current usage) must still read as "no
// more", never wrap around to anything that looks unlimited.
func (p *poolState) chargeExisting(capacity corev1.ResourceList) {
	for i, rn := range p.limitNames {
		if q, ok := capacity[rn]; ok {
			p.limitRemain[i] -= quantityValue(rn, q)
		}
	}
	if p.nodesLimited {
		p.nodesRemain--
	}
}

// nodesExhausted reports whether limits.nodes allows no further claim.
func (p *poolState) nodesExhausted() bool {
	return p.nodesLimited && p.nodesRemain <= 0
}

// withinLimits reports whether type i could still launch. A type using
// none of an exactly spent resource still fits (as in Karpenter, a GPU
// limit used up does not stop CPU-only nodes); a limit already exceeded
// (negative remainder) stops every type, since no use is below zero.
func (p *poolState) withinLimits(i int) bool {
	if p.nodesExhausted() {
		return false
	}
	for j := range p.limitNames {
		if p.limitUse[i][j] > p.limitRemain[j] {
			return false
		}
	}
	return true
}

// charge reserves the largest capacity among a new claim's options, as
// Karpenter does: the launch may resolve to any of them. It returns what
// was reserved, the ceiling for any later change of the claim's options.
func (p *poolState) charge(options bitset) []int64 {
	if p.nodesLimited {
		p.nodesRemain--
	}
	if len(p.limitNames) == 0 {
		return nil
	}
	maxUse := make([]int64, len(p.limitNames))
	options.each(func(i int) bool {
		for j := range maxUse {
			maxUse[j] = max(maxUse[j], p.limitUse[i][j])
		}
		return true
	})
	for j := range maxUse {
		p.limitRemain[j] -= maxUse[j]
	}
	return maxUse
}

// withinCharge reports whether type i stays inside what a claim reserved.
func (p *poolState) withinCharge(i int, charged []int64) bool {
	for j := range charged {
		if p.limitUse[i][j] > charged[j] {
			return false
		}
	}
	return true
}

// mask returns the types of this pool compatible with the pool and reqs.
func (p *poolState) mask(reqs Requirements) bitset {
	if len(reqs) == 0 {
		return p.all
	}
	key := reqs.canonical()
	if m, ok := p.maskCache[key]; ok {
		return m
	}
	merged := p.reqs.Intersect(reqs)
	m := newBitset(len(p.types))
	for i, t := range p.types {
		if typeCompatible(t, merged) {
			m.set(i)
		}
	}
	p.maskCache[key] = m
	return m
}

// canonical is a stable string for caching by requirement set.
func (rs Requirements) canonical() string {
	var w keyWriter
	for i := range rs {
		r := &rs[i]
		w.str(r.Key)
		if r.complement {
			w.tag('c')
		}
		if r.absentOK {
			w.tag('a')
		}
		if r.hasGt {
			w.tag('>')
			w.int(r.gt)
		}
		if r.hasLt {
			w.tag('<')
			w.int(r.lt)
		}
		w.int(int64(r.MinValues))
		w.int(int64(len(r.values)))
		for _, v := range r.values {
			w.str(v)
		}
	}
	return string(w.b)
}

// satisfiesMinValues checks every minValues requirement against options.
func (p *poolState) satisfiesMinValues(reqs Requirements, options bitset) (bool, string) {
	for i := range reqs {
		r := &reqs[i]
		if r.MinValues <= 0 {
			continue
		}
		if n := p.distinctValues(r, options, r.MinValues); n < r.MinValues {
			return false, fmt.Sprintf("%s needs at least %d distinct values among instance types, only %d remain", shortKey(r.Key), r.MinValues, n)
		}
	}
	return true, ""
}

// keepMinValues returns reqs when options meet their minValues. When they
// do not, under MinValuesPolicy BestEffort it returns reqs with each unmet
// minValues lowered to the values the options still offer (Karpenter
// v1.14.1 filterInstanceTypesByRequirements with relaxMinValues, which
// also lowers the claim's requirement); under Strict it says why not.
func (p *poolState) keepMinValues(reqs Requirements, options bitset) (Requirements, bool, string) {
	ok, why := p.satisfiesMinValues(reqs, options)
	if ok || !p.relaxMinValues {
		return reqs, ok, why
	}
	out := make(Requirements, len(reqs))
	copy(out, reqs)
	for i := range out {
		if r := &out[i]; r.MinValues > 0 {
			r.MinValues = max(1, min(r.MinValues, p.distinctValues(r, options, r.MinValues)))
		}
	}
	return out, true, ""
}

// distinctValues counts the values of r the options offer, stopping at
// limit.
func (p *poolState) distinctValues(r *Requirement, options bitset, limit int) int {
	seen := map[string]bool{}
	options.each(func(ti int) bool {
		t := p.types[ti]
		switch {
		case isOfferingKey(r.Key):
			for j := range t.offerings {
				o := &t.offerings[j]
				if v, ok := offeringLabel(o, r.Key); ok && o.Available && r.Has(v) {
					seen[v] = true
				}
			}
		default:
			if v, ok := t.it.Labels[r.Key]; ok && r.Has(v) {
				seen[v] = true
			}
		}
		return len(seen) < limit
	})
	return len(seen)
}

// portFree is the pool's types whose DaemonSets leave ports free.
func (p *poolState) portFree(ports []hostPort) bitset {
	out := newBitset(len(p.types))
	for i := range p.types {
		if !portsConflict(p.typePorts[i], ports) {
			out.set(i)
		}
	}
	return out
}

// daemonPorts are the host ports the DaemonSets of any of the types in opts
// take: a new claim's ports until its type is known (a superset of what
// its final type runs, so nothing placed on it later conflicts).
func (p *poolState) daemonPorts(opts bitset) []hostPort {
	var out []hostPort
	opts.each(func(i int) bool {
		out = append(out, p.typePorts[i]...)
		return true
	})
	return out
}
