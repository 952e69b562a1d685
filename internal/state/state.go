// Package state joins one controller pass's sources of truth — a cluster
// snapshot, the store's NodeClaim records, the loaded NodePool/EC2NodeClass
// configuration and the instance-type catalog with the ICE set — into one
// view of the cluster, and turns that view into the solver's input.
//
// The provisioner uses it to place pending pods on existing nodes, booting
// (in-flight) NodeClaims and new claims; disruption and interruption use
// the same view with some nodes removed (InputOptions.Without) to ask where
// those nodes' pods would go.
//
// Static NodePools (spec.replicas) are left out of the solver's input for
// pods, so no pod ever opens a node in one (their existing nodes still take
// pods); StaticScale decides how such a pool reaches its replica count and
// StaticInput plans one of its nodes from the template.
package state

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/pods"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// Sources are one pass's truth. Snapshot, Config and Catalog are required;
// Claims are the store's live NodeClaims.
type Sources struct {
	Snapshot *kube.Snapshot
	Claims   []*apis.NodeClaim
	Config   *apis.Config
	// Catalog is the region's instance types with offerings and prices.
	Catalog *catalog.Catalog
	// Unavailable is the ICE set: offerings no new claim may use.
	Unavailable map[scheduling.OfferingKey]bool
	// Policy is the controller's planning policy, carried into every Input.
	Policy scheduling.Policy
}

// Cluster is the joined view of one pass. It is read-only once built.
type Cluster struct {
	// Nodes are the cluster's Nodes and the NodeClaims without a Node yet,
	// sorted by name.
	Nodes []*Node
	// Pending are the provisionable pending pods (see Provisionable).
	Pending []*corev1.Pod
	// Skipped are pending pods the provisioner must leave alone, with why.
	Skipped []SkippedPod
	// Warnings are inconsistencies Build worked around (a claim whose
	// instance types left the catalog, a claim named like a Node); callers
	// log them. One bad record must not stop every pass.
	Warnings []string

	// NodePools are every configured pool; the solver's input leaves the
	// static ones out (see StaticInput).
	NodePools     []*scheduling.NodePool
	InstanceTypes map[string][]*scheduling.InstanceType
	Unavailable   map[scheduling.OfferingKey]bool

	DaemonSets             []*appsv1.DaemonSet
	PersistentVolumes      []*corev1.PersistentVolume
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	StorageClasses         []*storagev1.StorageClass

	Config  *apis.Config
	Catalog *catalog.Catalog
	// Policy is Sources.Policy.
	Policy scheduling.Policy

	byName  map[string]*Node
	byClaim map[string]*Node
	// requests are the pods' requests, computed once for the nodes'
	// digests and every solve over this view (PodRequests).
	requests *scheduling.RequestCache
	// dynamic are the NodePools new claims may come from for pods.
	dynamic []*scheduling.NodePool
	// volumeLimits are the CSINodes' attach limits per node and driver.
	volumeLimits map[string]map[string]int
}

// Node is a Node, a NodeClaim, or a Node with its NodeClaim.
type Node struct {
	// Name is the Node's name, or the claim's name while it has no Node.
	Name string
	// Node is nil while the claim's instance boots (in flight).
	Node *corev1.Node
	// Claim is nil for nodes nodewright did not launch.
	Claim *apis.NodeClaim
	// Pods are the non-terminal pods bound to the node.
	Pods []*corev1.Pod

	existing *scheduling.ExistingNode
}

// InFlight reports a claim whose Node has not registered yet (including a
// claim whose launch has not completed).
func (n *Node) InFlight() bool { return n.Node == nil }

// Launched reports whether the node's instance exists (always true for a
// registered Node).
func (n *Node) Launched() bool {
	return n.Node != nil || n.Claim.IsTrue(apis.ConditionLaunched)
}

// Managed reports whether nodewright launched the node (it has a claim).
func (n *Node) Managed() bool { return n.Claim != nil }

// NodePool is the node's karpenter.sh/nodepool ("" for unmanaged nodes).
func (n *Node) NodePool() string {
	if n.Claim != nil {
		return n.Claim.NodePoolName()
	}
	if n.Node != nil {
		return n.Node.Labels[apis.NodePoolLabelKey]
	}
	return ""
}

