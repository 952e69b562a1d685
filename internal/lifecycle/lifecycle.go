// Package lifecycle is the lifecycle function's controller: it moves each
// NodeClaim from Launched to Registered and Initialized, times out claims
// that never launch or register, marks expired claims and empty nodes of
// WhenEmpty pools for deletion, runs the termination workflow
// (internal/termination) on claims marked for deletion, and garbage
// collects both ways (instances without claims, claims without instances,
// Nodes of terminated instances).
//
// It is driven by two events: the one-minute schedule, which reconciles
// every claim (Controller.ReconcileAll), and lifecycle work messages on the
// SQS work queue naming one claim (Controller.Reconcile), which carry work
// in progress forward with SQS delays instead of a blocking wait.
//
// Whoever marks a claim for deletion (disruption, interruption, the CLI)
// should also send a lifecycle message for it (queue.Message{Kind:
// queue.KindLifecycle, Subject: claim name}) so the drain starts at once;
// the schedule picks it up within a minute otherwise.
//
// # Safety rules
//
// The lifecycle removes capacity, so it keeps these rules (gc.go and
// internal/termination enforce them; gc_test.go and the termination tests
// check them over the real wire):
//   - It never terminates an instance it did not launch: instances are
//     listed and terminated only with this stack's owner tag
//     (aws.TagOwner, the table's ARN), so Karpenter's, a person's and another
//     nodewright stack's are never touched, even for the same cluster.
//   - It never removes a Node that runs non-daemon pods without the
//     PDB-respecting drain of internal/termination; an orphaned instance
//     with such a Node is adopted as a claim marked for deletion and drained.
//     The named exceptions: a claim whose Node never registered
//     (RegistrationTimeout) and a spot instance EC2 reclaims.
//   - It never takes more than a bounded share of the fleet in one garbage
//     collection pass (Settings.GCMaxShare / GCMaxInstances): more orphans
//     than that means the table is wrong, and the pass refuses, warns and
//     raises metrics.GCRefused. Emptiness and expiry go through the
//     NodePools' disruption budgets.
//   - A claim record it cannot decode is unknown, never absent: its instance
//     is kept.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/pods"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// Deletion reasons the lifecycle gives besides apis.DeletionReason*.
const (
	ReasonLaunchTimeout       = "LaunchTimeout"
	ReasonRegistrationTimeout = "RegistrationTimeout"
	ReasonNodeDeleted         = "NodeDeleted"
	// ReasonGarbageCollected: an instance of this stack that no claim owns
	// but whose Node runs pods, adopted so it leaves through the drain.
	ReasonGarbageCollected = "GarbageCollected"
)

// Store is what the lifecycle needs of internal/store (*store.Store).
type Store interface {
	termination.Store
	ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error)
	ListNodeClaimsReport(ctx context.Context) ([]*apis.NodeClaim, []store.Undecodable, error)
	CreateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error
	RecordObservedCapacity(ctx context.Context, o store.ObservedCapacity) error
	AcquireLease(ctx context.Context, name, holder string, d time.Duration) (*store.Lease, error)
	ReleaseLease(ctx context.Context, l *store.Lease) error
	// Work-chain records (chain.go).
	GetKV(ctx context.Context, k string) (*store.KV, error)
	PutKV(ctx context.Context, k string, value []byte, expectedVersion int64, ttl time.Duration) (int64, error)
	ListKV(ctx context.Context, prefix string) ([]*store.KV, error)
}

// Cluster is what the lifecycle needs of the API server (*kube.Client).
type Cluster interface {
	termination.Cluster
	Snapshot(ctx context.Context, opts kube.SnapshotOptions) (*kube.Snapshot, error)
	PatchNodeLabels(ctx context.Context, node string, set map[string]string, remove []string) (*corev1.Node, error)
	UpdateNodeTaints(ctx context.Context, node string, mutate func([]corev1.Taint) ([]corev1.Taint, bool)) (*corev1.Node, error)
}

