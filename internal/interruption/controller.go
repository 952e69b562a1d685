package interruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// Rebalance policies (settings.Settings.Rebalance).
const (
	RebalanceIgnore  = "ignore"
	RebalanceReplace = "replace"
)

// Node event reasons, Karpenter's for the same messages.
const (
	ReasonSpotInterrupted     = "SpotInterrupted"
	ReasonRebalance           = "SpotRebalanceRecommendation"
	ReasonInstanceStopping    = "InstanceStopping"
	ReasonInstanceTerminating = "InstanceTerminating"
	ReasonInstanceUnhealthy   = "InstanceUnhealthy"
)

// spotICETTL is how long an interrupted spot offering stays out of launches
// (Karpenter's unavailable-offerings TTL). The shared ICE set carries its
// own TTL; this is only said in logs.
const spotICETTL = 3 * time.Minute

// Store is what the controller needs of internal/store (*store.Store).
type Store interface {
	termination.Store
	GetNodeClaimByInstanceID(ctx context.Context, instanceID string) (*apis.NodeClaim, error)
}

// Cluster is what the controller needs of the API server (*kube.Client).
type Cluster interface {
	termination.Cluster
	Cordon(ctx context.Context, node string) (*corev1.Node, error)
}

// Unavailable is the shared ICE set (*aws.ICECache from Provider.ICE()).
type Unavailable interface {
	MarkUnavailable(ctx context.Context, key nwaws.OfferingKey, reason string) error
}

// Terminator runs the termination workflow (*termination.Terminator).
type Terminator interface {
	Step(ctx context.Context, claim *apis.NodeClaim) (termination.Result, error)
}

// Deps are the controller's adapters.
type Deps struct {
	Store      Store
	Cluster    Cluster
	Terminator Terminator
	// Cloud terminates instances of claims whose instance stopped.
	Cloud termination.Cloud
	// ICE receives the offerings of interrupted spot instances.
	ICE Unavailable
	// Provision runs one provisioning pass (*provisioning.Provisioner.Pass).
	// The pass places the reschedulable pods of every node marked for
	// deletion or disrupting, so calling it after marking a claim launches
	// that node's replacement, and calling it again launches nothing more.
	Provision provisioning.Pass
	// Requeue hands a claim to the lifecycle function (the drain carries on
	// there); nil leaves it to the lifecycle's schedule.
	Requeue  func(ctx context.Context, msg queue.Message, delay time.Duration) error
	Metrics  *metrics.Recorder
	Log      *slog.Logger
	Now      func() time.Time
	Sleep    func(ctx context.Context, d time.Duration) error
	Settings Settings
}

// Settings tune the controller.
type Settings struct {
	// Rebalance is RebalanceIgnore (default) or RebalanceReplace.
	Rebalance string
	// ProvisionWait bounds how long a message waits for the provisioner
	// lease before its replacement is retried by redelivery (default 20 s).
	ProvisionWait time.Duration
	// ProvisionRetry is the pause between lease attempts (default 200 ms).
	ProvisionRetry time.Duration
}

// Controller acts on parsed interruption messages. Safe for concurrent use.
type Controller struct {
	d   Deps
	log *slog.Logger
}

// New checks the dependencies and returns a Controller.
func New(d Deps) (*Controller, error) {
	switch {
	case d.Store == nil || d.Cluster == nil || d.Terminator == nil || d.Cloud == nil:
		return nil, errors.New("interruption: store, cluster, terminator and cloud are required")
	case d.Provision == nil:
		return nil, errors.New("interruption: a provisioning pass is required (replacement capacity)")
	}
	switch d.Settings.Rebalance {
	case "":
		d.Settings.Rebalance = RebalanceIgnore
	case RebalanceIgnore, RebalanceReplace:
	default:
		return nil, fmt.Errorf("interruption: rebalance policy %q: want %s or %s", d.Settings.Rebalance, RebalanceIgnore, RebalanceReplace)
	}
	if d.Settings.ProvisionWait <= 0 {
		d.Settings.ProvisionWait = 20 * time.Second
	}
	if d.Settings.ProvisionRetry <= 0 {
		d.Settings.ProvisionRetry = 200 * time.Millisecond
	}
	d.Log, d.Now, d.Metrics = basedeps.Logger(d.Log), basedeps.Clock(d.Now), basedeps.Recorder(d.Metrics)
	d.Sleep = basedeps.Sleeper(d.Sleep)
	return &Controller{d: d, log: d.Log}, nil
}