// Initialized reports whether the node is ready for pods: the
// karpenter.sh/initialized label the lifecycle sets on managed nodes, the
// Ready condition for other nodes.
func (n *Node) Initialized() bool { return n.existing.Initialized }

// MarkedForDeletion reports a node that takes no new pods: deleting,
// tainted karpenter.sh/disrupted, or its claim deleting or disrupting.
func (n *Node) MarkedForDeletion() bool { return n.existing.MarkedForDeletion }

// Existing is the solver's view of the node. Shared: do not modify.
func (n *Node) Existing() *scheduling.ExistingNode { return n.existing }

// ReschedulablePods are the pods that would need a new home if the node went
// away: bound, not terminating, not owned by a DaemonSet or by the node
// itself (static pods).
func (n *Node) ReschedulablePods() []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range n.Pods {
		if pods.Reschedulable(p) {
			out = append(out, p)
		}
	}
	return out
}

// Build joins the sources. NodeClaims are matched to Nodes by providerID
// (then by status.nodeName); a claim without a Node is in flight and offers
// the capacity of the type it launched as (or was planned as) so pods
// waiting for a booting node never cause a second one. Claims being deleted
// without a Node, and claims whose launch failed for good, offer nothing.
func Build(src Sources) (*Cluster, error) {
	if src.Snapshot == nil || src.Config == nil || src.Catalog == nil {
		return nil, fmt.Errorf("cluster state: snapshot, configuration and catalog are required")
	}
	snap := src.Snapshot
	c := &Cluster{
		Unavailable:            src.Unavailable,
		DaemonSets:             snap.DaemonSets,
		PersistentVolumes:      snap.PersistentVolumes,
		PersistentVolumeClaims: snap.PersistentVolumeClaims,
		StorageClasses:         snap.StorageClasses,
		Config:                 src.Config,
		Catalog:                src.Catalog,
		Policy:                 src.Policy,
		byName:                 map[string]*Node{},
		byClaim:                map[string]*Node{},
		requests:               &scheduling.RequestCache{},
		volumeLimits:           snap.VolumeLimits(),
	}
	var in scheduling.Input
	if err := scheduling.InputFromConfig(src.Config, src.Catalog, &in); err != nil {
		return nil, fmt.Errorf("cluster state: %w", err)
	}
	c.NodePools, c.InstanceTypes = in.NodePools, in.InstanceTypes
	c.dynamic = scheduling.DynamicPools(src.Config, in.NodePools)

	c.addPending(snap)

	byProvider := map[string]*apis.NodeClaim{}
	byNodeName := map[string]*apis.NodeClaim{}
	for _, cl := range src.Claims {
		if cl == nil || cl.Name == "" {
			return nil, fmt.Errorf("cluster state: NodeClaim without a name")
		}
		if cl.Status.ProviderID != "" {
			byProvider[cl.Status.ProviderID] = cl
		}
		if cl.Status.NodeName != "" {
			byNodeName[cl.Status.NodeName] = cl
		}
	}
	matched := map[string]bool{}
	for _, kn := range snap.Nodes {
		cl := byProvider[kn.Spec.ProviderID]
		if cl == nil || kn.Spec.ProviderID == "" {
			cl = byNodeName[kn.Name]
		}
		if cl != nil && matched[cl.Name] {
			// Two Nodes claim one instance (a re-registration under a new
			// name): the claim belongs to the first, the other stays unmanaged.
			cl = nil
		}
		n := &Node{Name: kn.Name, Node: kn, Claim: cl, Pods: snap.PodsByNode[kn.Name]}
		if cl != nil {
			matched[cl.Name] = true
		}
		c.add(n)
	}
	for _, cl := range src.Claims {
		if matched[cl.Name] || cl.DeletionTimestamp != nil || launchFailed(cl) {
			continue
		}
		c.add(&Node{Name: cl.Name, Claim: cl})
	}
	sort.Slice(c.Nodes, func(i, j int) bool { return c.Nodes[i].Name < c.Nodes[j].Name })
	return c, nil
}

