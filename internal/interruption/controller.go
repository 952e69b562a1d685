package interruption

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/basedeps"
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
	// ReasonCapacityReservationInterrupted is Karpenter-AWS v1.14.1's
	// (interruption/events.CapacityReservationInstanceInterrupted).
	ReasonCapacityReservationInterrupted = "CapacityReservationInstanceInterrupted"
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

// InstanceTags is what the controller needs of the EC2 provider to tell an
// instance's claim from its tags (*aws.Provider).
type InstanceTags interface {
	GetInstance(ctx context.Context, id string) (nwaws.Instance, error)
	Owns(i nwaws.Instance) bool
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
	// Instances finds an instance's claim through the instance's tags when
	// the store's by-instance index has not caught up yet (*aws.Provider);
	// nil leaves such messages acknowledged as not nodewright's.
	Instances InstanceTags
	// ICE receives the offerings of interrupted spot instances.
	ICE Unavailable
	// Provision runs one provisioning pass (*provisioning.Provisioner.Pass).
	// The pass places the reschedulable pods of every node marked for
	// deletion or disrupting, so calling it after marking a claim launches
	// that node's replacement, and calling it again launches nothing more.
	Provision provisioning.Pass
	// Requeue hands a claim to the lifecycle function (the drain carries on
	// there); nil leaves it to the lifecycle's schedule.
	Requeue func(ctx context.Context, msg queue.Message, delay time.Duration) error
	// Nudge asks the provisioner function for a pass (its queue). A batch
	// that only drains hands its replacement to the provisioner when the
	// lease is busy instead of waiting for it: waiting would hold one of
	// the function's few concurrent executions while later spot warnings
	// queue behind it, uncordoned. nil waits (ProvisionWait).
	Nudge    func(ctx context.Context, msg queue.Message, delay time.Duration) error
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
	basedeps.Default(&d.Settings.ProvisionWait, 20*time.Second)
	basedeps.Default(&d.Settings.ProvisionRetry, 200*time.Millisecond)
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
	// ActionDrain: cordon, taint and start the drain at once, then the
	// replacement pass (or hand it to the provisioner when its lease is
	// busy); the termination workflow terminates.
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
	owned := c.resolveAll(ctx, items, outs)
	needPass := c.recordAll(ctx, owned)
	// Interrupted nodes are cordoned, tainted and draining before the
	// replacement pass, which may wait for the provisioner's lease: until
	// then the scheduler would keep binding pods to a node EC2 reclaims
	// within two minutes (Karpenter, too, taints and drains at once).
	c.drainAll(ctx, owned)
	pass := c.replacementPass(ctx, needPass, mustWait(owned))
	c.actAll(ctx, owned, pass)
	return outs
}

// drainAll starts the drain of every interrupted node in the batch, once
// per claim however often the batch names it.
func (c *Controller) drainAll(ctx context.Context, owned []*work) {
	done := map[string]bool{}
	for _, w := range owned {
		if w.out.Err != nil || w.out.Action != ActionDrain {
			continue
		}
		if done[w.claim.Name] {
			w.log.InfoContext(ctx, "same nodeclaim already handled in this batch")
			continue
		}
		done[w.claim.Name] = true
		w.out.Err = c.drain(ctx, w)
	}
}

// batchPass is the batch's one provisioning pass: its result, its error and
// when it finished (zero when none ran).
type batchPass struct {
	res provisioning.Result
	err error
	at  time.Time
}

// resolveAll fills each item's Outcome and returns the work of the owned
// instances whose message may need action.
func (c *Controller) resolveAll(ctx context.Context, items []Item, outs []Outcome) []*work {
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
	return owned
}

// recordAll is phase 1: record what the message means on the claims (ICE,
// the deletion mark or the Disrupting condition) before anything else, so
// a crash after this point still drains the node (the lifecycle acts on
// the mark) and the provisioning pass sees the pods to move. It reports
// whether a provisioning pass is needed.
func (c *Controller) recordAll(ctx context.Context, owned []*work) (needPass bool) {
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
	return needPass
}

// replacementPass is phase 2: one provisioning pass for the whole batch,
// or, when wait is false and the lease is busy, a nudge that has the
// provisioner run it.
func (c *Controller) replacementPass(ctx context.Context, needPass, wait bool) batchPass {
	if !needPass {
		return batchPass{}
	}
	res, err := c.provision(ctx, wait)
	pass := batchPass{res: res, err: err, at: c.d.Now()}
	if errors.Is(err, errPassHandedOver) {
		c.log.InfoContext(ctx, "replacement capacity handed to the provisioner: its lease is busy")
		return batchPass{res: res, at: pass.at}
	}
	if err != nil {
		c.log.ErrorContext(ctx, "replacement capacity: provisioning pass failed", "error", err)
	} else {
		c.log.InfoContext(ctx, "replacement capacity: provisioning pass done", "launched", res.Launched,
			"failed", len(res.Failed), "unschedulable", res.Unschedulable)
	}
	return pass
}

