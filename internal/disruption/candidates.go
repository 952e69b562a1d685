package disruption

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/pods"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
)

// View is everything one disruption decision looks at. It is pure data:
// the controller fills it from the cluster, the store and EC2, and the
// decision functions (Candidates, Budgets, Decide, Validate) never call out.
type View struct {
	Cluster *state.Cluster
	PDBs    []*policyv1.PodDisruptionBudget
	Now     time.Time
	// CloudDrift maps a claim name to the reason EC2 says its instance
	// drifted (aws.DriftAMI, DriftSubnet, DriftSecurityGroup,
	// DriftCapacityReservation, DriftPlacementGroup).
	CloudDrift map[string]string
	Settings   Settings
	// History are recent actions (flip-flop protection).
	History []HistoryEntry
}

// Candidate is a node disruption may act on.
type Candidate struct {
	Node     *state.Node
	Claim    *apis.NodeClaim
	NodePool *apis.NodePool

	InstanceType string
	CapacityType string
	Zone         string
	// Price is the node's offering price in $/h (0 when unknown).
	Price float64
	// Pods are the pods that would need a new home.
	Pods []*corev1.Pod
	// DisruptionCost is Karpenter's: the pods' eviction costs scaled by the
	// node's remaining lifetime.
	DisruptionCost float64
	// BalancedCost is its disruption cost under consolidationPolicy
	// Balanced: 1 plus its pods' eviction costs, each at least 0.
	BalancedCost float64

	// Empty: no reschedulable pods.
	Empty bool
	// Consolidatable: the pool consolidates underutilized nodes and
	// consolidateAfter has passed since the node's last pod event.
	Consolidatable bool
	// EmptyEligible: the pool consolidates (any policy) and
	// consolidateAfter has passed (lifecycle.EmptyCandidate's rule).
	EmptyEligible bool
	// Drift is why the node drifted ("" when it did not).
	Drift string
	// Protected says why graceful methods (emptiness, consolidation) must
	// leave the node alone: do-not-disrupt or a PDB. Such a node is a
	// candidate only for drift, and only because its claim has a
	// terminationGracePeriod.
	Protected string
}

// Name is the node's name.
func (c *Candidate) Name() string { return c.Node.Name }

// Blocked is a node that could have been disrupted but is protected.
type Blocked struct {
	Node   *corev1.Node
	Claim  string
	Reason string
	// Voluntary marks protections users set (do-not-disrupt, PDBs): they
	// deserve a DisruptionBlocked event; the rest (initializing, deleting)
	// are only logged.
	Voluntary bool
}

