package scheduling

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// MaxInstanceTypeOptions is how many types a claim hands to CreateFleet.
const MaxInstanceTypeOptions = 60

type rankedOption struct {
	idx      int32
	offering int32 // index into the type's offerings
	price    float64
}

// resolve picks what CreateFleet would launch for a claim: capacity type
// by preference (reserved, then spot, then on-demand, among those the
// claim allows and some option offers), then the cheapest offering of
// that capacity type; the options are the fitting types that have such an
// offering, cheapest first. buf is reused across claims. used counts the
// claims already resolved into each capacity reservation; a reservation
// that has taken its ReservationCapacity is not offered again (nil: no
// counting).
func resolve(c *claimState, buf []rankedOption, used map[string]int) (string, []rankedOption) {
	f := launchFilterOf(c.reqs)
	for _, ct := range []string{CapacityTypeReserved, CapacityTypeSpot, CapacityTypeOnDemand} {
		if f.ct != nil && !f.ct.Has(ct) {
			continue
		}
		ranked := buf[:0]
		c.options.each(func(i int) bool {
			t := c.pool.types[i]
			best := -1
			for j := range t.offerings {
				o := &t.offerings[j]
				if o.CapacityType != ct || !f.allows(o) || full(o, used) {
					continue
				}
				if best < 0 || o.Price < t.offerings[best].Price || (o.Price == t.offerings[best].Price && o.Zone < t.offerings[best].Zone) {
					best = j
				}
			}
			if best >= 0 {
				ranked = append(ranked, rankedOption{idx: int32(i), offering: int32(best), price: t.offerings[best].Price})
			}
			return true
		})
		if len(ranked) == 0 {
			continue
		}
		sort.SliceStable(ranked, func(a, b int) bool {
			if ranked[a].price != ranked[b].price {
				return ranked[a].price < ranked[b].price
			}
			return c.pool.types[ranked[a].idx].it.Name < c.pool.types[ranked[b].idx].it.Name
		})
		return ct, ranked
	}
	return "", buf[:0]
}

// full reports whether o's reservation has taken all the claims it can.
func full(o *Offering, used map[string]int) bool {
	return used != nil && o.ReservationCapacity > 0 && used[o.ReservationID] >= o.ReservationCapacity
}

// spotExpectedPools is how many of a spot claim's cheapest options its
// expected price averages over. CreateFleet's price-capacity-optimized
// strategy launches from the pools with the most spare capacity among the
// low-priced ones, not necessarily the cheapest, so the cheapest option's
// price would flatter the plan; the mean over the few cheapest is the
// estimate the plan's cost objective uses (a model: AWS does not publish
// how far up the price list it goes).
const spotExpectedPools = 5

// launchPrice is the price a claim is expected to launch at (see
// ExpectedLaunchPrice).
func launchPrice(ct string, ranked []rankedOption) float64 {
	prices := make([]float64, 0, min(len(ranked), spotExpectedPools))
	for _, r := range ranked[:min(len(ranked), spotExpectedPools)] {
		prices = append(prices, r.price)
	}
	return ExpectedLaunchPrice(ct, prices)
}

// ExpectedLaunchPrice is the price a claim of capacity type ct whose
// options cost prices (cheapest first) is expected to launch at: the
// cheapest for on-demand and reserved (lowest-price allocation), the mean
// of the cheapest spotExpectedPools for spot. +Inf without options.
func ExpectedLaunchPrice(ct string, prices []float64) float64 {
	if len(prices) == 0 {
		return math.Inf(1)
	}
	if ct != CapacityTypeSpot {
		return prices[0]
	}
	n := min(len(prices), spotExpectedPools)
	sum := 0.0
	for _, p := range prices[:n] {
		sum += p
	}
	return sum / float64(n)
}

func (st *state) plan() *Plan {
	out := &Plan{ExistingNodes: []*NodePlacement{}, NodeClaims: []*NodeClaimPlan{}, Unschedulable: []*Unschedulable{}}
	st.reservedUsed = map[string]int{}
	for _, nd := range st.nodes {
		if len(nd.placed) == 0 {
			continue
		}
		if nd.claim == nil {
			np := &NodePlacement{Name: nd.name}
			for _, pr := range nd.placed {
				for _, p := range pr.s.pods[pr.start : pr.start+pr.n] {
					np.Pods = append(np.Pods, podKey(p))
					np.PodRefs = append(np.PodRefs, p)
				}
			}
			out.ExistingNodes = append(out.ExistingNodes, np)
			continue
		}
		cp := st.finalize(nd)
		if cp == nil {
			continue
		}
		nd.price = cp.PricePerHour
		out.NodeClaims = append(out.NodeClaims, cp)
		out.CostPerHour += cp.PricePerHour
		out.ExpectedCostPerHour += cp.ExpectedPricePerHour
	}
	for _, p := range st.pools {
		if p.skipped != "" {
			out.SkippedNodePools = append(out.SkippedNodePools, SkippedNodePool{NodePool: p.np.Name, Reason: p.skipped})
		}
	}
	out.Unschedulable = append(out.Unschedulable, st.failed...)
	sort.SliceStable(out.Unschedulable, func(i, j int) bool { return out.Unschedulable[i].Pod < out.Unschedulable[j].Pod })
	return out
}