// launchFailed reports a claim whose launch gave up for good (its pods are
// re-planned; the record only waits for deletion).
func launchFailed(cl *apis.NodeClaim) bool {
	cond := cl.Condition(apis.ConditionLaunched)
	return cond != nil && cond.Status == metav1.ConditionFalse
}

func (c *Cluster) add(n *Node) {
	if _, dup := c.byName[n.Name]; dup {
		c.Warnings = append(c.Warnings, fmt.Sprintf("nodeclaim %s is named like a Node; left out of the cluster view", n.Name))
		return
	}
	n.existing = c.existingNode(n)
	c.byName[n.Name] = n
	if n.Claim != nil {
		c.byClaim[n.Claim.Name] = n
	}
	c.Nodes = append(c.Nodes, n)
}

// Node returns the node (or in-flight claim) of that name.
func (c *Cluster) Node(name string) (*Node, bool) {
	n, ok := c.byName[name]
	return n, ok
}

// NodeForClaim returns the node of a NodeClaim (its Node, or the claim itself
// while in flight).
func (c *Cluster) NodeForClaim(claim string) (*Node, bool) {
	n, ok := c.byClaim[claim]
	return n, ok
}

func (c *Cluster) existingNode(n *Node) *scheduling.ExistingNode {
	en := &scheduling.ExistingNode{Name: n.Name, Pods: n.Pods, InFlight: n.Node == nil}
	cl := n.Claim
	if kn := n.Node; kn != nil {
		en.VolumeLimits = c.volumeLimits[kn.Name]
		en.Labels = kn.Labels
		en.Taints = kn.Spec.Taints
		en.Allocatable = kn.Status.Allocatable
		en.Capacity = kn.Status.Capacity
		en.MarkedForDeletion = NodeMarkedForDeletion(kn)
		if cl == nil {
			en.Initialized = nodeReady(kn)
		} else {
			// Judged from the Node itself, not the claim: the lifecycle labels
			// the Node before it records the claim initialized, so a Node read
			// from the watch cache that predates the label (and may still
			// carry its not-ready taint) is taken as coming up, not as a node
			// whose taints keep the pods waiting for it off.
			en.Initialized = kn.Labels[apis.NodeInitializedLabel] == "true"
			en.StartupTaints = cl.Spec.StartupTaints
			if !cl.IsTrue(apis.ConditionRegistered) || kn.Labels[apis.NodeRegisteredLabel] != "true" {
				// Also when the claim says registered but the Node does not
				// yet: a Node read from the watch cache can predate the
				// registration's label write that the claim already records.
				en.Labels, en.Taints = unregisteredView(cl, kn)
			}
		}
	} else {
		en.Labels = inFlightLabels(cl)
		// The node will register with these; the unregistered taint is
		// ephemeral and startup taints are ignored until initialization.
		en.Taints = cl.Spec.Taints
		en.StartupTaints = cl.Spec.StartupTaints
	}
	if cl != nil {
		en.MarkedForDeletion = en.MarkedForDeletion || ClaimMarkedForDeletion(cl)
		if len(en.Allocatable) == 0 || en.InFlight {
			alloc, capacity, err := c.claimResources(cl)
			if err != nil {
				// Nothing fits on it, but it still counts as a node of its pool.
				c.Warnings = append(c.Warnings, fmt.Sprintf("nodeclaim %s: %v; taken as offering no capacity", cl.Name, err))
			}
			en.Allocatable = alloc
			if len(en.Capacity) == 0 || en.InFlight {
				en.Capacity = capacity
			}
		}
	}
	if len(en.Allocatable) == 0 {
		// A Node that has not reported yet: nothing fits until it does,
		// but it still counts against its pool's limits and topology.
		en.Allocatable = corev1.ResourceList{}
	}
	en.Digest = scheduling.DigestNode(en, c.requests) // once per pass, not once per simulation
	return en
}

// unregisteredView is what a Node that came up but is not registered yet
// offers pods: the labels and taints registration is about to give it (its
// claim's), over what its kubelet set, with the Node's own hostname. Read
// from the Node alone, the pods the claim was launched for would not match
// it (no NodePool labels yet) and every pass in that window would buy them
// a second node; Karpenter likewise reads an unregistered node's labels and
// taints from its NodeClaim.
func unregisteredView(cl *apis.NodeClaim, kn *corev1.Node) (map[string]string, []corev1.Taint) {
	labels := inFlightLabels(cl)
	maps.Copy(labels, kn.Labels)
	for k, v := range cl.Labels {
		labels[k] = v // the claim's labels win, as registration writes them
	}
	taints := append(slices.Clone(cl.Spec.Taints), kn.Spec.Taints...)
	return labels, taints
}

