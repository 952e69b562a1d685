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
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
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

// Well-known names the drain looks at.
const (
	mirrorPodAnnotation = "kubernetes.io/config.mirror"
	// stuckTerminating: a pod still terminating this long after its own
	// deletion deadline has a dead kubelet; waiting for it would wait forever.
	stuckTerminating = time.Minute
	// defaultPodGrace is Kubernetes' default terminationGracePeriodSeconds.
	defaultPodGrace = 30 * time.Second
)

// Backoff bounds of a drain that is waiting (Karpenter's eviction queue
// retries each pod from 100 ms up to 10 s).
const (
	MinRequeue = 100 * time.Millisecond
	MaxRequeue = 10 * time.Second
)

// Cluster is what the workflow needs of the API server (*kube.Client).
type Cluster interface {
	Clientset() kubernetes.Interface
	ClaimNode(ctx context.Context, cl *apis.NodeClaim) (*corev1.Node, error)
	UpdateNodeTaints(ctx context.Context, node string, mutate func([]corev1.Taint) ([]corev1.Taint, bool)) (*corev1.Node, error)
	PodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error)
	Evict(ctx context.Context, pod *corev1.Pod, o kube.EvictOptions) error
	DeletePod(ctx context.Context, pod *corev1.Pod, gracePeriodSeconds *int64) error
	DeleteNode(ctx context.Context, name string, uid types.UID) error
	VolumeAttachmentsOnNode(ctx context.Context, node string) ([]*storagev1.VolumeAttachment, error)
	NodeEvent(ctx context.Context, n *corev1.Node, eventType, reason, format string, args ...any) error
	PodEvent(ctx context.Context, p *corev1.Pod, eventType, reason, format string, args ...any) error
}

