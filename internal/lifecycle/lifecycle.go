// Package lifecycle is the lifecycle function's controller: it moves each
// NodeClaim from Launched to Registered and Initialized, times out claims
// that never launch or register, marks expired claims, claims whose NodePool
// left the configuration (a tenth of the pool at a time, as Karpenter deletes
// a deleted NodePool's NodeClaims) and empty nodes of WhenEmpty pools (static
// pools' never) for deletion, runs the termination workflow
// (internal/termination) on claims marked for deletion, and garbage
// collects both ways (instances without claims, claims without instances,
// Nodes of terminated instances). A reserved claim whose instance has left
// its capacity reservation (it expired or was cancelled) is relabelled
// on-demand, claim and Node, and a claim whose capacity block ends within
// 40 minutes is drained as interrupted, as Karpenter does.
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
// # Where things are
//
// One claim's reconcile is a state machine: claimPhases (this file) runs
// small phases in order, each in the file named for it: vanished.go,
// terminate.go, liveness.go, expiry.go, registration.go, initialization.go,
// poolremoved.go and emptynodes.go (emptiness.go holds the rules it
// applies). view.go is what a reconcile reads of the world; pass.go and
// gc.go are the scheduled pass and its garbage collection; chain.go and
// handler.go the work-message chains and the Lambda handler.
// statemachine_test.go tests the phases in memory; the other _test.go files
// run against a real API server, dynalite and the AWS simulator over one
// harness (harness_test.go, world_test.go).
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
//     raises metrics.GCRefused. Emptiness goes through the NodePools'
//     disruption budgets, a removed NodePool's drain through
//     RemovedPoolBudget.
//   - A claim record it cannot decode is unknown, never absent: its instance
//     is kept.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// Deletion reasons the lifecycle gives besides apis.DeletionReason*.
const (
	ReasonLaunchTimeout       = "LaunchTimeout"
	ReasonRegistrationTimeout = "RegistrationTimeout"
	ReasonNodeDeleted         = "NodeDeleted"
	// ReasonUnhealthy: node repair replaced a node unhealthy too long.
	ReasonUnhealthy = "Unhealthy"
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
	PatchNodeAnnotations(ctx context.Context, node string, set map[string]string, remove []string) (*corev1.Node, error)
	AddNodeFinalizer(ctx context.Context, node, finalizer string) (*corev1.Node, error)
	UpdateNodeTaints(ctx context.Context, node string, mutate func([]corev1.Taint) ([]corev1.Taint, bool)) (*corev1.Node, error)
}

// Cloud is what the lifecycle needs of EC2 (*aws.Provider).
type Cloud interface {
	termination.Cloud
	ListClusterInstances(ctx context.Context) ([]nwaws.Instance, error)
	GetInstance(ctx context.Context, id string) (nwaws.Instance, error)
	// Owns reports whether this stack launched the instance.
	Owns(i nwaws.Instance) bool
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
	// Provision nudges the provisioner (the provision queue); nil leaves
	// a static NodePool's replacements to the provisioner's schedule.
	Provision func(ctx context.Context, msg queue.Message, delay time.Duration) error
	Metrics   *metrics.Recorder
	Log       *slog.Logger
	Now       func() time.Time
	// Holder names this invocation for leases (default: a constant).
	Holder   string
	Settings Settings
	// ImpairedInstances lists the instances failing an EC2 status check
	// and since when (Provider.ImpairedInstances); node repair replaces
	// them too. Nil: repair reads node conditions only.
	ImpairedInstances func(ctx context.Context) (map[string]time.Time, error)
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
	// NodeRepair turns node repair on (repair.go; Karpenter's feature gate
	// of that name, off by default).
	NodeRepair bool
}

func (s *Settings) defaults() {
	basedeps.Default(&s.LaunchTimeout, 5*time.Minute)
	basedeps.Default(&s.RegistrationTTL, 15*time.Minute)
	basedeps.Default(&s.GCGrace, 30*time.Second)
	basedeps.Default(&s.Poll, 2*time.Second)
	basedeps.Default(&s.GCMaxShare, 0.10)
	basedeps.Default(&s.GCMaxInstances, 5)
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
	ActionRepaired     = "repaired"
	ActionNone         = ""
	ActionNotFound     = "not-found"
	ActionBudgetBlocks = "budget-blocked"
	// ActionCapacityBlockEnding: the claim's capacity block ends soon.
	ActionCapacityBlockEnding = "capacity-block-ending"
)

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

// claimState is what one reconcile knows about its claim as the phases
// hand it on: the claim as last written, its Node once observed, and the
// outcome so far.
type claimState struct {
	cl  *apis.NodeClaim
	v   view
	log *slog.Logger
	// now is the reconcile's clock reading; launchedAt is zero until the
	// claim has launched.
	now        time.Time
	launched   bool
	launchedAt time.Time
	node       *corev1.Node
	out        Outcome
}

// finish settles the reconcile with a phase's outcome.
func (s *claimState) finish(out Outcome, err error) (bool, error) {
	s.out = out
	return true, err
}

// claimPhase is one step of the claim's state machine: it settles the
// reconcile (done, or an error) or hands the claim on to the next phase.
type claimPhase func(c *Controller, ctx context.Context, s *claimState) (done bool, err error)

// claimPhases are the state machine in order. The first that applies to
// the claim decides what this reconcile does.
var claimPhases = []claimPhase{
	(*Controller).collectVanished,     // vanished.go: the instance is gone
	(*Controller).terminateMarked,     // terminate.go: marked for deletion
	(*Controller).launchLiveness,      // liveness.go: not launched (yet)
	(*Controller).expiry,              // expiry.go: past expireAfter
	(*Controller).capacityBlockEnding, // reservation.go: its capacity block ends soon
	(*Controller).observeNode,         // registration.go
	(*Controller).nodeDeleting,        // liveness.go: someone deletes the Node
	(*Controller).keepFinalizer,       // registration.go: Nodes registered without it
	(*Controller).registration,        // registration.go (and its TTL in liveness.go)
	(*Controller).nodeLiveness,        // liveness.go: the Node was deleted
	(*Controller).reservationEnded,    // reservation.go: out of its capacity reservation
	(*Controller).repair,              // repair.go: unhealthy too long
	(*Controller).initialization,      // initialization.go
	(*Controller).poolRemoved,         // poolremoved.go: its NodePool left the configuration
	(*Controller).emptiness,           // emptynodes.go: always settles
}

// reconcile runs one claim through claimPhases.
func (c *Controller) reconcile(ctx context.Context, cl *apis.NodeClaim, v view) (Outcome, error) {
	s := &claimState{cl: cl, v: v, now: c.d.Now(), out: Outcome{Claim: cl.Name},
		log: c.log.With("nodeclaim", cl.Name, "nodepool", cl.NodePoolName(), "instance-id", cl.Status.InstanceID)}
	if s.launched = cl.IsTrue(apis.ConditionLaunched); s.launched {
		s.launchedAt = cl.Condition(apis.ConditionLaunched).LastTransitionTime.Time
	}
	for _, phase := range claimPhases {
		if done, err := phase(c, ctx, s); done || err != nil {
			return s.out, err
		}
	}
	return s.out, nil
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
