package interruption

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// The batch's replacement pass (phase 2), then phase 3: the drain of an
// interrupted node, or the cleanup of a gone instance.

// passMargin is the part of the function's remaining time the pass leaves
// for reporting the batch (its item failures) before Lambda's timeout.
const passMargin = 5 * time.Second

// errPassHandedOver: the lease was busy and the provisioner was nudged to
// run the pass after the one holding it.
var errPassHandedOver = errors.New("replacement pass handed to the provisioner")

// provision runs the provisioning pass, waiting a bounded time for the
// provisioner lease, and within the function's remaining time: a pass cut
// off by Lambda's timeout would lose the whole batch's outcome. Unless
// wait, a busy lease hands the pass to the provisioner (Deps.Nudge).
func (c *Controller) provision(ctx context.Context, wait bool) (provisioning.Result, error) {
	deadline := c.d.Now().Add(c.d.Settings.ProvisionWait)
	if end, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, end.Add(-passMargin))
		defer cancel()
		deadline = minTime(deadline, c.d.Now().Add(time.Until(end)-passMargin))
	}
	for {
		res, err := c.d.Provision(ctx)
		if err != nil {
			return res, err
		}
		if res.Skipped == "" {
			return res, nil
		}
		if !wait && c.handOver(ctx) {
			return res, errPassHandedOver
		}
		if !c.d.Now().Before(deadline) {
			return res, fmt.Errorf("provisioning pass not run within %s: %s", c.d.Settings.ProvisionWait, res.Skipped)
		}
		if err := c.d.Sleep(ctx, c.d.Settings.ProvisionRetry); err != nil {
			return res, err
		}
	}
}