// Action is what the controller does for one instance of a message.
type Action string

// Actions.
const (
	// ActionNone: acknowledged only (rebalance under ignore, other events,
	// states that need nothing).
	ActionNone Action = "none"
	// ActionDrain: replacement capacity first, then cordon, taint, drain
	// and terminate through the termination workflow.
	ActionDrain Action = "drain"
	// ActionReplace: replacement capacity first; the drain starts only once
	// the replacement was provisioned (rebalance under replace).
	ActionReplace Action = "replace"
	// ActionCleanup: the instance is already gone; remove the claim and node.
	ActionCleanup Action = "cleanup"
)

// ActionFor is the action a message asks of its instances under the
// rebalance policy.
func ActionFor(m Message, rebalance string) Action {
	switch {
	case !m.Actionable():
		return ActionNone
	case m.Gone():
		return ActionCleanup
	case m.Kind == RebalanceRecommended && rebalance != RebalanceReplace:
		return ActionNone
	case m.Kind == RebalanceRecommended:
		return ActionReplace
	}
	return ActionDrain
}

// Item is one instance of one message.
type Item struct {
	Msg        Message
	InstanceID string
	// MessageID is the SQS message carrying it (for failures).
	MessageID string
}

// Outcome is what happened to one item.
type Outcome struct {
	InstanceID string `json:"instanceID"`
	MessageID  string `json:"messageID"`
	Action     Action `json:"action"`
	Claim      string `json:"claim,omitempty"`
	Node       string `json:"node,omitempty"`
	// Owned is false for instances nodewright has no claim for.
	Owned bool `json:"owned"`
	// First is true when this item marked the claim (duplicates are false).
	First bool `json:"first,omitempty"`
	// Replacements are claims the provisioning pass launched for this batch.
	Replacements []string `json:"replacements,omitempty"`
	// Tainted is when the node carried the disrupted taint (zero if not).
	Tainted time.Time `json:"tainted,omitzero"`
	// Provisioned is when the replacement pass finished (zero if none ran).
	Provisioned time.Time `json:"provisioned,omitzero"`
	Err         error     `json:"-"`
}

// work is one owned item in flight through a batch.
type work struct {
	item  Item
	out   *Outcome
	claim *apis.NodeClaim
	node  *corev1.Node
	log   *slog.Logger
}