// Cloud terminates instances (*aws.Provider: only this cluster's, and ids
// that are already gone count as done).
type Cloud interface {
	Terminate(ctx context.Context, ids ...string) error
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
	PhaseDraining       = "Draining"
	PhaseVolumes        = "WaitingForVolumes"
	PhaseTerminated     = "Terminated"
	PhaseAlreadyDeleted = "AlreadyDeleted"
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

// Step advances the termination of claim (which must be marked for
// deletion). It re-reads the claim, so a stale copy is fine.
func (t *Terminator) Step(ctx context.Context, claim *apis.NodeClaim) (Result, error) {
	defer t.lock(claim.Name)()
	cl, err := t.d.Store.GetNodeClaim(ctx, claim.Name)
	if errors.Is(err, store.ErrNotFound) {
		return Result{Done: true, Phase: PhaseAlreadyDeleted}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("terminate nodeclaim %s: read: %w", claim.Name, err)
	}
	if !cl.Deleting() {
		return Result{}, fmt.Errorf("terminate nodeclaim %s: not marked for deletion", cl.Name)
	}
	now := t.d.Now()
	log := t.d.Log.With("nodeclaim", cl.Name, "nodepool", cl.NodePoolName(), "instance-id", cl.Status.InstanceID,
		"reason", cl.DeletionReason())

	node, err := t.d.Cluster.ClaimNode(ctx, cl)
	if err != nil {
		return Result{}, fmt.Errorf("terminate nodeclaim %s: %w", cl.Name, err)
	}
	res := Result{}
	if node != nil {
		res.Node = node.Name
		log = log.With("node", node.Name)
		if !hasDisruptedTaint(node) {
			added, err := t.taint(ctx, node.Name)
			switch {
			case errors.Is(err, kube.ErrNotFound) || apierrors.IsNotFound(err):
				node = nil
			case err != nil:
				return Result{}, fmt.Errorf("terminate nodeclaim %s: taint node %s: %w", cl.Name, node.Name, err)
			case added:
				log.InfoContext(ctx, "node tainted for termination", "taint", apis.DisruptedTaintKey+":NoSchedule")
				t.event(ctx, node, kube.EventNormal, ReasonDisrupting, "Disrupting Node: %s", reasonText(cl))
			}
		}
	}
	if node != nil {
		drained, err := t.drain(ctx, log, cl, node, now, &res)
		if err != nil {
			return Result{}, fmt.Errorf("terminate nodeclaim %s: drain node %s: %w", cl.Name, node.Name, err)
		}
		if !drained {
			res.Phase = PhaseDraining
			res.RequeueAfter = backoff(cl, now)
			msg := fmt.Sprintf("%d pods waiting to be evicted", res.Waiting)
			if res.Blocked > 0 {
				msg += fmt.Sprintf(" (%d blocked by PodDisruptionBudgets)", res.Blocked)
			}
			if t.setCondition(ctx, log, cl, ConditionDrained, metav1.ConditionFalse, "Draining", msg, now) {
				return alreadyDeleted(res), nil
			}
			if res.Blocked > 0 {
				t.event(ctx, node, kube.EventWarning, ReasonFailedDraining, "Failed to drain node, %s", msg)
			}
			return res, nil
		}
		if t.setCondition(ctx, log, cl, ConditionDrained, metav1.ConditionTrue, "Drained", "", now) {
			return alreadyDeleted(res), nil
		}

		pending, err := t.attachedVolumes(ctx, node)
		if err != nil {
			return Result{}, fmt.Errorf("terminate nodeclaim %s: %w", cl.Name, err)
		}
		deadline, hasDeadline := cl.TerminationDeadline()
		switch {
		case pending > 0 && !(hasDeadline && !now.Before(deadline)):
			res.Phase = PhaseVolumes
			res.RequeueAfter = backoff(cl, now)
			if t.setCondition(ctx, log, cl, ConditionVolumesDetached, metav1.ConditionFalse, "AwaitingVolumeDetachment",
				fmt.Sprintf("%d VolumeAttachments still on the node", pending), now) {
				return alreadyDeleted(res), nil
			}
			return res, nil
		case pending > 0:
			log.WarnContext(ctx, "terminationGracePeriod elapsed with volumes still attached; terminating anyway", "volumeattachments", pending)
			if t.setCondition(ctx, log, cl, ConditionVolumesDetached, metav1.ConditionFalse, "TerminationGracePeriodElapsed",
				fmt.Sprintf("%d VolumeAttachments left behind", pending), now) {
				return alreadyDeleted(res), nil
			}
		default:
			if t.setCondition(ctx, log, cl, ConditionVolumesDetached, metav1.ConditionTrue, "VolumesDetached", "", now) {
				return alreadyDeleted(res), nil
			}
		}
	}

	if id := cl.Status.InstanceID; id != "" && !cl.IsTrue(ConditionInstanceTerminating) {
		err := t.d.Cloud.Terminate(ctx, id)
		switch {
		case errors.Is(err, nwaws.ErrNotOwned):
			// Never ours to terminate: nothing to wait for, but say so loudly.
			log.ErrorContext(ctx, "instance is not owned by this cluster; not terminating it", "error", err)
		case err != nil:
			t.metric(metrics.CloudProviderErrors, metrics.Dimensions{"method": "Terminate"})
			return Result{}, fmt.Errorf("terminate nodeclaim %s: terminate instance %s: %w", cl.Name, id, err)
		default:
			log.InfoContext(ctx, "instance terminating")
		}
		if t.setCondition(ctx, log, cl, ConditionInstanceTerminating, metav1.ConditionTrue, "InstanceTerminating", "instance "+id, now) {
			return alreadyDeleted(res), nil
		}
		if node != nil {
			t.event(ctx, node, kube.EventNormal, ReasonTerminating, "Terminating instance %s: %s", id, reasonText(cl))
		}
	}

	if node != nil {
		if err := t.d.Cluster.DeleteNode(ctx, node.Name, node.UID); err != nil {
			return Result{}, fmt.Errorf("terminate nodeclaim %s: delete node %s: %w", cl.Name, node.Name, err)
		}
		log.InfoContext(ctx, "node deleted")
	}
	deleted, err := t.tombstone(ctx, cl.Name)
	if err != nil {
		return Result{}, err
	}
	if !deleted {
		log.DebugContext(ctx, "nodeclaim already tombstoned by another termination step")
		return alreadyDeleted(res), nil
	}
	t.metric(metrics.NodeClaimsTerminated, metrics.Dimensions{"nodepool": cl.NodePoolName(), "reason": cl.DeletionReason()})
	log.InfoContext(ctx, "nodeclaim terminated", "since-mark", now.Sub(cl.DeletionTimestamp.Time).Round(time.Millisecond).String())
	res.Done, res.Phase = true, PhaseTerminated
	return res, nil
}

// DisruptedTaint is karpenter.sh/disrupted:NoSchedule.
func DisruptedTaint() corev1.Taint {
	return corev1.Taint{Key: apis.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}
}

// backoff is the delay before the next Step of a waiting drain: the time
// since the deletion mark, bounded to [MinRequeue, MaxRequeue]. That grows
// like Karpenter's per-pod exponential backoff (100 ms doubling to 10 s)
// without keeping a retry counter anywhere: the claim's mark is the clock.
func backoff(cl *apis.NodeClaim, now time.Time) time.Duration {
	d := now.Sub(cl.DeletionTimestamp.Time)
	return min(max(d, MinRequeue), MaxRequeue)
}

func reasonText(cl *apis.NodeClaim) string {
	if r := cl.DeletionReason(); r != "" {
		return r
	}
	return "marked for deletion"
}

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, tt := range n.Spec.Taints {
		if tt.Key == apis.DisruptedTaintKey && tt.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}

// drain does one round of the drain and reports whether it is complete.
func (t *Terminator) drain(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, node *corev1.Node, now time.Time, res *Result) (bool, error) {
	pods, err := t.d.Cluster.PodsOnNode(ctx, node.Name)
	if err != nil {
		return false, err
	}
	waiting := WaitingPods(pods, now)
	res.Waiting = len(waiting)
	if len(waiting) == 0 {
		return true, nil
	}
	// Past (or near) the grace period: delete pods so they are gone by the
	// deadline, PDBs and do-not-disrupt notwithstanding (Karpenter's
	// DeleteExpiringPods).
	deadline, hasDeadline := cl.TerminationDeadline()
	if hasDeadline {
		for _, p := range waiting {
			grace, due := ForcedDeletion(p, deadline, now)
			if !due {
				continue
			}
			if err := t.d.Cluster.DeletePod(ctx, p, &grace); err != nil {
				return false, fmt.Errorf("delete pod %s/%s after terminationGracePeriod: %w", p.Namespace, p.Name, err)
			}
			res.Deleted++
			log.InfoContext(ctx, "pod deleted: terminationGracePeriod of the nodeclaim elapsed", "pod", p.Namespace+"/"+p.Name, "grace-seconds", grace)
			t.podEvent(ctx, p, kube.EventWarning, ReasonEvicted, "Deleted pod: the NodeClaim's terminationGracePeriod elapsed")
		}
	}
	group := NextEvictionGroup(waiting)
	if len(group) == 0 {
		return false, nil
	}
	t.evict(ctx, log, group, res)
	return false, nil
}

// evict sends the group's evictions concurrently.
func (t *Terminator) evict(ctx context.Context, log *slog.Logger, group []*corev1.Pod, res *Result) {
	sem := make(chan struct{}, t.d.EvictConcurrency)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range group {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			err := t.d.Cluster.Evict(ctx, p, kube.EvictOptions{})
			code := "200"
			mu.Lock()
			switch {
			case err == nil:
				res.Evicted++
			case errors.Is(err, kube.ErrPDBBlocked):
				res.Blocked++
				code = "429"
			default:
				code = "error"
			}
			mu.Unlock()
			t.metric(metrics.EvictionRequests, metrics.Dimensions{"code": code})
			pod := p.Namespace + "/" + p.Name
			switch {
			case err == nil:
				log.InfoContext(ctx, "pod evicted", "pod", pod)
				t.podEvent(ctx, p, kube.EventNormal, ReasonEvicted, "Evicted pod: its node is being terminated")
			case errors.Is(err, kube.ErrPDBBlocked):
				log.InfoContext(ctx, "eviction blocked by PodDisruptionBudget", "pod", pod, "error", err)
			default:
				log.WarnContext(ctx, "eviction failed", "pod", pod, "error", err)
			}
		})
	}
	wg.Wait()
}