// handOver asks the provisioner for a pass: the one holding the lease may
// have started before this batch's marks, so the message makes sure one
// runs after them. False when there is no queue or the send failed (then
// the batch waits for the lease itself).
func (c *Controller) handOver(ctx context.Context) bool {
	if c.d.Nudge == nil {
		return false
	}
	msg := queue.Message{Kind: queue.KindProvision, Subject: "interruption", Reason: "replacement-capacity"}
	if err := c.d.Nudge(ctx, msg, 0); err != nil {
		c.log.WarnContext(ctx, "could not hand the replacement pass to the provisioner; waiting for its lease", "error", err)
		return false
	}
	return true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// drain cordons the node and takes the first termination step (the
// disrupted taint and the first evictions) now; the lifecycle carries the
// drain on from the requeued message. A duplicate finds the node already
// tainted and leaves the drain to whoever started it.
func (c *Controller) drain(ctx context.Context, w *work) error {
	if w.out.Action == ActionNone || !w.claim.Deleting() {
		return nil
	}
	if !w.out.First && w.node != nil && termination.HasDisruptedTaint(w.node) {
		w.log.InfoContext(ctx, "drain already under way")
		w.out.Tainted = c.d.Now()
		return nil
	}
	if w.node != nil && !w.node.Spec.Unschedulable {
		if err := c.cordon(ctx, w.node); err != nil {
			return err
		}
	}
	res, err := c.d.Terminator.Step(ctx, w.claim)
	if err != nil {
		return fmt.Errorf("interruption: %w", err)
	}
	if res.Node != "" {
		w.out.Tainted = c.d.Now()
	}
	w.log.InfoContext(ctx, "termination started", "phase", res.Phase, "evicted", res.Evicted, "blocked", res.Blocked,
		"waiting", res.Waiting, "done", res.Done)
	if res.Done || c.d.Requeue == nil {
		return nil
	}
	msg := queue.Message{Kind: queue.KindLifecycle, Subject: w.claim.Name, Reason: "interrupted"}
	if err := c.d.Requeue(ctx, msg, res.RequeueAfter); err != nil {
		// The lifecycle's schedule picks the marked claim up within a minute.
		w.log.WarnContext(ctx, "handing the drain to the lifecycle", "error", err)
	}
	return nil
}

// cleanup removes the claim and Node of an instance that is already
// stopped or terminated: its pods are gone with it, so there is nothing to
// drain. A stopped instance is terminated (it will not come back as a node
// nodewright manages).
func (c *Controller) cleanup(ctx context.Context, w *work) error {
	if w.out.Action == ActionNone {
		return nil
	}
	for _, step := range []func(context.Context, *work) error{
		c.terminateGone, c.removeGoneNode, c.deleteGonePods, c.tombstoneGone,
	} {
		if err := step(ctx, w); err != nil {
			return err
		}
	}
	cl := w.claim
	c.d.Metrics.Add(metrics.NodeClaimsTerminated, 1, metrics.Dimensions{"nodepool": cl.NodePoolName(), "reason": apis.DeletionReasonInterrupted})
	w.log.InfoContext(ctx, "nodeclaim and node of a gone instance cleaned up")
	return nil
}

// terminateGone terminates the (stopped) instance unless nodewright already
// asked.
func (c *Controller) terminateGone(ctx context.Context, w *work) error {
	cl := w.claim
	if id := cl.Status.InstanceID; id != "" && !cl.IsTrue(termination.ConditionInstanceTerminating) {
		// An interrupted instance EC2 no longer shows is gone already.
		if err := c.d.Cloud.Terminate(ctx, id); err != nil && !errors.Is(err, nwaws.ErrNotOwned) && !errors.Is(err, nwaws.ErrInstanceNotVisible) {
			return fmt.Errorf("interruption: terminate instance %s of nodeclaim %s: %w", id, cl.Name, err)
		}
	}
	return nil
}

// removeGoneNode cordons, then deletes the gone instance's Node: cordoned
// first so the scheduler binds no replacement pod to it in the moment
// before it is gone.
func (c *Controller) removeGoneNode(ctx context.Context, w *work) error {
	if w.node == nil {
		return nil
	}
	if err := c.cordon(ctx, w.node); err != nil {
		return err
	}
	if err := c.d.Cluster.ReleaseNode(ctx, w.node.Name, w.node.UID); err != nil {
		return fmt.Errorf("interruption: delete node %s: %w", w.node.Name, err)
	}
	return nil
}

// deleteGonePods deletes the pods that died with the instance: their
// controllers then recreate them at once instead of after the pod garbage
// collector's quarantine of orphans (40 s and more). By node name, so a
// retry after the Node is gone still finds them.
func (c *Controller) deleteGonePods(ctx context.Context, w *work) error {
	name := nodeNameOf(w)
	if name == "" {
		return nil
	}
	pods, err := c.d.Cluster.PodsOnNode(ctx, name)
	if err != nil {
		return fmt.Errorf("interruption: pods of node %s: %w", name, err)
	}
	zero := int64(0)
	w.log = w.log.With("pods-deleted", podNames(pods))
	for _, p := range pods {
		if err := c.d.Cluster.DeletePod(ctx, p, &zero); err != nil && !errors.Is(err, kube.ErrNotFound) {
			return fmt.Errorf("interruption: delete pod %s/%s of gone instance: %w", p.Namespace, p.Name, err)
		}
	}
	return nil
}

// tombstoneGone deletes the claim, recording on it that the instance went
// by itself.
func (c *Controller) tombstoneGone(ctx context.Context, w *work) error {
	name := w.claim.Name
	for attempt := 0; ; attempt++ {
		cur, err := c.d.Store.GetNodeClaim(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("interruption: nodeclaim %s: %w", name, err)
		}
		cur.SetCondition(termination.ConditionInstanceTerminating, metav1.ConditionTrue, "InstanceGone",
			"instance "+cur.Status.InstanceID+" is "+w.item.Msg.State, metav1.NewTime(c.d.Now()))
		err = c.d.Store.DeleteNodeClaim(ctx, cur)
		if err == nil || errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= 7 {
			return fmt.Errorf("interruption: tombstone nodeclaim %s: %w", name, err)
		}
	}
}

// cordon marks a node unschedulable; a node already gone needs nothing.
func (c *Controller) cordon(ctx context.Context, node *corev1.Node) error {
	if _, err := c.d.Cluster.Cordon(ctx, node.Name); err != nil && !errors.Is(err, kube.ErrNotFound) {
		return fmt.Errorf("interruption: cordon node %s: %w", node.Name, err)
	}
	return nil
}

func nodeNameOf(w *work) string {
	if w.node != nil {
		return w.node.Name
	}
	return w.claim.Status.NodeName
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Namespace + "/" + p.Name
	}
	return out
}
