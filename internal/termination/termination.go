// Package termination is the termination workflow of a NodeClaim marked for
// deletion (see apis.NodeClaim.MarkForDeletion for the mark): it taints the
// node karpenter.sh/disrupted:NoSchedule, evicts its pods through the
// Eviction API in Karpenter's priority order, deletes what is left once the
// claim's terminationGracePeriod has run out, waits for volumes to detach,
// terminates the instance, deletes the Node and tombstones the claim.
//
// The workflow is a sequence of Steps, never a blocking loop: each Step looks
// at the world (the Node, its pods and volume attachments, the claim) and does
// what is due, then either finishes or asks to be called again after a delay
// (the lifecycle function requeues the claim through SQS). Nothing is kept in
// memory between Steps, so a function killed anywhere resumes on the next one.
//
// Progress is also recorded on the claim as Karpenter v1's conditions
// (Drained, VolumesDetached, InstanceTerminating) for people and the CLI to
// read; the world stays the source of truth.
//
// # Safety rules
//
// Termination removes a node, so it keeps these rules (termination and
// lifecycle integration tests check them against a real API server):
//   - A node with non-daemon pods is drained before its instance goes: the
//     node is tainted karpenter.sh/disrupted, then pods are evicted through
//     the Eviction API, which honours PodDisruptionBudgets; a pod blocked by
//     a PDB stays. The only pods deleted rather than evicted are those still
//     there when the claim's terminationGracePeriod, the user's own bound,
//     has run out (Karpenter's behaviour).
//   - It terminates only the claim's own instance, through aws.Provider,
//     which refuses instances of another stack.
package termination

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
)

// NodeClaim conditions the workflow records (Karpenter v1's names).
const (
	ConditionDrained             = "Drained"
	ConditionVolumesDetached     = "VolumesDetached"
	ConditionInstanceTerminating = "InstanceTerminating"
)

// Event reasons.
const (
	ReasonDisrupting     = "Disrupting"
	ReasonEvicted        = "Evicted"
	ReasonFailedDraining = "FailedDraining"
	ReasonTerminating    = "Terminating"
)

// Backoff bounds of a drain that is waiting (Karpenter's eviction queue
// retries each pod from 100 ms up to 10 s).
const (
	MinRequeue = 100 * time.Millisecond
	MaxRequeue = 10 * time.Second
)

// Cluster is what the workflow needs of the API server (*kube.Client).
type Cluster interface {
	// PVCVolumeName is the PersistentVolume a claim is bound to ("" while
	// unbound); a missing claim wraps kube.ErrNotFound.
	PVCVolumeName(ctx context.Context, namespace, name string) (string, error)
	ClaimNode(ctx context.Context, cl *apis.NodeClaim) (*corev1.Node, error)
	UpdateNodeTaints(ctx context.Context, node string, mutate func([]corev1.Taint) ([]corev1.Taint, bool)) (*corev1.Node, error)
	PodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error)
	Evict(ctx context.Context, pod *corev1.Pod, o kube.EvictOptions) error
	DeletePod(ctx context.Context, pod *corev1.Pod, gracePeriodSeconds *int64) error
	// ReleaseNode takes nodewright's termination finalizer off the Node and
	// deletes it (kube.Client.ReleaseNode).
	ReleaseNode(ctx context.Context, name string, uid types.UID) error
	VolumeAttachmentsOnNode(ctx context.Context, node string) ([]*storagev1.VolumeAttachment, error)
	NodeEvent(ctx context.Context, n *corev1.Node, eventType, reason, format string, args ...any) error
	PodEvent(ctx context.Context, p *corev1.Pod, eventType, reason, format string, args ...any) error
}

// Cloud terminates instances (*aws.Provider: only this cluster's, and ids
// that are already gone count as done).
type Cloud interface {
	Terminate(ctx context.Context, ids ...string) error
	// InvisibleLongEnough says whether an instance Terminate did not find,
	// launched at launchedAt, can count as gone (nwaws.Provider's).
	InvisibleLongEnough(launchedAt, now time.Time) bool
}

// Store is what the workflow needs of internal/store (*store.Store).
type Store interface {
	GetNodeClaim(ctx context.Context, name string) (*apis.NodeClaim, error)
	MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error)
	DeleteNodeClaim(ctx context.Context, nc *apis.NodeClaim) error
}

// Deps are the workflow's adapters.
type Deps struct {
	Store   Store
	Cluster Cluster
	Cloud   Cloud
	Metrics *metrics.Recorder // optional
	Log     *slog.Logger      // optional
	Now     func() time.Time  // optional
	// EvictConcurrency bounds concurrent eviction requests (default 16).
	EvictConcurrency int
}

// Terminator runs termination Steps. Safe for concurrent use: Steps on the
// same claim run one at a time (a work-queue message and a schedule pass
// often arrive together), and a Step that finds the claim tombstoned by
// another process midway stops quietly with PhaseAlreadyDeleted.
type Terminator struct {
	d     Deps
	mu    sync.Mutex
	inUse map[string]*claimLock
}

// claimLock serializes the Steps of one claim; refs counts the Steps
// holding or waiting for it, so the entry goes when the last one is done.
type claimLock struct {
	mu   sync.Mutex
	refs int
}

// lock waits for the claim's other Steps in this process and returns the
// unlock.
func (t *Terminator) lock(name string) func() {
	t.mu.Lock()
	l := t.inUse[name]
	if l == nil {
		l = &claimLock{}
		t.inUse[name] = l
	}
	l.refs++
	t.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		t.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(t.inUse, name)
		}
		t.mu.Unlock()
	}
}

// New returns a Terminator.
func New(d Deps) (*Terminator, error) {
	if d.Store == nil || d.Cluster == nil || d.Cloud == nil {
		return nil, errors.New("termination: store, cluster and cloud are required")
	}
	d.Log, d.Now = basedeps.Logger(d.Log), basedeps.Clock(d.Now)
	if d.EvictConcurrency <= 0 {
		d.EvictConcurrency = 16
	}
	return &Terminator{d: d, inUse: map[string]*claimLock{}}, nil
}

// Phases a Step reports.
const (
	PhaseDraining = "Draining"
	PhaseVolumes  = "WaitingForVolumes"
	// PhaseInstanceNotVisible: the instance was launched too recently for
	// EC2's reads to show it, so it cannot be terminated yet.
	PhaseInstanceNotVisible = "WaitingForInstanceVisibility"
	PhaseTerminated         = "Terminated"
	PhaseAlreadyDeleted     = "AlreadyDeleted"
)

// Result says what a Step did and whether the workflow is finished.
type Result struct {
	// Done: the claim is tombstoned (or was already gone).
	Done bool
	// RequeueAfter is when to call Step again (when not Done).
	RequeueAfter time.Duration
	Phase        string
	// Node is the claim's Node name ("" when it has none).
	Node string
	// Waiting counts the pods that still hold the drain; Evicted the
	// evictions the API server accepted in this step, Blocked those a
	// PodDisruptionBudget refused, Deleted the pods deleted after the
	// termination grace period.
	Waiting, Evicted, Blocked, Deleted int
}

// DisruptedTaint is karpenter.sh/disrupted:NoSchedule.
func DisruptedTaint() corev1.Taint {
	return corev1.Taint{Key: apis.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}
}