// Candidates returns the nodes disruption may act on and those it may not,
// with why (Karpenter's rules): managed, registered and initialized, not
// deleting or disrupting, not about to receive pending pods (nominated),
// no karpenter.sh/do-not-disrupt on the claim, node or its pods, and no pod
// whose PodDisruptionBudget forbids an eviction right now.
func Candidates(ctx context.Context, v *View) ([]*Candidate, []Blocked, error) {
	c := v.Cluster
	nominated, err := nominatedNodes(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	var out []*Candidate
	var blocked []Blocked
	for _, n := range c.Nodes {
		if n.Claim == nil {
			continue
		}
		block := func(reason string, voluntary bool) {
			blocked = append(blocked, Blocked{Node: n.Node, Claim: n.Claim.Name, Reason: reason, Voluntary: voluntary})
		}
		switch {
		case n.Node == nil:
			block("not registered yet", false)
			continue
		case !n.Initialized():
			block("not initialized", false)
			continue
		case n.Claim.Deleting() || n.Node.DeletionTimestamp != nil:
			block("already deleting", false)
			continue
		case n.MarkedForDeletion():
			block("already being disrupted", false)
			continue
		case nominated[n.Name]:
			block("nominated for pending pods", false)
			continue
		}
		np := c.Config.NodePool(n.NodePool())
		if np == nil {
			block(fmt.Sprintf("its NodePool %q is not configured", n.NodePool()), false)
			continue
		}
		movable := n.ReschedulablePods()
		protected := ""
		if dnd, why := pods.DoNotDisrupt(n.Claim, n.Node, n.Pods, v.Now); dnd {
			protected = why
		} else if why := pdbBlocks(v.PDBs, movable); why != "" {
			protected = why
		}
		if protected != "" {
			block(protected, true)
			// Karpenter v1: eventual disruption (drift) may still take a
			// protected node when its claim has a terminationGracePeriod,
			// which bounds how long the protection can hold the drain.
			if n.Claim.Spec.TerminationGracePeriod == nil {
				continue
			}
		}
		cand := &Candidate{Node: n, Claim: n.Claim, NodePool: np, Pods: movable, Empty: len(movable) == 0, Protected: protected}
		cand.InstanceType = firstNonEmpty(n.Node.Labels[catalog.LabelInstanceType], n.Claim.Labels[catalog.LabelInstanceType])
		cand.CapacityType = firstNonEmpty(n.Node.Labels[apis.CapacityTypeLabelKey], n.Claim.Labels[apis.CapacityTypeLabelKey])
		cand.Zone = firstNonEmpty(n.Node.Labels[catalog.LabelTopologyZone], n.Claim.Labels[catalog.LabelTopologyZone])
		cand.Price = offeringPrice(c.Catalog, cand.InstanceType, cand.Zone, cand.CapacityType)
		cand.DisruptionCost = pods.DisruptionCost(movable, n.Claim, v.Now)
		cand.BalancedCost = balancedDisruptionCost(movable)
		// A static pool (spec.replicas) is never consolidated; only drift
		// replaces its nodes.
		if after, ok := np.Spec.Disruption.ConsolidateAfter.Get(); ok && protected == "" && !np.Static() && !pods.LastPodEvent(n.Claim).Add(after).After(v.Now) {
			cand.EmptyEligible = true
			cand.Consolidatable = np.Spec.Disruption.ConsolidationPolicy == apis.ConsolidationPolicyWhenEmptyOrUnderutilized || isBalanced(np)
		}
		cand.Drift = driftReason(c, n, np, v.CloudDrift[n.Claim.Name])
		out = append(out, cand)
	}
	return out, blocked, nil
}

// nominatedNodes are the nodes pending pods are about to be placed on: a
// solve of the pending pods alone puts some of them there. Disrupting such a
// node would take away the room the provisioner counted on.
func nominatedNodes(ctx context.Context, c *state.Cluster) (map[string]bool, error) {
	out := map[string]bool{}
	if len(c.Pending) == 0 {
		return out, nil
	}
	in, err := c.Input(state.InputOptions{})
	if err != nil {
		return nil, fmt.Errorf("disruption: nominations: %w", err)
	}
	plan, err := scheduling.Solve(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("disruption: nominations: solve: %w", err)
	}
	for _, p := range plan.ExistingNodes {
		if len(p.PodRefs) > 0 || len(p.Pods) > 0 {
			out[p.Name] = true
		}
	}
	return out, nil
}

// pdbBlocks names a pod whose PodDisruptionBudget allows no eviction now.
func pdbBlocks(pdbs []*policyv1.PodDisruptionBudget, pods []*corev1.Pod) string {
	for _, p := range pods {
		for _, pdb := range pdbs {
			if pdb.Namespace != p.Namespace || pdb.Spec.Selector == nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if pdb.Status.DisruptionsAllowed <= 0 {
				return fmt.Sprintf("PodDisruptionBudget %s/%s allows no eviction of pod %s/%s now", pdb.Namespace, pdb.Name, p.Namespace, p.Name)
			}
		}
	}
	return ""
}

// driftReason says why a node drifted: its NodePool's or EC2NodeClass's
// spec hash differs from the one recorded at launch, EC2 resolves the
// class differently (cloud), or the pool's requirements no longer admit the
// node's labels.
func driftReason(c *state.Cluster, n *state.Node, np *apis.NodePool, cloud string) string {
	cl := n.Claim
	if cl.NodePoolHash != "" && cl.NodePoolHash != np.Hash() {
		return "NodePoolDrifted"
	}
	if nc := c.Config.NodeClassFor(np); nc != nil && cl.NodeClassHash != "" && cl.NodeClassHash != nc.Hash() {
		return "NodeClassDrifted"
	}
	if cloud != "" {
		return cloud
	}
	for _, sp := range c.NodePools {
		if sp.Name != np.Name {
			continue
		}
		if !sp.Requirements.MatchesLabels(n.Node.Labels) {
			return "RequirementsDrifted"
		}
		for k, v := range sp.Labels {
			if n.Node.Labels[k] != v {
				return "RequirementsDrifted"
			}
		}
	}
	return ""
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// offeringPrice is what the node costs per hour (catalog.NodePrice); 0 when
// the catalog does not know its type.
func offeringPrice(cat *catalog.Catalog, typ, zone, capacityType string) float64 {
	price, _ := cat.NodePrice(typ, zone, capacityType)
	return price
}

// cheapestPrice is the lowest available price of typ for capacityType.
func cheapestPrice(cat *catalog.Catalog, typ, capacityType string) (float64, bool) {
	it, ok := cat.Get(typ)
	if !ok {
		return 0, false
	}
	best, found := 0.0, false
	for _, o := range it.Offerings {
		if o.CapacityType == capacityType && o.Available && (!found || o.Price < best) {
			best, found = o.Price, true
		}
	}
	return best, found
}

// sortBySavings orders candidates the way consolidation tries them: most
// money saved per unit of disruption first (empty nodes first), then by
// name for determinism.
func sortBySavings(cands []*Candidate) {
	score := func(c *Candidate) float64 {
		if c.DisruptionCost <= 0 {
			return math.Inf(1)
		}
		return c.Price / c.DisruptionCost
	}
	sort.SliceStable(cands, func(i, j int) bool {
		si, sj := score(cands[i]), score(cands[j])
		if si != sj {
			return si > sj
		}
		return cands[i].Name() < cands[j].Name()
	})
}

// sortOldestFirst orders drifted candidates: oldest claim first.
func sortOldestFirst(cands []*Candidate) {
	sort.SliceStable(cands, func(i, j int) bool {
		ti, tj := cands[i].Claim.CreationTimestamp.Time, cands[j].Claim.CreationTimestamp.Time
		if !ti.Equal(tj) {
			return ti.Before(tj)
		}
		return cands[i].Name() < cands[j].Name()
	})
}