// WaitingPods are the pods on a draining node that the drain waits for
// (Karpenter's rules): not terminal, not mirror/static pods, not pods that
// tolerate karpenter.sh/disrupted:NoSchedule (they would come straight back,
// and die with the node), and not pods stuck terminating (a dead kubelet
// never confirms them). Pods already terminating are still waited for.
func WaitingPods(pods []*corev1.Pod, now time.Time) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		switch {
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		case isMirrorOrStatic(p):
		case ToleratesDisrupted(p):
		case p.DeletionTimestamp != nil && now.After(p.DeletionTimestamp.Add(stuckTerminating)):
		default:
			out = append(out, p)
		}
	}
	return out
}

// Evictable reports whether the drain should call the Eviction API for a
// waiting pod now: not already terminating, and not annotated
// karpenter.sh/do-not-disrupt=true (those only go when the grace period
// forces them).
func Evictable(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Annotations[apis.DoNotDisruptAnnotKey] != "true"
}

// Priority groups of the drain, evicted in this order; a group starts only
// once every pod of the earlier ones is terminating (graceful node shutdown's
// order).
const (
	GroupNonCritical = iota
	GroupNonCriticalDaemon
	GroupCritical
	GroupCriticalDaemon
)

// EvictionGroup classifies a pod into its priority group.
func EvictionGroup(p *corev1.Pod) int {
	critical := p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical"
	daemon := ownedBy(p, "DaemonSet")
	switch {
	case critical && daemon:
		return GroupCriticalDaemon
	case critical:
		return GroupCritical
	case daemon:
		return GroupNonCriticalDaemon
	default:
		return GroupNonCritical
	}
}

