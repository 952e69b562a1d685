package disruption

import (
	"fmt"
	"maps"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
)

// screen rules out, without a simulation, a consolidation that cannot
// produce a command. A simulation solves every pod against every node
// (milliseconds at 2,000 nodes), and on a cluster with nothing to
// consolidate the single-node search runs one for every candidate; the
// screen's test costs a pass over the nodes' room. One screen serves a
// pass (Decision.screenFor): the cluster does not change within it.
//
// Its test is a necessary condition, so it never rules out a command a
// simulation would give: the candidates' pods must fit on the other nodes
// (their total requests within the summed room of the nodes that could
// take even the smallest of them, in CPU, memory and pods), or else some
// of them go to new nodes, which cost at least the cheapest node one of
// those pods could ever be given, and at least the requests the other
// nodes cannot take at the lowest price per unit any of the pods could
// be given (scheduling.NewNodePrices); and new nodes must cost less than
// the candidates (consolidate: a replacement is strictly cheaper). Pending
// pods and pods of deleting nodes, which a simulation also places, only
// take room away.
type screen struct {
	cluster *state.Cluster
	// batch are the candidates the current search may try: a pod without
	// a price is priced with every unpriced pod of theirs, in one go.
	batch  []*Candidate
	room   []nodeRoom
	demand map[string]*podsDemand              // by node
	prices map[string]*scheduling.NewNodeFloor // by pod key
}

// dims are the resources the screen weighs: CPU (millicores), memory
// (bytes), pods (as NewNodeFloor.PerUnit).
var dims = scheduling.FloorResources

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

func newScreen(c *state.Cluster, batch []*Candidate) *screen {
	s := &screen{cluster: c, batch: batch, demand: map[string]*podsDemand{}, prices: map[string]*scheduling.NewNodeFloor{}}
	for _, n := range c.Nodes {
		d := n.Existing().Digest
		if d == nil {
			d = scheduling.DigestNode(n.Existing(), nil)
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
	if d, ok := s.demand[c.Name()]; ok {
		return d
	}
	d := &podsDemand{}
	for i := range d.least {
		d.least[i] = math.MaxInt64
	}
	for _, p := range c.Pods {
		req := s.cluster.PodRequests(p)
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
	s.demand[c.Name()] = d
	return d
}

// hopeless says why consolidating cands cannot produce a command, or ""
// when a simulation must decide (always, for a nil screen).
func (s *screen) hopeless(cands []*Candidate) (string, error) {
	if s == nil {
		return "", nil
	}
	floor, err := s.floor(cands)
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
	return fmt.Sprintf("Can't replace with a cheaper node (its pods do not fit on the other nodes, and new nodes for them cost at least $%.3f/h, current $%.3f/h)", floor, price), nil
}

// floor is what the new nodes holding cands' pods in a simulation of
// their removal cost at least: 0 when the pods may all fit on the other
// nodes; else the cheapest new node any of them could have, or the part
// of their requests the other nodes cannot take at the lowest price per
// unit any of them could have, whichever is more; +Inf when none of
// them could have a new node (some pod would not schedule).
func (s *screen) floor(cands []*Candidate) (float64, error) {
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
		return 0, nil
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
		return 0, nil
	}
	f, err := s.newNodeFloor(cands)
	if err != nil {
		return 0, err
	}
	floor := f.Price
	for i := range total {
		if excess := total[i] - avail[i]; excess > 0 {
			floor = max(floor, float64(excess)*f.PerUnit[i])
		}
	}
	return floor, nil
}

// newNodeFloor is the lowest of cands' pods' floors (scheduling.
// NewNodePrices), each field on its own.
func (s *screen) newNodeFloor(cands []*Candidate) (*scheduling.NewNodeFloor, error) {
	if err := s.price(cands); err != nil {
		return nil, err
	}
	inf := math.Inf(1)
	out := &scheduling.NewNodeFloor{Price: inf, PerUnit: [3]float64{inf, inf, inf}}
	for _, c := range cands {
		for _, p := range c.Pods {
			f := s.prices[podKey(p)]
			out.Price = min(out.Price, f.Price)
			for i, x := range f.PerUnit {
				out.PerUnit[i] = min(out.PerUnit[i], x)
			}
		}
	}
	return out, nil
}

// price prices cands' pods that have no price yet, with the batch's.
func (s *screen) price(cands []*Candidate) error {
	if s.priced(cands) {
		return nil
	}
	var pods []*corev1.Pod
	seen := map[string]bool{}
	for _, list := range [][]*Candidate{cands, s.batch} {
		for _, c := range list {
			for _, p := range c.Pods {
				if k := podKey(p); s.prices[k] == nil && !seen[k] {
					seen[k] = true
					pods = append(pods, p) // priced as if pending: no copies
				}
			}
		}
	}
	if len(pods) == 0 {
		return nil
	}
	in, err := s.cluster.Input(state.InputOptions{Pods: pods})
	if err != nil {
		return fmt.Errorf("disruption: screen: %w", err)
	}
	prices, err := scheduling.NewNodePrices(in)
	if err != nil {
		return fmt.Errorf("disruption: screen: %w", err)
	}
	maps.Copy(s.prices, prices)
	return nil
}

func (s *screen) priced(cands []*Candidate) bool {
	for _, c := range cands {
		for _, p := range c.Pods {
			if s.prices[podKey(p)] == nil {
				return false
			}
		}
	}
	return true
}

// screenFor is the pass's screen, its batch the candidates a search may
// try.
func (d *Decision) screenFor(c *state.Cluster, batch []*Candidate) *screen {
	if d.screen == nil {
		d.screen = newScreen(c, nil)
	}
	d.screen.batch = batch
	return d.screen
}