// Cloud is what the lifecycle needs of EC2 (*aws.Provider).
type Cloud interface {
	termination.Cloud
	ListClusterInstances(ctx context.Context) ([]nwaws.Instance, error)
	GetInstance(ctx context.Context, id string) (nwaws.Instance, error)
}

// Deps are the controller's adapters.
type Deps struct {
	Store   Store
	Cluster Cluster
	Cloud   Cloud
	Config  *apis.Config
	// Requeue sends a lifecycle work message after a delay (App.Work.Send);
	// nil leaves follow-ups to the schedule.
	Requeue func(ctx context.Context, msg queue.Message, delay time.Duration) error
	Metrics *metrics.Recorder
	Log     *slog.Logger
	Now     func() time.Time
	// Holder names this invocation for leases (default: a constant).
	Holder   string
	Settings Settings
}

// Settings tune the controller; zero values take Karpenter's defaults.
type Settings struct {
	// LaunchTimeout: a claim not launched this long after creation is
	// deleted (default 5 min).
	LaunchTimeout time.Duration
	// RegistrationTTL: a launched claim whose Node has not registered this
	// long after launch is deleted and its instance terminated (15 min).
	RegistrationTTL time.Duration
	// GCGrace: instances without a claim are terminated once older than
	// this; claims whose instance is missing are removed once launched
	// longer than this (30 s; covers eventual consistency).
	GCGrace time.Duration
	// Poll is how often a claim waiting for registration or initialization
	// is looked at again (default 2 s).
	Poll time.Duration
	// GCMaxShare and GCMaxInstances bound instance garbage collection: a
	// pass that finds more orphans than the larger of GCMaxInstances and
	// GCMaxShare of this stack's fleet collects none and raises
	// metrics.GCRefused instead (defaults 10 % and 5). A fresh, restored or
	// foreign table looks exactly like a fleet of orphans.
	GCMaxShare     float64
	GCMaxInstances int
}

func (s *Settings) defaults() {
	if s.LaunchTimeout <= 0 {
		s.LaunchTimeout = 5 * time.Minute
	}
	if s.RegistrationTTL <= 0 {
		s.RegistrationTTL = 15 * time.Minute
	}
	if s.GCGrace <= 0 {
		s.GCGrace = 30 * time.Second
	}
	if s.Poll <= 0 {
		s.Poll = 2 * time.Second
	}
	if s.GCMaxShare <= 0 {
		s.GCMaxShare = 0.10
	}
	if s.GCMaxInstances <= 0 {
		s.GCMaxInstances = 5
	}
}

// Controller reconciles NodeClaims. Safe for concurrent use.
type Controller struct {
	d    Deps
	s    Settings
	term *termination.Terminator
	log  *slog.Logger
	// emptyMu serialises emptiness decisions within this process: the
	// lease is re-entrant for one holder, and a pass decides for many
	// claims at once.
	emptyMu sync.Mutex
}

// New returns a Controller.
func New(d Deps) (*Controller, error) {
	if d.Store == nil || d.Cluster == nil || d.Cloud == nil || d.Config == nil {
		return nil, errors.New("lifecycle: store, cluster, cloud and configuration are required")
	}
	d.Log, d.Now, d.Metrics = basedeps.Logger(d.Log), basedeps.Clock(d.Now), basedeps.Recorder(d.Metrics)
	if d.Holder == "" {
		d.Holder = "lifecycle"
	}
	d.Settings.defaults()
	term, err := termination.New(termination.Deps{Store: d.Store, Cluster: d.Cluster, Cloud: d.Cloud, Metrics: d.Metrics, Log: d.Log, Now: d.Now})
	if err != nil {
		return nil, err
	}
	return &Controller{d: d, s: d.Settings, term: term, log: d.Log}, nil
}

// Terminator is the controller's termination workflow.
func (c *Controller) Terminator() *termination.Terminator { return c.term }