// NextEvictionGroup returns the evictable pods of the first group that still
// has any, sorted by namespace/name.
func NextEvictionGroup(waiting []*corev1.Pod) []*corev1.Pod {
	var groups [4][]*corev1.Pod
	for _, p := range waiting {
		if Evictable(p) {
			g := EvictionGroup(p)
			groups[g] = append(groups[g], p)
		}
	}
	for _, g := range groups {
		if len(g) > 0 {
			sort.Slice(g, func(i, j int) bool {
				if g[i].Namespace != g[j].Namespace {
					return g[i].Namespace < g[j].Namespace
				}
				return g[i].Name < g[j].Name
			})
			return g
		}
	}
	return nil
}

// ForcedDeletion reports whether a waiting pod must be deleted now so that
// it is gone by the claim's deadline, and with which grace period: a pod is
// deleted once its own terminationGracePeriodSeconds no longer fits before
// the deadline, with the time that is left (0 past the deadline). A pod
// already terminating is deleted again only if its own deletion would end
// after the deadline.
func ForcedDeletion(p *corev1.Pod, deadline, now time.Time) (graceSeconds int64, due bool) {
	podGrace := defaultPodGrace
	if p.Spec.TerminationGracePeriodSeconds != nil {
		podGrace = time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	if now.Add(podGrace).Before(deadline) {
		return 0, false
	}
	left := max(deadline.Sub(now), 0)
	if p.DeletionTimestamp != nil && !p.DeletionTimestamp.After(deadline) {
		return 0, false
	}
	return int64(left / time.Second), true
}

// ToleratesDisrupted reports whether a pod tolerates
// karpenter.sh/disrupted:NoSchedule.
func ToleratesDisrupted(p *corev1.Pod) bool {
	for _, tol := range p.Spec.Tolerations {
		if tol.Effect != "" && tol.Effect != corev1.TaintEffectNoSchedule {
			continue
		}
		switch {
		case tol.Key == "" && tol.Operator == corev1.TolerationOpExists:
			return true // tolerates everything
		case tol.Key != apis.DisruptedTaintKey:
		case tol.Operator == corev1.TolerationOpExists:
			return true
		case tol.Operator == "" || tol.Operator == corev1.TolerationOpEqual:
			if tol.Value == "" { // the taint has no value
				return true
			}
		}
	}
	return false
}

func isMirrorOrStatic(p *corev1.Pod) bool {
	if _, ok := p.Annotations[mirrorPodAnnotation]; ok {
		return true
	}
	return ownedBy(p, "Node")
}

func ownedBy(p *corev1.Pod, kind string) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == kind {
			return true
		}
	}
	return false
}

// attachedVolumes counts the node's VolumeAttachments the drain must wait
// for: those of volumes used by pods that stay on the node (tolerating or
// static pods, which are never evicted) are ignored, as Karpenter does.
func (t *Terminator) attachedVolumes(ctx context.Context, node *corev1.Node) (int, error) {
	vas, err := t.d.Cluster.VolumeAttachmentsOnNode(ctx, node.Name)
	if err != nil {
		return 0, fmt.Errorf("volume attachments of node %s: %w", node.Name, err)
	}
	if len(vas) == 0 {
		return 0, nil
	}
	pods, err := t.d.Cluster.PodsOnNode(ctx, node.Name)
	if err != nil {
		return 0, fmt.Errorf("pods of node %s: %w", node.Name, err)
	}
	staying := map[string]bool{}
	for _, p := range pods {
		if !ToleratesDisrupted(p) && !isMirrorOrStatic(p) {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			pvc, err := t.d.Cluster.Clientset().CoreV1().PersistentVolumeClaims(p.Namespace).Get(ctx, v.PersistentVolumeClaim.ClaimName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return 0, fmt.Errorf("get pvc %s/%s: %w", p.Namespace, v.PersistentVolumeClaim.ClaimName, err)
			}
			if pvc.Spec.VolumeName != "" {
				staying[pvc.Spec.VolumeName] = true
			}
		}
	}
	n := 0
	for _, va := range vas {
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil && staying[*pv] {
			continue
		}
		n++
	}
	return n, nil
}