// inFlightLabels are what the claim's Node will carry, as far as known: the
// claim's labels (complete once launched, the template's and single-valued
// requirements' before) and its hostname, so hostname topology sees a
// distinct node.
func inFlightLabels(cl *apis.NodeClaim) map[string]string {
	out := make(map[string]string, len(cl.Labels)+4)
	for _, r := range cl.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			out[r.Key] = r.Values[0]
		}
	}
	for k, v := range cl.Labels {
		out[k] = v
	}
	if _, ok := out[catalog.LabelHostname]; !ok {
		out[catalog.LabelHostname] = cl.Name
	}
	return out
}

// claimResources is the allocatable and capacity a claim's node will have:
// recorded on the claim when known; else computed from the catalog for its
// instance type, or — before launch, with several options — the smallest
// allocatable (what pods may safely count on) and the largest capacity
// (what the pool's limits must reserve, as Karpenter charges).
func (c *Cluster) claimResources(cl *apis.NodeClaim) (corev1.ResourceList, corev1.ResourceList, error) {
	if len(cl.Status.Allocatable) > 0 && len(cl.Status.Capacity) > 0 {
		return cl.Status.Allocatable, cl.Status.Capacity, nil
	}
	opts := c.Catalog.OptionsFor(c.nodeClassOf(cl))
	var names []string
	if t := cl.Labels[catalog.LabelInstanceType]; t != "" {
		names = []string{t}
	} else {
		for _, r := range cl.Spec.Requirements {
			if r.Key == catalog.LabelInstanceType && r.Operator == corev1.NodeSelectorOpIn {
				names = r.Values
			}
		}
	}
	var alloc, capacity corev1.ResourceList
	for _, name := range names {
		it, ok := c.Catalog.Get(name)
		if !ok {
			continue
		}
		a, err := it.Allocatable(opts)
		if err != nil {
			return nil, nil, err
		}
		alloc = minList(alloc, a)
		capacity = maxList(capacity, it.Capacity(opts))
	}
	if len(cl.Status.Allocatable) > 0 {
		alloc = cl.Status.Allocatable
	}
	if len(cl.Status.Capacity) > 0 {
		capacity = cl.Status.Capacity
	}
	if alloc == nil {
		return nil, nil, fmt.Errorf("no allocatable recorded and none of its instance types %v is in the catalog", names)
	}
	return alloc, capacity, nil
}

func (c *Cluster) nodeClassOf(cl *apis.NodeClaim) *apis.EC2NodeClass {
	if cl.Spec.NodeClassRef != nil {
		return c.Config.NodeClass(cl.Spec.NodeClassRef.Name)
	}
	if np := c.Config.NodePool(cl.NodePoolName()); np != nil {
		return c.Config.NodeClassFor(np)
	}
	return nil
}

// minList keeps, per resource, the smaller value; resources missing from
// either side are dropped (a type without a GPU offers no GPU).
func minList(acc, l corev1.ResourceList) corev1.ResourceList {
	if acc == nil {
		return l.DeepCopy()
	}
	for k, q := range acc {
		o, ok := l[k]
		if !ok {
			delete(acc, k)
			continue
		}
		if o.Cmp(q) < 0 {
			acc[k] = o.DeepCopy()
		}
	}
	return acc
}

func maxList(acc, l corev1.ResourceList) corev1.ResourceList {
	if acc == nil {
		return l.DeepCopy()
	}
	for k, q := range l {
		if o, ok := acc[k]; !ok || q.Cmp(o) > 0 {
			acc[k] = q.DeepCopy()
		}
	}
	return acc
}

// NodeMarkedForDeletion reports a Node that takes no new pods: deleting, or
// tainted for disruption.
func NodeMarkedForDeletion(kn *corev1.Node) bool {
	return kn.DeletionTimestamp != nil || hasDisruptedTaint(kn.Spec.Taints)
}