// Outcome is what one claim's reconcile did.
type Outcome struct {
	Claim  string `json:"claim"`
	Action string `json:"action,omitempty"`
	// RequeueAfter > 0 asks for another look after that long.
	RequeueAfter time.Duration `json:"requeueAfter,omitempty"`
	// Done: the claim no longer exists.
	Done bool `json:"done,omitempty"`
}

// Actions an Outcome reports.
const (
	ActionRegistered   = "registered"
	ActionInitialized  = "initialized"
	ActionWaiting      = "waiting"
	ActionTerminating  = "terminating"
	ActionTerminated   = "terminated"
	ActionExpired      = "expired"
	ActionEmpty        = "empty"
	ActionLiveness     = "liveness"
	ActionVanished     = "instance-vanished"
	ActionNodeDeleted  = "node-deleted"
	ActionNone         = ""
	ActionNotFound     = "not-found"
	ActionBudgetBlocks = "budget-blocked"
)

// view is what a reconcile knows about the world around one claim. The
// schedule's pass fills it from one snapshot and one instance listing; a
// work message's reconcile reads just what the claim needs.
type view interface {
	node(ctx context.Context, cl *apis.NodeClaim) (*corev1.Node, error)
	pods(ctx context.Context, node string) ([]*corev1.Pod, error)
	// instance reports the claim's instance; gone is true only when EC2
	// confirms it does not exist (or is terminated / shutting down).
	instance(ctx context.Context, id string) (inst nwaws.Instance, gone bool, err error)
	poolClaims(ctx context.Context, pool string) ([]*apis.NodeClaim, error)
	nodeReady(ctx context.Context, cl *apis.NodeClaim) bool
}

// Reconcile looks at one claim (a work message's subject).
func (c *Controller) Reconcile(ctx context.Context, name string) (Outcome, error) {
	cl, err := c.d.Store.GetNodeClaim(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return Outcome{Claim: name, Action: ActionNotFound, Done: true}, nil
	}
	if err != nil {
		return Outcome{Claim: name}, fmt.Errorf("lifecycle: read nodeclaim %s: %w", name, err)
	}
	return c.reconcile(ctx, cl, &lazyView{c: c})
}