// finalize turns claim nd into the NodeClaim to launch: the capacity type
// and options CreateFleet would launch it with (see resolve), its labels,
// requirements, requests and pods, and a name that hashes its pods.
func (st *state) finalize(nd *node) *NodeClaimPlan {
	c := nd.claim
	p := c.pool
	ct, ranked := resolve(c, st.rankBuf, st.reservedUsed)
	st.rankBuf = ranked[:0]
	if len(ranked) == 0 {
		// commitClaim only keeps options with a launchable offering, so this
		// cannot happen; refuse to emit a claim that cannot launch.
		for _, pr := range nd.placed {
			for _, pod := range pr.s.pods[pr.start : pr.start+pr.n] {
				st.failed = append(st.failed, &Unschedulable{Pod: podKey(pod), Reason: "no launchable offering remained for its claim", PodRef: pod})
			}
		}
		return nil
	}
	keep := capOptions(c, ranked)
	t := p.types[keep[0].idx]
	bestOffering := t.offerings[keep[0].offering]
	if ct == CapacityTypeReserved && bestOffering.ReservationID != "" {
		st.reservedUsed[bestOffering.ReservationID]++
	}
	cp := &NodeClaimPlan{
		ClaimSummary: ClaimSummary{
			NodePool:     p.np.Name,
			NodeClass:    p.np.NodeClass,
			InstanceType: t.it.Name,
			CapacityType: ct,
			Zone:         bestOffering.Zone,
			PricePerHour: bestOffering.Price,
			// Options past the fleet cap are never sent, so they cannot launch.
			ExpectedPricePerHour: launchPrice(ct, keep),
		},
		Labels:      claimLabels(c, t, bestOffering, ct),
		Taints:      append([]corev1.Taint{}, p.np.Taints...),
		Allocatable: t.it.Allocatable.DeepCopy(),
	}
	if len(p.np.StartupTaints) > 0 {
		cp.StartupTaints = append([]corev1.Taint(nil), p.np.StartupTaints...)
	}
	names := make([]string, len(keep))
	for i, r := range keep {
		names[i] = p.types[r.idx].it.Name
	}
	cp.InstanceTypeOptions = names
	addClaimRequirements(cp, c.reqs, names, ct)
	cp.MinValuesRelaxed = minValuesRelaxed(p.reqs, c.reqs)
	used := nd.used.clone()
	for j, v := range p.overhead[keep[0].idx] {
		used[j] += v
	}
	cp.Requests = st.space.list(used)
	addClaimPods(cp, nd)
	return cp
}

// capOptions keeps the cheapest MaxInstanceTypeOptions of the ranked
// options, unless that would break the pool's minValues.
func capOptions(c *claimState, ranked []rankedOption) []rankedOption {
	p := c.pool
	if len(ranked) <= MaxInstanceTypeOptions {
		return ranked
	}
	keep := ranked[:MaxInstanceTypeOptions]
	if p.minValues {
		b := newBitset(len(p.types))
		for _, r := range keep {
			b.set(int(r.idx))
		}
		if ok, _ := p.satisfiesMinValues(c.reqs, b); !ok {
			return ranked // minValues wins over the fleet size cap
		}
	}
	return keep
}

// claimLabels are the template's labels, the requirements' single values,
// a picked value for every other custom key (see customlabels.go), the
// type's labels, and the offering's.
func claimLabels(c *claimState, t *typeInfo, o Offering, ct string) map[string]string {
	np := c.pool.np
	labels := map[string]string{}
	for k, v := range np.Labels {
		labels[k] = v
	}
	for i := range c.reqs {
		r := &c.reqs[i]
		if r.Key == LabelHostname {
			continue
		}
		if v, ok := r.Single(); ok {
			labels[r.Key] = v
		}
	}
	customLabels(c.reqs, labels)
	for k, v := range t.it.Labels {
		labels[k] = v
	}
	labels[LabelNodePool] = np.Name
	labels[LabelZone] = o.Zone
	if o.ZoneID != "" {
		labels[LabelZoneID] = o.ZoneID
	}
	labels[LabelCapacityType] = ct
	return labels
}

// addClaimRequirements sets the claim's requirements, pinned to its
// options and capacity type (the placeholder hostname left out), and
// their minValues.
func addClaimRequirements(cp *NodeClaimPlan, claimReqs Requirements, names []string, ct string) {
	reqs := claimReqs.Add(Requirement{Key: LabelInstanceType, values: sortedUnique(names)})
	reqs = reqs.Add(Requirement{Key: LabelCapacityType, values: []string{ct}})
	for i := range reqs {
		if reqs[i].Key == LabelHostname {
			continue
		}
		cp.Requirements = append(cp.Requirements, reqs[i].NodeSelectorRequirement())
		if reqs[i].MinValues > 0 {
			if cp.MinValues == nil {
				cp.MinValues = map[string]int{}
			}
			cp.MinValues[reqs[i].Key] = reqs[i].MinValues
		}
	}
}

// addClaimPods lists the claim's pods and names it after them: the same
// pods in the same pool give the same name, whatever else changed.
func addClaimPods(cp *NodeClaimPlan, nd *node) {
	h := sha256.New()
	h.Write([]byte(cp.NodePool))
	for _, pr := range nd.placed {
		for _, pod := range pr.s.pods[pr.start : pr.start+pr.n] {
			k := podKey(pod)
			cp.Pods = append(cp.Pods, k)
			cp.PodRefs = append(cp.PodRefs, pod)
			h.Write([]byte{0})
			h.Write([]byte(k))
		}
	}
	cp.Name = cp.NodePool + "-" + hex.EncodeToString(h.Sum(nil))[:10]
}

// minValuesRelaxed reports a claim requirement whose minValues is below
// its pool's (Policy.MinValuesBestEffort lowered it).
func minValuesRelaxed(pool, claim Requirements) bool {
	for i := range pool {
		if pool[i].MinValues <= 0 {
			continue
		}
		for j := range claim {
			if claim[j].Key == pool[i].Key && claim[j].MinValues < pool[i].MinValues {
				return true
			}
		}
	}
	return false
}
