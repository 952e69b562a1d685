package termination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
)

// stepState is what one Step learns as its phases run: the claim as last
// written, its Node (nil once it has none or it vanished), the Step's clock
// reading and logger, and the Result being built.
type stepState struct {
	cl   *apis.NodeClaim
	node *corev1.Node
	now  time.Time
	log  *slog.Logger
	res  Result
}

// phase is one named part of a Step. It returns stop when the Step ends
// here with s.res (waiting, or the claim already gone), and an error when
// the Step fails (then the Result is empty).
type phase func(ctx context.Context, s *stepState) (stop bool, err error)

// Step advances the termination of claim (which must be marked for
// deletion). It re-reads the claim, so a stale copy is fine. The phases run
// in this order, each doing only what the world still needs: read the
// claim, find its Node, taint it, drain it (forced deletions past the
// terminationGracePeriod, then evictions), wait for its volumes to detach,
// terminate the instance, delete the Node and tombstone the claim.
func (t *Terminator) Step(ctx context.Context, claim *apis.NodeClaim) (Result, error) {
	defer t.lock(claim.Name)()
	s := &stepState{cl: claim}
	for _, p := range []phase{
		t.readClaim, t.findNode, t.taintNode, t.drainNode, t.awaitVolumes,
		t.terminateInstance, t.deleteNode, t.tombstoneClaim,
	} {
		stop, err := p(ctx, s)
		if err != nil {
			return Result{}, err
		}
		if stop {
			break
		}
	}
	return s.res, nil
}

// readClaim re-reads the claim; a claim already tombstoned ends the Step
// as done.
func (t *Terminator) readClaim(ctx context.Context, s *stepState) (bool, error) {
	cl, err := t.d.Store.GetNodeClaim(ctx, s.cl.Name)
	if errors.Is(err, store.ErrNotFound) {
		s.res = Result{Done: true, Phase: PhaseAlreadyDeleted}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("terminate nodeclaim %s: read: %w", s.cl.Name, err)
	}
	if !cl.Deleting() {
		return false, fmt.Errorf("terminate nodeclaim %s: not marked for deletion", cl.Name)
	}
	s.cl, s.now = cl, t.d.Now()
	s.log = t.d.Log.With("nodeclaim", cl.Name, "nodepool", cl.NodePoolName(), "instance-id", cl.Status.InstanceID,
		"reason", cl.DeletionReason())
	return false, nil
}

// findNode looks up the claim's Node (none: the node phases are skipped).
func (t *Terminator) findNode(ctx context.Context, s *stepState) (bool, error) {
	node, err := t.d.Cluster.ClaimNode(ctx, s.cl)
	if err != nil {
		return false, fmt.Errorf("terminate nodeclaim %s: %w", s.cl.Name, err)
	}
	if node != nil {
		s.node, s.res.Node = node, node.Name
		s.log = s.log.With("node", node.Name)
	}
	return false, nil
}

// taintNode puts karpenter.sh/disrupted:NoSchedule on the node; a node
// deleted meanwhile is treated as none.
func (t *Terminator) taintNode(ctx context.Context, s *stepState) (bool, error) {
	if s.node == nil || HasDisruptedTaint(s.node) {
		return false, nil
	}
	added, err := t.taint(ctx, s.node.Name)
	switch {
	case errors.Is(err, kube.ErrNotFound):
		s.node = nil
	case err != nil:
		return false, fmt.Errorf("terminate nodeclaim %s: taint node %s: %w", s.cl.Name, s.node.Name, err)
	case added:
		s.log.InfoContext(ctx, "node tainted for termination", "taint", apis.DisruptedTaintKey+":NoSchedule")
		t.event(ctx, s.node, kube.EventNormal, ReasonDisrupting, "Disrupting Node: %s", reasonText(s.cl))
	}
	return false, nil
}

// drainNode does one round of the drain; while pods remain the Step ends
// waiting, with the Drained condition saying how many.
func (t *Terminator) drainNode(ctx context.Context, s *stepState) (bool, error) {
	if s.node == nil {
		return false, nil
	}
	drained, err := t.drain(ctx, s)
	if err != nil {
		return false, fmt.Errorf("terminate nodeclaim %s: drain node %s: %w", s.cl.Name, s.node.Name, err)
	}
	if drained {
		return t.record(ctx, s, ConditionDrained, metav1.ConditionTrue, "Drained", ""), nil
	}
	s.res.Phase = PhaseDraining
	s.res.RequeueAfter = backoff(s.cl, s.now)
	msg := fmt.Sprintf("%d pods waiting to be evicted", s.res.Waiting)
	if s.res.Blocked > 0 {
		msg += fmt.Sprintf(" (%d blocked by PodDisruptionBudgets)", s.res.Blocked)
	}
	if t.record(ctx, s, ConditionDrained, metav1.ConditionFalse, "Draining", msg) {
		return true, nil
	}
	if s.res.Blocked > 0 {
		t.event(ctx, s.node, kube.EventWarning, ReasonFailedDraining, "Failed to drain node, %s", msg)
	}
	return true, nil
}