func (c *Controller) reconcile(ctx context.Context, cl *apis.NodeClaim, v view) (Outcome, error) {
	out := Outcome{Claim: cl.Name}
	now := c.d.Now()
	log := c.log.With("nodeclaim", cl.Name, "nodepool", cl.NodePoolName(), "instance-id", cl.Status.InstanceID)

	// An instance that is gone takes its pods with it: nothing to drain,
	// whether or not the claim was marked (an interruption's
	// state-change, a person in the console). Claims whose termination
	// already terminated the instance finish through their Step instead.
	launched := cl.IsTrue(apis.ConditionLaunched)
	var launchedAt time.Time
	if launched {
		launchedAt = cl.Condition(apis.ConditionLaunched).LastTransitionTime.Time
	}
	if id := cl.Status.InstanceID; launched && id != "" && now.Sub(launchedAt) >= c.s.GCGrace &&
		!cl.IsTrue(termination.ConditionInstanceTerminating) {
		_, gone, err := v.instance(ctx, id)
		if err != nil {
			return out, fmt.Errorf("lifecycle: nodeclaim %s: %w", cl.Name, err)
		}
		if gone {
			return c.removeVanished(ctx, log, cl, v, out)
		}
	}

	if cl.Deleting() {
		return c.terminate(ctx, cl, out)
	}

	if !launched {
		age := now.Sub(cl.CreationTimestamp.Time)
		if age >= c.s.LaunchTimeout {
			log.WarnContext(ctx, "nodeclaim not launched in time; deleting it", "age", age.Round(time.Second).String())
			return c.markAndTerminate(ctx, cl, ReasonLaunchTimeout, fmt.Sprintf("not launched within %s", c.s.LaunchTimeout), ActionLiveness)
		}
		out.Action, out.RequeueAfter = ActionWaiting, c.s.LaunchTimeout-age
		return out, nil
	}

	// Expiration is forceful (Karpenter v1): no budget, no do-not-disrupt,
	// registered or not.
	if exp, ok := cl.Spec.ExpireAfter.Get(); ok && exp > 0 {
		if expiry := cl.CreationTimestamp.Add(exp); !now.Before(expiry) {
			log.InfoContext(ctx, "nodeclaim expired", "expire-after", exp.String())
			c.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": apis.DeletionReasonExpired, "nodepool": cl.NodePoolName()})
			return c.markAndTerminate(ctx, cl, apis.DeletionReasonExpired, fmt.Sprintf("expireAfter %s elapsed", exp), ActionExpired)
		}
	}

	node, err := v.node(ctx, cl)
	if err != nil {
		return out, fmt.Errorf("lifecycle: nodeclaim %s: %w", cl.Name, err)
	}

	if !cl.IsTrue(apis.ConditionRegistered) {
		if node == nil {
			if waited := now.Sub(launchedAt); waited >= c.s.RegistrationTTL {
				log.WarnContext(ctx, "node did not register in time; terminating", "waited", waited.Round(time.Second).String())
				return c.markAndTerminate(ctx, cl, ReasonRegistrationTimeout, fmt.Sprintf("no node registered within %s of launch", c.s.RegistrationTTL), ActionLiveness)
			}
			out.Action, out.RequeueAfter = ActionWaiting, c.poll(launchedAt, now)
			return out, nil
		}
		cl, err = c.register(ctx, log, cl, node)
		if err != nil {
			return out, err
		}
		out.Action = ActionRegistered
		// The node object changed; re-read it for initialization.
		if node, err = v.node(ctx, cl); err != nil || node == nil {
			out.RequeueAfter = c.s.Poll
			return out, err
		}
	}

	if node == nil {
		// Registered earlier, but the Node is gone while the instance
		// lives: someone deleted the Node. Karpenter deletes the NodeClaim
		// then (its Node finalizer); an instance left without a Node would
		// cost money and serve nothing. A grace period covers a Node
		// being re-created under the same name.
		reg := cl.Condition(apis.ConditionRegistered).LastTransitionTime.Time
		if now.Sub(reg) < c.s.GCGrace {
			out.Action, out.RequeueAfter = ActionWaiting, c.s.GCGrace-now.Sub(reg)
			return out, nil
		}
		log.WarnContext(ctx, "the node of a registered nodeclaim was deleted; terminating its instance", "node", cl.Status.NodeName)
		return c.markAndTerminate(ctx, cl, ReasonNodeDeleted, "node "+cl.Status.NodeName+" was deleted", ActionNodeDeleted)
	}

	if !cl.IsTrue(apis.ConditionInitialized) {
		ok, why := Initialized(cl, node)
		if !ok {
			log.DebugContext(ctx, "waiting for initialization", "node", node.Name, "why", why)
			if out.Action == "" {
				out.Action = ActionWaiting
			}
			since := launchedAt
			if r := cl.Condition(apis.ConditionRegistered); r != nil {
				since = r.LastTransitionTime.Time
			}
			out.RequeueAfter = c.poll(since, now)
			return out, nil
		}
		if cl, err = c.initialize(ctx, log, cl, node); err != nil {
			return out, err
		}
		out.Action = ActionInitialized
	}

	return c.emptiness(ctx, log, cl, node, v, out)
}

// poll is the delay before looking again at a claim waiting since since:
// Settings.Poll at first, then a tenth of the wait so far (pods wait for
// registration, so the lag stays ~10% of the boot time), at most maxPoll,
// so a node that never boots costs about a hundred looks over the 15 min
// registration TTL, not hundreds.
func (c *Controller) poll(since, now time.Time) time.Duration {
	return min(max(now.Sub(since)/10, c.s.Poll), maxPoll)
}

const maxPoll = 15 * time.Second