// Process acts on a batch of items: the phases run for the whole batch so
// one provisioning pass serves every interrupted node in it (and a message
// delivered several times in one batch is one drain). It returns one
// Outcome per item, in order; an Outcome with Err failed and should be
// retried (its message reported as a batch item failure).
func (c *Controller) Process(ctx context.Context, items []Item) []Outcome {
	outs := make([]Outcome, len(items))
	var owned []*work
	for i, it := range items {
		a := ActionFor(it.Msg, c.d.Settings.Rebalance)
		outs[i] = Outcome{InstanceID: it.InstanceID, MessageID: it.MessageID, Action: a}
		if a == ActionNone && it.Msg.Kind != RebalanceRecommended {
			// Every instance's pending/running transitions in the account
			// land here; they need no lookup at all.
			continue
		}
		w, err := c.resolve(ctx, it, &outs[i])
		if err != nil {
			outs[i].Err = err
			continue
		}
		if w != nil {
			owned = append(owned, w)
		}
	}

	// Phase 1: record what the message means on the claims (ICE, the
	// deletion mark or the Disrupting condition) before anything else, so
	// a crash after this point still drains the node (the lifecycle acts
	// on the mark) and the provisioning pass sees the pods to move.
	var needPass bool
	for _, w := range owned {
		if w.out.Err != nil {
			continue
		}
		switch w.out.Action {
		case ActionNone:
			c.acknowledge(ctx, w)
		case ActionDrain, ActionCleanup:
			c.markICE(ctx, w)
			w.out.Err = c.mark(ctx, w)
			needPass = needPass || w.out.Err == nil
		case ActionReplace:
			w.out.Err = c.markDisrupting(ctx, w)
			needPass = needPass || w.out.Err == nil
		}
	}

	// Phase 2: one provisioning pass for the whole batch.
	var pass provisioning.Result
	var passErr error
	var passAt time.Time
	if needPass {
		pass, passErr = c.provision(ctx)
		passAt = c.d.Now()
		if passErr != nil {
			c.log.ErrorContext(ctx, "replacement capacity: provisioning pass failed", "error", passErr)
		} else {
			c.log.InfoContext(ctx, "replacement capacity: provisioning pass done", "launched", pass.Launched,
				"failed", len(pass.Failed), "unschedulable", pass.Unschedulable)
		}
	}

	// Phase 3: drain, or clean up; once per claim however often the batch
	// names it.
	done := map[string]bool{}
	for _, w := range owned {
		if w.out.Err != nil || w.out.Action == ActionNone {
			continue
		}
		if done[w.claim.Name] {
			w.log.InfoContext(ctx, "same nodeclaim already handled in this batch")
			continue
		}
		done[w.claim.Name] = true
		w.out.Replacements = pass.Launched
		w.out.Provisioned = passAt
		switch w.out.Action {
		case ActionDrain:
			w.out.Err = c.drain(ctx, w)
			if w.out.Err == nil && passErr != nil {
				// The drain goes on regardless (the instance is going away);
				// redelivery retries the replacement, and the provisioner's
				// own runs see the marked node's pods too.
				w.out.Err = fmt.Errorf("replacement capacity for node of instance %s: %w", w.item.InstanceID, passErr)
			}
		case ActionReplace:
			if passErr != nil {
				c.undoDisrupting(ctx, w)
				w.out.Err = fmt.Errorf("rebalance: replacement for instance %s not provisioned; not draining: %w", w.item.InstanceID, passErr)
				continue
			}
			if len(pass.Failed) > 0 {
				c.undoDisrupting(ctx, w)
				w.out.Err = fmt.Errorf("rebalance: %d replacement launches failed; not draining instance %s", len(pass.Failed), w.item.InstanceID)
				continue
			}
			if w.out.Err = c.mark(ctx, w); w.out.Err == nil {
				w.out.Err = c.drain(ctx, w)
			}
		case ActionCleanup:
			w.out.Err = c.cleanup(ctx, w)
		}
	}
	return outs
}