// mustWait reports whether the batch needs its pass's result: a rebalanced
// node is drained only once its replacement launched (drainReplaced); an
// interrupted one drains whatever the pass does.
func mustWait(owned []*work) bool {
	for _, w := range owned {
		if w.out.Err == nil && w.out.Action == ActionReplace {
			return true
		}
	}
	return false
}

// actAll is phase 3: drain, or clean up; once per claim however often the
// batch names it.
func (c *Controller) actAll(ctx context.Context, owned []*work, pass batchPass) {
	done := map[string]bool{}
	for _, w := range owned {
		if w.out.Err != nil || w.out.Action == ActionNone {
			continue
		}
		if w.out.Action == ActionDrain {
			c.reportReplacement(ctx, w, pass)
			continue
		}
		if done[w.claim.Name] {
			w.log.InfoContext(ctx, "same nodeclaim already handled in this batch")
			continue
		}
		done[w.claim.Name] = true
		w.out.Replacements = pass.res.Launched
		w.out.Provisioned = pass.at
		switch w.out.Action {
		case ActionReplace:
			w.out.Err = c.drainReplaced(ctx, w, pass)
		case ActionCleanup:
			w.out.Err = c.cleanup(ctx, w)
		}
	}
}

// reportReplacement notes the batch's pass on a drained node's outcome. A
// pass that failed or was skipped does not fail the item: its drain is
// under way, redelivery would start nothing new (and after three receives
// the handled message would land in the DLQ), and the provisioner's own
// runs see the marked node's pods and the evicted ones.
func (c *Controller) reportReplacement(ctx context.Context, w *work, pass batchPass) {
	w.out.Replacements, w.out.Provisioned = pass.res.Launched, pass.at
	if pass.err != nil {
		w.log.WarnContext(ctx, "drain started; replacement capacity left to the provisioner's next run", "error", pass.err)
	}
}

// drainReplaced drains a rebalanced node only once its replacement was
// provisioned; otherwise the node takes pods again until redelivery.
func (c *Controller) drainReplaced(ctx context.Context, w *work, pass batchPass) error {
	if pass.err != nil {
		c.undoDisrupting(ctx, w)
		return fmt.Errorf("rebalance: replacement for instance %s not provisioned; not draining: %w", w.item.InstanceID, pass.err)
	}
	if len(pass.res.Failed) > 0 {
		c.undoDisrupting(ctx, w)
		return fmt.Errorf("rebalance: %d replacement launches failed; not draining instance %s", len(pass.res.Failed), w.item.InstanceID)
	}
	if err := c.mark(ctx, w); err != nil {
		return err
	}
	return c.drain(ctx, w)
}

// claimOf finds the live claim of an instance. The by-instance index is a
// global secondary index, and GSI reads are eventually consistent (DynamoDB
// developer guide, "Read consistency"): a claim whose instance ID was
// written a moment ago may be missing from it, and acknowledging that
// instance's message as another's would drop a spot warning. So a miss is
// checked against the instance itself: if this stack's tags are on it, the
// claim it names is read strongly consistently by name. Instances of other
// stacks and autoscalers stay misses (store.ErrNotFound), and so does an
// instance EC2 does not know (long gone, or too new for EC2's own reads:
// the lifecycle's registration check then finds its claim's instance
// vanished).
func (c *Controller) claimOf(ctx context.Context, instanceID string) (*apis.NodeClaim, error) {
	cl, err := c.d.Store.GetNodeClaimByInstanceID(ctx, instanceID)
	if !errors.Is(err, store.ErrNotFound) || c.d.Instances == nil {
		return cl, err
	}
	inst, ierr := c.d.Instances.GetInstance(ctx, instanceID)
	switch {
	case errors.Is(ierr, nwaws.ErrInstanceNotFound):
		return nil, err
	case ierr != nil:
		return nil, fmt.Errorf("interruption: instance %s not in the claim index, and its tags: %w", instanceID, ierr)
	case !c.d.Instances.Owns(inst) || inst.NodeClaim == "":
		return nil, err
	}
	cl, err = c.d.Store.GetNodeClaim(ctx, inst.NodeClaim)
	if err != nil {
		return nil, err
	}
	if cl.Status.InstanceID != "" && cl.Status.InstanceID != instanceID {
		// The claim moved on to another instance (a relaunch): this one
		// is an orphan for the garbage collector, not the claim's node.
		return nil, fmt.Errorf("nodeclaim %s names instance %s: %w", cl.Name, cl.Status.InstanceID, store.ErrNotFound)
	}
	c.log.InfoContext(ctx, "nodeclaim found through the instance's tags: the claim index had not caught up", "instance-id", instanceID, "nodeclaim", cl.Name)
	return cl, nil
}

// resolve finds the item's claim and node. It returns nil work (and no
// error) for instances nodewright does not own, and for ActionNone items
// of owned instances it still returns the work (for the node event).
func (c *Controller) resolve(ctx context.Context, it Item, out *Outcome) (*work, error) {
	log := c.log.With("message-id", it.MessageID, "message-type", string(it.Msg.Kind), "instance-id", it.InstanceID)
	if it.Msg.Kind == StateChange {
		log = log.With("state", it.Msg.State)
	}
	cl, err := c.claimOf(ctx, it.InstanceID)
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