// markAndTerminate marks the claim and takes the first termination step.
func (c *Controller) markAndTerminate(ctx context.Context, cl *apis.NodeClaim, reason, msg, action string) (Outcome, error) {
	marked, _, err := termination.Mark(ctx, c.d.Store, cl.Name, reason, msg, c.d.Now())
	if errors.Is(err, store.ErrNotFound) {
		return Outcome{Claim: cl.Name, Action: ActionNotFound, Done: true}, nil
	}
	if err != nil {
		return Outcome{Claim: cl.Name}, fmt.Errorf("lifecycle: %w", err)
	}
	// The outcome names why the claim went (Done says whether it is gone).
	out, err := c.terminate(ctx, marked, Outcome{Claim: cl.Name})
	if err == nil {
		out.Action = action
	}
	return out, err
}

func (c *Controller) terminate(ctx context.Context, cl *apis.NodeClaim, out Outcome) (Outcome, error) {
	res, err := c.term.Step(ctx, cl)
	if err != nil {
		return out, err
	}
	if res.Done {
		out.Action, out.Done = ActionTerminated, true
		return out, nil
	}
	out.Action, out.RequeueAfter = ActionTerminating, res.RequeueAfter
	return out, nil
}

// removeVanished removes a claim whose instance no longer exists, and its
// Node: the pods are gone with the instance, so there is nothing to drain.
func (c *Controller) removeVanished(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, v view, out Outcome) (Outcome, error) {
	node, err := v.node(ctx, cl)
	if err != nil {
		return out, fmt.Errorf("lifecycle: nodeclaim %s: %w", cl.Name, err)
	}
	if node != nil {
		if err := c.d.Cluster.DeleteNode(ctx, node.Name, node.UID); err != nil {
			return out, fmt.Errorf("lifecycle: delete node %s of vanished instance %s: %w", node.Name, cl.Status.InstanceID, err)
		}
	}
	for attempt := 0; ; attempt++ {
		cur, err := c.d.Store.GetNodeClaim(ctx, cl.Name)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("lifecycle: nodeclaim %s: %w", cl.Name, err)
		}
		cur.SetCondition(termination.ConditionInstanceTerminating, metav1.ConditionTrue, "InstanceNotFound",
			"instance "+cur.Status.InstanceID+" no longer exists", metav1.NewTime(c.d.Now()))
		err = c.d.Store.DeleteNodeClaim(ctx, cur)
		if err == nil || errors.Is(err, store.ErrNotFound) {
			break
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= 7 {
			return out, fmt.Errorf("lifecycle: tombstone nodeclaim %s: %w", cl.Name, err)
		}
	}
	log.InfoContext(ctx, "garbage collected nodeclaim whose instance is gone", "node", nodeName(node))
	c.d.Metrics.Add(metrics.NodeClaimsTerminated, 1, metrics.Dimensions{"nodepool": cl.NodePoolName(), "reason": "InstanceNotFound"})
	out.Action, out.Done = ActionVanished, true
	return out, nil
}

func nodeName(n *corev1.Node) string {
	if n == nil {
		return ""
	}
	return n.Name
}

// RegistrationLabels are the labels registration puts on the Node: the
// claim's labels (NodePool template labels, the nodepool, the launched
// instance type / zone / capacity type), its single-valued In requirements,
// and karpenter.sh/registered.
func RegistrationLabels(cl *apis.NodeClaim) map[string]string {
	labels := nwaws.NodeLabels(cl, cl.Labels[apis.CapacityTypeLabelKey])
	maps.Copy(labels, cl.Labels)
	labels[apis.NodeRegisteredLabel] = "true"
	return labels
}

