package state

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/pods"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// StaticScale is what a static NodePool needs to reach spec.replicas, as
// one pass sees it (Karpenter's static provisioning and deprovisioning).
type StaticScale struct {
	Replicas int64
	// Active are the pool's claims that count toward replicas: live, not
	// marked for deletion, not disrupting. A disrupting or deleting claim
	// (drift, expiry, interruption, scale-down) does not count, so its
	// replacement is launched while it drains.
	Active []*Node
	// Held is every claim of the pool in the view, marked ones included:
	// what limits.nodes is charged with.
	Held int
	// Launch is how many claims to add: the shortfall, cut to limits.nodes.
	Launch int
	// Limited reports that limits.nodes cut Launch below the shortfall.
	Limited bool
	// Remove are the claims to mark for deletion, exactly the surplus of
	// Active over replicas, least disruptive first.
	Remove []*Node
}

// StaticScale decides how a static NodePool reaches its replicas: how many
// claims to launch and which to remove. Only nodes nodewright launched for
// np (a claim labelled with the pool) are counted or chosen; unmanaged
// nodes and other pools' nodes are never touched. Removal picks, as
// Karpenter does, claims not launched yet, then empty nodes (in flight
// first), then the lowest disruption cost, do-not-disrupt nodes last.
func (c *Cluster) StaticScale(np *apis.NodePool, now time.Time) StaticScale {
	s := StaticScale{}
	if !np.Static() {
		return s
	}
	s.Replicas = *np.Spec.Replicas
	for _, n := range c.Nodes {
		if n.Claim == nil || n.Claim.NodePoolName() != np.Name {
			continue
		}
		s.Held++
		if !n.MarkedForDeletion() && !n.Claim.Deleting() {
			s.Active = append(s.Active, n)
		}
	}
	active := int64(len(s.Active))
	switch {
	case active < s.Replicas:
		want := s.Replicas - active
		if limit, ok := np.Spec.Limits["nodes"]; ok {
			room := max(limit.Value()-int64(s.Held), 0)
			s.Limited = room < want
			want = min(want, room)
		}
		s.Launch = int(want)
	case active > s.Replicas:
		order := slices.Clone(s.Active)
		ranks := make(map[*Node]removalRank, len(order))
		for _, n := range order {
			ranks[n] = rankForRemoval(n, now)
		}
		slices.SortStableFunc(order, func(a, b *Node) int { return ranks[a].compare(ranks[b], a.Name, b.Name) })
		s.Remove = order[:active-s.Replicas]
	}
	return s
}

// removalRank orders a static pool's claims for scale-down.
type removalRank struct {
	class int // 0 not launched, 1 in flight, 2 empty, 3 busy, 4 do-not-disrupt
	cost  float64
}

func rankForRemoval(n *Node, now time.Time) removalRank {
	switch {
	case !n.Launched():
		return removalRank{class: 0}
	case n.InFlight():
		return removalRank{class: 1}
	}
	dnd, _ := pods.DoNotDisrupt(n.Claim, n.Node, n.Pods, now)
	movable := n.ReschedulablePods()
	switch {
	case dnd:
		return removalRank{class: 4, cost: pods.DisruptionCost(movable, n.Claim, now)}
	case len(movable) == 0:
		return removalRank{class: 2}
	}
	return removalRank{class: 3, cost: pods.DisruptionCost(movable, n.Claim, now)}
}

func (r removalRank) compare(o removalRank, name, other string) int {
	if c := cmp.Compare(r.class, o.class); c != 0 {
		return c
	}
	if c := cmp.Compare(r.cost, o.cost); c != 0 {
		return c
	}
	return cmp.Compare(name, other)
}

// StaticInput is the solver input that plans one node of the static NodePool
// pool from its template alone, as Karpenter builds a static NodeClaim:
// the pool's requirements, taints and instance types, the DaemonSets'
// overhead and the ICE set, no existing node, and one placeholder pod that
// asks for nothing and tolerates every taint. The placeholder only makes
// the solver open a claim; it is not a pod to nominate.
func (c *Cluster) StaticInput(pool string) (*scheduling.Input, error) {
	var sp *scheduling.NodePool
	for _, p := range c.NodePools {
		if p.Name == pool {
			sp = p
		}
	}
	if np := c.Config.NodePool(pool); sp == nil || np == nil || !np.Static() {
		return nil, fmt.Errorf("cluster state: %s is not a configured static NodePool", pool)
	}
	placeholder := &corev1.Pod{}
	placeholder.Namespace, placeholder.Name = "nodewright-static", pool
	placeholder.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	return &scheduling.Input{
		Pods:          []*corev1.Pod{placeholder},
		NodePools:     []*scheduling.NodePool{sp},
		InstanceTypes: c.InstanceTypes,
		DaemonSets:    c.DaemonSets,
		Unavailable:   c.Unavailable,
	}, nil
}