// tombstone deletes the claim's latest version and reports whether this
// call did (false: another Step got there first).
func (t *Terminator) tombstone(ctx context.Context, name string) (bool, error) {
	for attempt := 0; ; attempt++ {
		cur, err := t.d.Store.GetNodeClaim(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("tombstone nodeclaim %s: %w", name, err)
		}
		err = t.d.Store.DeleteNodeClaim(ctx, cur)
		if err == nil {
			return true, nil
		}
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= 7 {
			return false, fmt.Errorf("tombstone nodeclaim %s: %w", name, err)
		}
	}
}

// alreadyDeleted ends a Step whose claim another Step (another process)
// tombstoned meanwhile: the workflow is done, and not this Step's to count.
func alreadyDeleted(res Result) Result {
	res.Done, res.Phase, res.RequeueAfter = true, PhaseAlreadyDeleted, 0
	return res
}

// setCondition records progress on the claim when it changes and reports
// whether the claim is gone (tombstoned by a concurrent Step elsewhere: the
// caller stops, the work is done). Other failures are logged, not returned:
// the condition is informational and the next Step derives the same state
// from the world.
func (t *Terminator) setCondition(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, typ string, status metav1.ConditionStatus, reason, msg string, now time.Time) (gone bool) {
	if c := cl.Condition(typ); c != nil && c.Status == status && c.Reason == reason {
		return false
	}
	updated, err := t.d.Store.MutateNodeClaim(ctx, cl.Name, func(c *apis.NodeClaim) error {
		c.SetCondition(typ, status, reason, msg, metav1.NewTime(now))
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		log.DebugContext(ctx, "nodeclaim tombstoned by another termination step meanwhile", "condition", typ)
		return true
	}
	if err != nil {
		log.WarnContext(ctx, "recording termination progress", "condition", typ, "error", err)
		return false
	}
	*cl = *updated
	return false
}

func (t *Terminator) event(ctx context.Context, n *corev1.Node, typ, reason, format string, args ...any) {
	if err := t.d.Cluster.NodeEvent(ctx, n, typ, reason, format, args...); err != nil {
		t.d.Log.DebugContext(ctx, "node event", "node", n.Name, "reason", reason, "error", err)
	}
}

func (t *Terminator) podEvent(ctx context.Context, p *corev1.Pod, typ, reason, format string, args ...any) {
	if err := t.d.Cluster.PodEvent(ctx, p, typ, reason, format, args...); err != nil {
		t.d.Log.DebugContext(ctx, "pod event", "pod", p.Namespace+"/"+p.Name, "reason", reason, "error", err)
	}
}

func (t *Terminator) metric(name string, dims metrics.Dimensions) {
	if t.d.Metrics != nil {
		t.d.Metrics.Add(name, 1, dims)
	}
}

// Marker is the store call Mark needs (*store.Store).
type Marker interface {
	MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error)
}

// Mark marks the named claim for deletion in one conditional write (see
// apis.NodeClaim.MarkForDeletion): reason is an apis.DeletionReason* value,
// message says why in words. newly is false when the claim was already
// marked; the first mark (time and reason) stands. A missing claim gives
// an error wrapping store.ErrNotFound. Callers then send a lifecycle work
// message for the claim so its drain starts at once.
func Mark(ctx context.Context, st Marker, name, reason, message string, now time.Time) (claim *apis.NodeClaim, newly bool, err error) {
	claim, err = st.MutateNodeClaim(ctx, name, func(c *apis.NodeClaim) error {
		newly = c.MarkForDeletion(reason, message, metav1.NewTime(now))
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("mark nodeclaim %s for deletion (%s): %w", name, reason, err)
	}
	return claim, newly, nil
}

// taint puts the disrupted taint on a node and reports whether this call
// added it: when two functions terminate the same claim at once (the
// interruption handler and the lifecycle's pass), only the one whose write
// landed logs and emits the Disrupting event.
func (t *Terminator) taint(ctx context.Context, node string) (added bool, err error) {
	want := DisruptedTaint()
	_, err = t.d.Cluster.UpdateNodeTaints(ctx, node, func(ts []corev1.Taint) ([]corev1.Taint, bool) {
		added = true
		for _, cur := range ts {
			if cur.Key == want.Key && cur.Effect == want.Effect {
				added = false // another writer got there first (the retry re-reads)
				return ts, false
			}
		}
		return append(ts, want), true
	})
	return added && err == nil, err
}