// awaitVolumes waits for the drained node's VolumeAttachments to go, until
// the claim's terminationGracePeriod runs out.
func (t *Terminator) awaitVolumes(ctx context.Context, s *stepState) (bool, error) {
	if s.node == nil {
		return false, nil
	}
	pending, err := t.attachedVolumes(ctx, s.node)
	if err != nil {
		return false, fmt.Errorf("terminate nodeclaim %s: %w", s.cl.Name, err)
	}
	deadline, hasDeadline := s.cl.TerminationDeadline()
	switch {
	case pending > 0 && (!hasDeadline || s.now.Before(deadline)):
		s.res.Phase = PhaseVolumes
		s.res.RequeueAfter = backoff(s.cl, s.now)
		t.record(ctx, s, ConditionVolumesDetached, metav1.ConditionFalse, "AwaitingVolumeDetachment",
			fmt.Sprintf("%d VolumeAttachments still on the node", pending))
		return true, nil
	case pending > 0:
		s.log.WarnContext(ctx, "terminationGracePeriod elapsed with volumes still attached; terminating anyway", "volumeattachments", pending)
		return t.record(ctx, s, ConditionVolumesDetached, metav1.ConditionFalse, "TerminationGracePeriodElapsed",
			fmt.Sprintf("%d VolumeAttachments left behind", pending)), nil
	default:
		return t.record(ctx, s, ConditionVolumesDetached, metav1.ConditionTrue, "VolumesDetached", ""), nil
	}
}

// terminateInstance terminates the claim's instance once (the
// InstanceTerminating condition remembers it was asked).
func (t *Terminator) terminateInstance(ctx context.Context, s *stepState) (bool, error) {
	id := s.cl.Status.InstanceID
	if id == "" || s.cl.IsTrue(ConditionInstanceTerminating) {
		return false, nil
	}
	err := t.d.Cloud.Terminate(ctx, id)
	switch {
	case errors.Is(err, nwaws.ErrNotOwned):
		// Never ours to terminate: nothing to wait for, but say so loudly.
		s.log.ErrorContext(ctx, "instance is not owned by this cluster; not terminating it", "error", err)
	case errors.Is(err, nwaws.ErrInstanceNotVisible) && !t.d.Cloud.InvisibleLongEnough(launchedAt(s.cl), s.now):
		// Launched moments ago: EC2 will show it shortly, and counting it
		// as gone would leave it running with no claim.
		s.log.InfoContext(ctx, "instance not visible yet; terminating it once EC2 shows it")
		s.res.Phase, s.res.RequeueAfter = PhaseInstanceNotVisible, backoff(s.cl, s.now)
		return true, nil
	case errors.Is(err, nwaws.ErrInstanceNotVisible):
		s.log.InfoContext(ctx, "instance already gone")
	case err != nil:
		t.metric(metrics.CloudProviderErrors, metrics.Dimensions{"method": "Terminate"})
		return false, fmt.Errorf("terminate nodeclaim %s: terminate instance %s: %w", s.cl.Name, id, err)
	default:
		s.log.InfoContext(ctx, "instance terminating")
	}
	if t.record(ctx, s, ConditionInstanceTerminating, metav1.ConditionTrue, "InstanceTerminating", "instance "+id) {
		return true, nil
	}
	if s.node != nil {
		t.event(ctx, s.node, kube.EventNormal, ReasonTerminating, "Terminating instance %s: %s", id, reasonText(s.cl))
	}
	return false, nil
}

// launchedAt is when the claim's launch succeeded (zero when unknown).
func launchedAt(cl *apis.NodeClaim) time.Time {
	if c := cl.Condition(apis.ConditionLaunched); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return time.Time{}
}

// deleteNode releases the claim's Node: its finalizer off, the object deleted.
func (t *Terminator) deleteNode(ctx context.Context, s *stepState) (bool, error) {
	if s.node == nil {
		return false, nil
	}
	if err := t.d.Cluster.ReleaseNode(ctx, s.node.Name, s.node.UID); err != nil {
		return false, fmt.Errorf("terminate nodeclaim %s: delete node %s: %w", s.cl.Name, s.node.Name, err)
	}
	s.log.InfoContext(ctx, "node deleted")
	return false, nil
}

// tombstoneClaim deletes the claim, the workflow's last write; only the
// Step whose delete landed counts the termination.
func (t *Terminator) tombstoneClaim(ctx context.Context, s *stepState) (bool, error) {
	deleted, err := t.tombstone(ctx, s.cl.Name)
	if err != nil {
		return false, err
	}
	if !deleted {
		s.log.DebugContext(ctx, "nodeclaim already tombstoned by another termination step")
		s.res = alreadyDeleted(s.res)
		return true, nil
	}
	cl := s.cl
	t.metric(metrics.NodeClaimsTerminated, metrics.Dimensions{"nodepool": cl.NodePoolName(), "reason": cl.DeletionReason()})
	s.log.InfoContext(ctx, "nodeclaim terminated", "since-mark", s.now.Sub(cl.DeletionTimestamp.Time).Round(time.Millisecond).String())
	s.res.Done, s.res.Phase = true, PhaseTerminated
	return true, nil
}

// record sets a condition on the Step's claim (see setCondition) and
// reports whether the Step ends because the claim is gone, in which case
// s.res says so.
func (t *Terminator) record(ctx context.Context, s *stepState, typ string, status metav1.ConditionStatus, reason, msg string) (gone bool) {
	if !t.setCondition(ctx, s.log, s.cl, typ, status, reason, msg, s.now) {
		return false
	}
	s.res = alreadyDeleted(s.res)
	return true
}

// alreadyDeleted ends a Step whose claim another Step (another process)
// tombstoned meanwhile: the workflow is done, and not this Step's to count.
func alreadyDeleted(res Result) Result {
	res.Done, res.Phase, res.RequeueAfter = true, PhaseAlreadyDeleted, 0
	return res
}

func reasonText(cl *apis.NodeClaim) string {
	if r := cl.DeletionReason(); r != "" {
		return r
	}
	return "marked for deletion"
}

// HasDisruptedTaint reports whether a node carries
// karpenter.sh/disrupted:NoSchedule (the drain has begun).
func HasDisruptedTaint(n *corev1.Node) bool {
	for _, tt := range n.Spec.Taints {
		if tt.Key == apis.DisruptedTaintKey && tt.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
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