// ClaimMarkedForDeletion reports a claim being deleted or disrupted: its
// node, registered or not, takes no new pods.
func ClaimMarkedForDeletion(cl *apis.NodeClaim) bool {
	return cl.DeletionTimestamp != nil || cl.IsTrue(apis.ConditionDisrupting)
}

func hasDisruptedTaint(ts []corev1.Taint) bool {
	for _, t := range ts {
		if t.Key == apis.DisruptedTaintKey && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// InputOptions shape the solver input of one question.
type InputOptions struct {
	// Pods to place; nil means the cluster's provisionable pending pods.
	Pods []*corev1.Pod
	// Without lists nodes (by Node.Name, or claim name for in-flight claims)
	// to treat as gone: they offer no capacity and their reschedulable pods
	// join the pods to place (unbound copies). Consolidation asks "where
	// would these nodes' pods go?" this way.
	Without []string
	// IncludeDeletingPods adds the reschedulable pods of nodes marked for
	// deletion to the pods to place, so their replacement capacity is
	// provisioned before they are evicted, as Karpenter's provisioner does.
	IncludeDeletingPods bool
}

// Input builds the solver's input. The result shares the cluster's objects;
// the solver never mutates its input.
func (c *Cluster) Input(o InputOptions) (*scheduling.Input, error) {
	pods := o.Pods
	if pods == nil {
		pods = c.Pending
	}
	gone := make(map[string]bool, len(o.Without))
	for _, name := range o.Without {
		if _, ok := c.byName[name]; !ok {
			return nil, fmt.Errorf("cluster state: node %s to simulate away is not in the cluster", name)
		}
		gone[name] = true
	}
	in := &scheduling.Input{
		Pods:                   append([]*corev1.Pod(nil), pods...),
		NodePools:              c.dynamic,
		InstanceTypes:          c.InstanceTypes,
		DaemonSets:             c.DaemonSets,
		PersistentVolumes:      c.PersistentVolumes,
		PersistentVolumeClaims: c.PersistentVolumeClaims,
		StorageClasses:         c.StorageClasses,
		Unavailable:            c.Unavailable,
		Nodes:                  make([]*scheduling.ExistingNode, 0, len(c.Nodes)),
		Requests:               c.requests,
		Policy:                 c.Policy,
	}
	seen := make(map[string]bool, len(in.Pods))
	for _, p := range in.Pods {
		seen[p.Namespace+"/"+p.Name] = true
	}
	for _, n := range c.Nodes {
		move := gone[n.Name] || (o.IncludeDeletingPods && n.existing.MarkedForDeletion)
		if move {
			for _, p := range n.ReschedulablePods() {
				if k := p.Namespace + "/" + p.Name; !seen[k] {
					seen[k] = true
					in.Pods = append(in.Pods, Unbound(p))
				}
			}
		}
		if !gone[n.Name] {
			in.Nodes = append(in.Nodes, n.existing)
		}
	}
	return in, nil
}

// PodRequests is scheduling.PodRequests(p), computed once per pod of this
// view; the list is shared, not to be modified.
func (c *Cluster) PodRequests(p *corev1.Pod) corev1.ResourceList { return c.requests.Of(p) }

// Unbound returns a copy of a bound pod as a pending pod (same identity,
// no node), for asking where it would go. Deep fields are shared.
func Unbound(p *corev1.Pod) *corev1.Pod {
	cp := *p
	cp.Spec.NodeName = ""
	cp.Status.NominatedNodeName = ""
	return &cp
}

// Capacity sums the capacity of a NodePool's nodes and in-flight claims
// (what its limits are charged with).
func (c *Cluster) Capacity(nodePool string) corev1.ResourceList {
	out := corev1.ResourceList{}
	nodes := int64(0)
	for _, n := range c.Nodes {
		if n.NodePool() != nodePool {
			continue
		}
		nodes++
		capacity := n.existing.Capacity
		if capacity == nil {
			capacity = n.existing.Allocatable
		}
		for k, q := range capacity {
			sum := out[k]
			sum.Add(q)
			out[k] = sum
		}
	}
	out["nodes"] = *resource.NewQuantity(nodes, resource.DecimalSI)
	return out
}