// register syncs the claim's labels and taints onto its Node, removes the
// unregistered taint and records the registration. Labels go first: the
// unregistered taint is what keeps pods off a node whose labels are not yet
// the claim's, so it is removed only once they are.
func (c *Controller) register(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, node *corev1.Node) (*apis.NodeClaim, error) {
	// Registration finished earlier only if the unregistered taint is gone
	// too (a crash between the two writes leaves the label without it).
	finished := node.Labels[apis.NodeRegisteredLabel] == "true" && !hasTaint(node, apis.UnregisteredTaintKey)
	if _, err := c.d.Cluster.PatchNodeLabels(ctx, node.Name, RegistrationLabels(cl), nil); err != nil {
		return nil, fmt.Errorf("lifecycle: register node %s: labels: %w", node.Name, err)
	}
	_, err := c.d.Cluster.UpdateNodeTaints(ctx, node.Name, func(cur []corev1.Taint) ([]corev1.Taint, bool) {
		return MergeRegistrationTaints(cur, cl.Spec.Taints, cl.Spec.StartupTaints, finished)
	})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: register node %s: taints: %w", node.Name, err)
	}
	now := metav1.NewTime(c.d.Now())
	updated, err := c.d.Store.MutateNodeClaim(ctx, cl.Name, func(x *apis.NodeClaim) error {
		x.Status.NodeName = node.Name
		if x.Status.ProviderID == "" {
			x.Status.ProviderID = node.Spec.ProviderID
		}
		x.SetCondition(apis.ConditionRegistered, metav1.ConditionTrue, "Registered", "node "+node.Name, now)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: record registration of nodeclaim %s: %w", cl.Name, err)
	}
	log.InfoContext(ctx, "node registered", "node", node.Name, "after-launch",
		now.Sub(cl.Condition(apis.ConditionLaunched).LastTransitionTime.Time).Round(time.Millisecond).String())
	return updated, nil
}

// MergeRegistrationTaints is the node's taint list after registration:
// karpenter.sh/unregistered removed, and the claim's taints added when
// missing (same key and effect). Startup taints are added only while the
// node is not yet labelled registered: afterwards its agent may have removed
// them on purpose.
func MergeRegistrationTaints(cur, taints, startup []corev1.Taint, alreadyRegistered bool) ([]corev1.Taint, bool) {
	out := make([]corev1.Taint, 0, len(cur)+len(taints)+len(startup))
	changed := false
	for _, t := range cur {
		if t.Key == apis.UnregisteredTaintKey {
			changed = true
			continue
		}
		out = append(out, t)
	}
	want := taints
	if !alreadyRegistered {
		want = append(append([]corev1.Taint(nil), taints...), startup...)
	}
	for _, w := range want {
		found := false
		for _, t := range out {
			if t.Key == w.Key && t.Effect == w.Effect {
				found = true
				break
			}
		}
		if !found {
			out = append(out, w)
			changed = true
		}
	}
	return out, changed
}

// Initialized reports whether a registered claim's node is initialized
// (Karpenter's rules): Ready, none of the claim's startup taints left, no
// karpenter.sh/unregistered taint, and every extended resource the claim
// asked for registered in allocatable. why says what is missing.
func Initialized(cl *apis.NodeClaim, node *corev1.Node) (bool, string) {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return false, "node not Ready"
	}
	for _, t := range node.Spec.Taints {
		if t.Key == apis.UnregisteredTaintKey {
			return false, "unregistered taint present"
		}
		for _, st := range cl.Spec.StartupTaints {
			if t.Key == st.Key && t.Effect == st.Effect {
				return false, "startup taint " + st.Key + " present"
			}
		}
	}
	for name, q := range cl.Spec.Resources.Requests {
		if !extended(name) || q.IsZero() {
			continue
		}
		if alloc, ok := node.Status.Allocatable[name]; !ok || alloc.IsZero() {
			return false, "extended resource " + string(name) + " not registered"
		}
	}
	return true, ""
}

func extended(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods, corev1.ResourceStorage:
		return false
	}
	return true
}