// resolve finds the item's claim and node. It returns nil work (and no
// error) for instances nodewright does not own, and for ActionNone items
// of owned instances it still returns the work (for the node event).
func (c *Controller) resolve(ctx context.Context, it Item, out *Outcome) (*work, error) {
	log := c.log.With("message-id", it.MessageID, "message-type", string(it.Msg.Kind), "instance-id", it.InstanceID)
	if it.Msg.Kind == StateChange {
		log = log.With("state", it.Msg.State)
	}
	cl, err := c.d.Store.GetNodeClaimByInstanceID(ctx, it.InstanceID)
	if errors.Is(err, store.ErrNotFound) {
		// Not ours (or already gone): acknowledged, nothing touched.
		log.InfoContext(ctx, "interruption message for an instance nodewright does not own; acknowledged", "action", string(out.Action))
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("interruption: find nodeclaim of instance %s: %w", it.InstanceID, err)
	}
	out.Owned, out.Claim = true, cl.Name
	log = log.With("nodeclaim", cl.Name, "nodepool", cl.NodePoolName())
	if cl.IsTrue(termination.ConditionInstanceTerminating) {
		// nodewright itself is terminating the instance (drained already):
		// its state changes are the echo of that, nothing to replace.
		log.InfoContext(ctx, "instance already being terminated by nodewright; acknowledged")
		out.Action = ActionNone
		return nil, nil
	}
	w := &work{item: it, out: out, claim: cl, log: log}
	node, err := c.d.Cluster.ClaimNode(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("interruption: nodeclaim %s: %w", cl.Name, err)
	}
	if node != nil {
		w.node = node
		out.Node = node.Name
		w.log = log.With("node", node.Name)
	}
	return w, nil
}

// acknowledge handles an owned instance's message that needs no action:
// an event on the node says it arrived.
func (c *Controller) acknowledge(ctx context.Context, w *work) {
	if w.item.Msg.Kind == RebalanceRecommended {
		w.log.InfoContext(ctx, "rebalance recommendation acknowledged (rebalance policy ignore)")
		c.event(ctx, w, kube.EventNormal, ReasonRebalance, "Spot rebalance recommendation was triggered")
		return
	}
	w.log.DebugContext(ctx, "interruption message needs no action")
}

// markICE keeps an interrupted spot offering out of launches for the ICE
// TTL, shared with every function through the store.
func (c *Controller) markICE(ctx context.Context, w *work) {
	if w.item.Msg.Kind != SpotInterruption || c.d.ICE == nil {
		return
	}
	cl := w.claim
	key := nwaws.OfferingKey{
		InstanceType: cl.Labels[catalog.LabelInstanceType],
		Zone:         cl.Labels[catalog.LabelTopologyZone],
		CapacityType: apis.CapacityTypeSpot,
	}
	if key.InstanceType == "" || key.Zone == "" {
		w.log.WarnContext(ctx, "interrupted spot claim lacks its instance type or zone; offering not marked unavailable")
		return
	}
	if err := c.d.ICE.MarkUnavailable(ctx, key, "SpotInterruptionWarning"); err != nil {
		// The local set holds it for this function; the launch goes on.
		w.log.WarnContext(ctx, "recording the interrupted spot offering", "offering", key.String(), "error", err)
		return
	}
	w.log.InfoContext(ctx, "spot offering marked unavailable", "offering", key.String(), "ttl", spotICETTL.String())
}

