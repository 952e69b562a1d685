package disruption

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
)

// screen rules out, without a simulation, a consolidation that cannot
// produce a command. A simulation solves every pod against every node
// (milliseconds at 2,000 nodes), and on a cluster with nothing to
// consolidate the single-node search runs one for every candidate; the
// screen's test costs a pass over the nodes' room.
//
// Its test is a necessary condition, so it never rules out a command a
// simulation would give: the candidates' pods must fit on the other nodes
// (their total requests within the summed room of the nodes that could
// take even the smallest of them, in CPU, memory and pods), or else some
// pod goes to a new node, which costs at least the cheapest node that pod
// could ever be given (scheduling.NewNodePrices) and must cost less than
// the candidates (consolidate: a replacement is strictly cheaper).
// Pending pods and pods of deleting nodes, which a simulation also places,
// only take room away.
type screen struct {
	cluster *state.Cluster
	// cands are the candidates the search may try: their pods are priced
	// together the first time a price is needed.
	cands  []*Candidate
	room   []nodeRoom
	demand map[*Candidate]*podsDemand
	prices map[string]float64 // by pod key; nil until needed
}

// dims are the resources the screen weighs: CPU (millicores), memory
// (bytes), pods.
var dims = [...]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods}

type amounts [len(dims)]int64

type nodeRoom struct {
	name string
	free amounts
}

// podsDemand is a candidate's pods' summed requests and the smallest
// request of each resource among them.
type podsDemand struct {
	total, least amounts
}

func newScreen(c *state.Cluster, cands []*Candidate) *screen {
	s := &screen{cluster: c, cands: cands, demand: map[*Candidate]*podsDemand{}}
	for _, n := range c.Nodes {
		d := n.Existing().Digest
		if d == nil {
			d = scheduling.DigestNode(n.Existing())
		}
		r := nodeRoom{name: n.Name}
		for i, name := range dims {
			r.free[i] = d.Room(name)
		}
		s.room = append(s.room, r)
	}
	return s
}

// fits reports whether every request of need (those that are not zero, as
// the solver counts them) fits into free.
func (a amounts) fits(free amounts) bool {
	for i, x := range a {
		if x != 0 && x > free[i] {
			return false
		}
	}
	return true
}

func (s *screen) demandOf(c *Candidate) *podsDemand {
	if d, ok := s.demand[c]; ok {
		return d
	}
	d := &podsDemand{}
	for i := range d.least {
		d.least[i] = math.MaxInt64
	}
	for _, p := range c.Pods {
		req := scheduling.PodRequests(p)
		var a amounts
		for i, name := range dims[:len(dims)-1] {
			q := req[name]
			if name == corev1.ResourceCPU {
				a[i] = q.MilliValue()
			} else {
				a[i] = q.Value()
			}
		}
		a[len(dims)-1] = 1
		for i, x := range a {
			d.total[i] += x
			d.least[i] = min(d.least[i], x)
		}
	}
	s.demand[c] = d
	return d
}

// hopeless says why consolidating cands cannot produce a command, or ""
// when a simulation must decide (always, for a nil screen).
func (s *screen) hopeless(cands []*Candidate) (string, error) {
	if s == nil {
		return "", nil
	}
	var total, least amounts
	for i := range least {
		least[i] = math.MaxInt64
	}
	gone := make(map[string]bool, len(cands))
	pods := 0
	for _, c := range cands {
		gone[c.Name()] = true
		pods += len(c.Pods)
		d := s.demandOf(c)
		for i := range total {
			total[i] += d.total[i]
			least[i] = min(least[i], d.least[i])
		}
	}
	if pods == 0 {
		return "", nil
	}
	var avail amounts
	for _, r := range s.room {
		if gone[r.name] || !least.fits(r.free) {
			continue
		}
		for i, x := range r.free {
			avail[i] += max(x, 0)
		}
	}
	if total.fits(avail) {
		return "", nil
	}
	floor, err := s.cheapestNewNode(cands)
	if err != nil {
		return "", err
	}
	price := 0.0
	for _, c := range cands {
		price += c.Price
	}
	if floor < price-1e-9 {
		return "", nil
	}
	if math.IsInf(floor, 1) {
		return "Can't remove without creating 2 or more nodes: its pods do not fit on the other nodes, and no new node could hold them", nil
	}
	return fmt.Sprintf("Can't replace with a cheaper node (its pods do not fit on the other nodes, and a new node for any of them costs at least $%.3f/h, current $%.3f/h)", floor, price), nil
}

// cheapestNewNode is the lowest price of a new node holding any one of
// cands' pods.
func (s *screen) cheapestNewNode(cands []*Candidate) (float64, error) {
	if s.prices == nil {
		var pods []*corev1.Pod
		for _, c := range s.cands {
			for _, p := range c.Pods {
				pods = append(pods, p) // priced as if pending: no copies
			}
		}
		in, err := s.cluster.Input(state.InputOptions{Pods: pods})
		if err != nil {
			return 0, fmt.Errorf("disruption: screen: %w", err)
		}
		if s.prices, err = scheduling.NewNodePrices(in); err != nil {
			return 0, fmt.Errorf("disruption: screen: %w", err)
		}
	}
	floor := math.Inf(1)
	for _, c := range cands {
		for _, p := range c.Pods {
			price, ok := s.prices[podKey(p)]
			if !ok {
				return 0, nil // not among the pods priced: no floor known
			}
			floor = min(floor, price)
		}
	}
	return floor, nil
}