// initialize records initialization, labels the node and stores its
// measured allocatable for the instance type.
func (c *Controller) initialize(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, node *corev1.Node) (*apis.NodeClaim, error) {
	if node.Labels[apis.NodeInitializedLabel] != "true" {
		if _, err := c.d.Cluster.PatchNodeLabels(ctx, node.Name, map[string]string{apis.NodeInitializedLabel: "true"}, nil); err != nil {
			return nil, fmt.Errorf("lifecycle: label node %s initialized: %w", node.Name, err)
		}
	}
	now := metav1.NewTime(c.d.Now())
	updated, err := c.d.Store.MutateNodeClaim(ctx, cl.Name, func(x *apis.NodeClaim) error {
		x.SetCondition(apis.ConditionInitialized, metav1.ConditionTrue, "Initialized", "node "+node.Name, now)
		if len(node.Status.Allocatable) > 0 {
			x.Status.Allocatable = node.Status.Allocatable.DeepCopy()
		}
		if len(node.Status.Capacity) > 0 {
			x.Status.Capacity = node.Status.Capacity.DeepCopy()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: record initialization of nodeclaim %s: %w", cl.Name, err)
	}
	if typ := node.Labels[corev1.LabelInstanceTypeStable]; typ != "" && len(node.Status.Allocatable) > 0 {
		err := c.d.Store.RecordObservedCapacity(ctx, store.ObservedCapacity{
			InstanceType: typ, Variant: cl.NodeClassHash, Capacity: node.Status.Capacity, Allocatable: node.Status.Allocatable,
			NodeName: node.Name, ObservedAt: now.Time,
		})
		if err != nil {
			log.WarnContext(ctx, "recording observed allocatable", "instance-type", typ, "error", err)
		}
	}
	log.InfoContext(ctx, "node initialized", "node", node.Name, "after-launch",
		now.Sub(cl.Condition(apis.ConditionLaunched).LastTransitionTime.Time).Round(time.Millisecond).String())
	return updated, nil
}

// emptiness keeps the claim's pod-event clock and deletes empty nodes of
// WhenEmpty pools once consolidateAfter has passed, within budgets.
// WhenEmptyOrUnderutilized pools are the disruption function's (it reuses
// EmptyCandidate), so their emptiness is not acted on here.
func (c *Controller) emptiness(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, node *corev1.Node, v view, out Outcome) (Outcome, error) {
	pods, err := v.pods(ctx, node.Name)
	if err != nil {
		return out, fmt.Errorf("lifecycle: pods of node %s: %w", node.Name, err)
	}
	now := c.d.Now()
	if digest := PodSetDigest(pods); cl.Annotations[AnnotationPodSet] != digest {
		first := cl.Annotations[AnnotationPodSet] == ""
		updated, err := c.d.Store.MutateNodeClaim(ctx, cl.Name, func(x *apis.NodeClaim) error {
			if x.Annotations == nil {
				x.Annotations = map[string]string{}
			}
			x.Annotations[AnnotationPodSet] = digest
			// The first look establishes the baseline; the initialization
			// time already stands for "last pod event" until then.
			if !first {
				// Stored with second precision: round up, so the clock
				// never starts before the change was seen.
				x.Status.LastPodEventTime = metav1.NewTime(ceilSecond(now))
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("lifecycle: record pod events of nodeclaim %s: %w", cl.Name, err)
		}
		cl = updated
	}

	np := c.d.Config.NodePool(cl.NodePoolName())
	if np == nil || np.Spec.Disruption.ConsolidationPolicy != apis.ConsolidationPolicyWhenEmpty {
		return out, nil
	}
	check := EmptyCandidate(cl, np, node, pods, now)
	if !check.Candidate {
		if check.Wait > 0 {
			// Look again when consolidateAfter runs out (the schedule would
			// too, but up to a minute late).
			out.RequeueAfter = check.Wait
		}
		return out, nil
	}
	return c.deleteEmpty(ctx, log, cl, np, node, v, out)
}

func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// deleteEmpty marks an empty node's claim for deletion if the pool's
// budgets allow, under the emptiness lease.
func (c *Controller) deleteEmpty(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, np *apis.NodePool, node *corev1.Node, v view, out Outcome) (Outcome, error) {
	c.emptyMu.Lock()
	defer c.emptyMu.Unlock()
	lease, err := c.d.Store.AcquireLease(ctx, store.EmptinessLease, c.d.Holder, 30*time.Second)
	if errors.Is(err, store.ErrLeaseHeld) {
		out.RequeueAfter = c.s.Poll
		return out, nil
	}
	if err != nil {
		return out, fmt.Errorf("lifecycle: emptiness lease: %w", err)
	}
	defer func() {
		if err := c.d.Store.ReleaseLease(context.WithoutCancel(ctx), lease); err != nil {
			log.WarnContext(ctx, "releasing the emptiness lease", "error", err)
		}
	}()
	claims, err := v.poolClaims(ctx, np.Name)
	if err != nil {
		return out, fmt.Errorf("lifecycle: claims of nodepool %s: %w", np.Name, err)
	}
	now := c.d.Now()
	allowed, err := AllowedDisruptions(np, claims, func(x *apis.NodeClaim) bool { return v.nodeReady(ctx, x) }, apis.DisruptionReasonEmpty, now)
	if err != nil {
		return out, fmt.Errorf("lifecycle: %w", err)
	}
	if allowed <= 0 {
		log.InfoContext(ctx, "empty node kept: disruption budget exhausted", "node", node.Name)
		if err := c.d.Cluster.NodeEvent(ctx, node, kube.EventNormal, "DisruptionBlocked",
			"Cannot disrupt Node: NodePool %q has no disruption budget left for reason Empty", np.Name); err != nil {
			log.DebugContext(ctx, "node event", "error", err)
		}
		out.Action, out.RequeueAfter = ActionBudgetBlocks, 0
		return out, nil
	}
	after, _ := np.Spec.Disruption.ConsolidateAfter.Get()
	log.InfoContext(ctx, "empty node: deleting", "node", node.Name, "consolidate-after", after.String(),
		"last-pod-event", pods.LastPodEvent(cl).UTC().Format(time.RFC3339))
	c.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": apis.DeletionReasonEmpty, "nodepool": np.Name})
	c.d.Metrics.Add(metrics.DisruptionActions, 1, metrics.Dimensions{"method": "emptiness", "action": "delete", "nodepool": np.Name})
	return c.markAndTerminate(ctx, cl, apis.DeletionReasonEmpty,
		fmt.Sprintf("empty for consolidateAfter %s", after), ActionEmpty)
}

// lazyView reads only what one claim needs.
type lazyView struct {
	c *Controller
}

func (v *lazyView) node(ctx context.Context, cl *apis.NodeClaim) (*corev1.Node, error) {
	return v.c.d.Cluster.ClaimNode(ctx, cl)
}

func (v *lazyView) pods(ctx context.Context, node string) ([]*corev1.Pod, error) {
	return v.c.d.Cluster.PodsOnNode(ctx, node)
}

func (v *lazyView) instance(ctx context.Context, id string) (nwaws.Instance, bool, error) {
	inst, err := v.c.d.Cloud.GetInstance(ctx, id)
	if errors.Is(err, nwaws.ErrInstanceNotFound) {
		return nwaws.Instance{}, true, nil
	}
	if err != nil {
		return nwaws.Instance{}, false, fmt.Errorf("describe instance %s: %w", id, err)
	}
	return inst, instanceGone(inst.State), nil
}

func instanceGone(state string) bool { return state == "terminated" || state == "shutting-down" }

func (v *lazyView) poolClaims(ctx context.Context, pool string) ([]*apis.NodeClaim, error) {
	all, err := v.c.d.Store.ListNodeClaims(ctx)
	if err != nil {
		return nil, err
	}
	var out []*apis.NodeClaim
	for _, cl := range all {
		if cl.NodePoolName() == pool {
			out = append(out, cl)
		}
	}
	return out, nil
}

func (v *lazyView) nodeReady(ctx context.Context, cl *apis.NodeClaim) bool {
	n, err := v.node(ctx, cl)
	return err == nil && n != nil && ready(n)
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