// mark sets the claim's deletion mark (kept if already there: duplicates
// and the lifecycle's own marks are never moved).
func (c *Controller) mark(ctx context.Context, w *work) error {
	now := metav1.NewTime(c.d.Now())
	msg := describe(w.item.Msg)
	var first bool
	updated, err := c.d.Store.MutateNodeClaim(ctx, w.claim.Name, func(x *apis.NodeClaim) error {
		first = x.MarkForDeletion(apis.DeletionReasonInterrupted, msg, now)
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		// Terminated meanwhile: nothing left to do.
		w.log.InfoContext(ctx, "nodeclaim already gone")
		w.out.Action = ActionNone
		return nil
	}
	if err != nil {
		return fmt.Errorf("interruption: mark nodeclaim %s for deletion: %w", w.claim.Name, err)
	}
	w.claim = updated
	w.out.First = first
	if first {
		w.log.InfoContext(ctx, "nodeclaim marked for deletion", "reason", apis.DeletionReasonInterrupted, "message", msg)
		c.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": apis.DeletionReasonInterrupted, "nodepool": updated.NodePoolName()})
		reason, text := eventFor(w.item.Msg)
		c.event(ctx, w, kube.EventWarning, reason, "%s", text)
	} else {
		w.log.InfoContext(ctx, "nodeclaim already marked for deletion (duplicate or earlier decision)", "reason", updated.DeletionReason())
	}
	return nil
}

// markDisrupting sets Disrupting=True without the deletion mark: the node
// takes no new pods and the provisioner moves its pods to new capacity,
// while the lifecycle leaves it running until the mark follows.
func (c *Controller) markDisrupting(ctx context.Context, w *work) error {
	if w.claim.Deleting() {
		return nil
	}
	now := metav1.NewTime(c.d.Now())
	updated, err := c.d.Store.MutateNodeClaim(ctx, w.claim.Name, func(x *apis.NodeClaim) error {
		if !x.IsTrue(apis.ConditionDisrupting) {
			x.SetCondition(apis.ConditionDisrupting, metav1.ConditionTrue, "RebalanceRecommendation", "replacement being provisioned", now)
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		w.out.Action = ActionNone
		return nil
	}
	if err != nil {
		return fmt.Errorf("interruption: mark nodeclaim %s disrupting: %w", w.claim.Name, err)
	}
	w.claim = updated
	return nil
}

// undoDisrupting clears a rebalance's Disrupting condition when its
// replacement could not be provisioned, so the node takes pods again until
// the redelivered message tries once more.
func (c *Controller) undoDisrupting(ctx context.Context, w *work) {
	_, err := c.d.Store.MutateNodeClaim(ctx, w.claim.Name, func(x *apis.NodeClaim) error {
		if x.Deleting() {
			return nil
		}
		if c := x.Condition(apis.ConditionDisrupting); c != nil && c.Reason == "RebalanceRecommendation" {
			x.ClearCondition(apis.ConditionDisrupting)
		}
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		w.log.WarnContext(ctx, "clearing the rebalance's Disrupting condition", "error", err)
	}
}

// provision runs the provisioning pass, waiting a bounded time for the
// provisioner lease.
func (c *Controller) provision(ctx context.Context) (provisioning.Result, error) {
	deadline := c.d.Now().Add(c.d.Settings.ProvisionWait)
	for {
		res, err := c.d.Provision(ctx)
		if err != nil {
			return res, err
		}
		if res.Skipped == "" {
			return res, nil
		}
		if !c.d.Now().Before(deadline) {
			return res, fmt.Errorf("provisioning pass not run within %s: %s", c.d.Settings.ProvisionWait, res.Skipped)
		}
		if err := c.d.Sleep(ctx, c.d.Settings.ProvisionRetry); err != nil {
			return res, err
		}
	}
}

// drain cordons the node and takes the first termination step (the
// disrupted taint and the first evictions) now; the lifecycle carries the
// drain on from the requeued message. A duplicate finds the node already
// tainted and leaves the drain to whoever started it.
func (c *Controller) drain(ctx context.Context, w *work) error {
	if w.out.Action == ActionNone || !w.claim.Deleting() {
		return nil
	}
	if !w.out.First && w.node != nil && hasDisruptedTaint(w.node) {
		w.log.InfoContext(ctx, "drain already under way")
		w.out.Tainted = c.d.Now()
		return nil
	}
	if w.node != nil && !w.node.Spec.Unschedulable {
		if _, err := c.d.Cluster.Cordon(ctx, w.node.Name); err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, kube.ErrNotFound) {
			return fmt.Errorf("interruption: cordon node %s: %w", w.node.Name, err)
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
	cl := w.claim
	if id := cl.Status.InstanceID; id != "" && !cl.IsTrue(termination.ConditionInstanceTerminating) {
		if err := c.d.Cloud.Terminate(ctx, id); err != nil && !errors.Is(err, nwaws.ErrNotOwned) {
			return fmt.Errorf("interruption: terminate instance %s of nodeclaim %s: %w", id, cl.Name, err)
		}
	}
	if w.node != nil {
		// Cordoned first so the scheduler binds no replacement pod to it in
		// the moment before it is gone.
		if _, err := c.d.Cluster.Cordon(ctx, w.node.Name); err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, kube.ErrNotFound) {
			return fmt.Errorf("interruption: cordon node %s: %w", w.node.Name, err)
		}
		if err := c.d.Cluster.DeleteNode(ctx, w.node.Name, w.node.UID); err != nil {
			return fmt.Errorf("interruption: delete node %s: %w", w.node.Name, err)
		}
	}
	// The pods died with the instance; deleting them now lets their
	// controllers recreate them at once instead of after the pod garbage
	// collector's quarantine of orphans (40 s and more). By name, so a
	// retry after the Node is gone still finds them.
	if name := nodeNameOf(w); name != "" {
		pods, err := c.d.Cluster.PodsOnNode(ctx, name)
		if err != nil {
			return fmt.Errorf("interruption: pods of node %s: %w", name, err)
		}
		zero := int64(0)
		w.log = w.log.With("pods-deleted", podNames(pods))
		for _, p := range pods {
			if err := c.d.Cluster.DeletePod(ctx, p, &zero); err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, kube.ErrNotFound) {
				return fmt.Errorf("interruption: delete pod %s/%s of gone instance: %w", p.Namespace, p.Name, err)
			}
		}
	}
	for attempt := 0; ; attempt++ {
		cur, err := c.d.Store.GetNodeClaim(ctx, cl.Name)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			return fmt.Errorf("interruption: nodeclaim %s: %w", cl.Name, err)
		}
		cur.SetCondition(termination.ConditionInstanceTerminating, metav1.ConditionTrue, "InstanceGone",
			"instance "+cur.Status.InstanceID+" is "+w.item.Msg.State, metav1.NewTime(c.d.Now()))
		err = c.d.Store.DeleteNodeClaim(ctx, cur)
		if err == nil || errors.Is(err, store.ErrNotFound) {
			break
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= 7 {
			return fmt.Errorf("interruption: tombstone nodeclaim %s: %w", cl.Name, err)
		}
	}
	c.d.Metrics.Add(metrics.NodeClaimsTerminated, 1, metrics.Dimensions{"nodepool": cl.NodePoolName(), "reason": apis.DeletionReasonInterrupted})
	w.log.InfoContext(ctx, "nodeclaim and node of a gone instance cleaned up")
	return nil
}

func (c *Controller) event(ctx context.Context, w *work, typ, reason, format string, args ...any) {
	if w.node == nil {
		return
	}
	if err := c.d.Cluster.NodeEvent(ctx, w.node, typ, reason, format, args...); err != nil {
		w.log.DebugContext(ctx, "node event", "reason", reason, "error", err)
	}
}

// eventFor is the node event (Karpenter's reasons and wording) of a message.
func eventFor(m Message) (reason, text string) {
	switch m.Kind {
	case SpotInterruption:
		return ReasonSpotInterrupted, "Spot interruption warning was triggered"
	case RebalanceRecommended:
		return ReasonRebalance, "Spot rebalance recommendation was triggered; replacing the node (rebalance policy replace)"
	case ScheduledChange:
		return ReasonInstanceUnhealthy, "An unhealthy warning was triggered for the instance (AWS Health scheduled change)"
	case StateChange:
		if m.State == "stopping" || m.State == "stopped" {
			return ReasonInstanceStopping, "Instance is stopping"
		}
		return ReasonInstanceTerminating, "Instance is terminating"
	}
	return "Interrupted", m.DetailType
}

// describe is the deletion mark's message.
func describe(m Message) string {
	s := m.DetailType
	if m.State != "" {
		s += " (" + m.State + ")"
	}
	if m.ID != "" {
		s += ", event " + m.ID
	}
	return s
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

func hasDisruptedTaint(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == apis.DisruptedTaintKey && t.Effect == corev1.TaintEffectNoSchedule {
			return true
		}
	}
	return false
}
