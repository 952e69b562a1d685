package disruption

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
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/store"
)

// Store keys and lease of the disruption function.
const (
	LeaseName  = "disruption"
	CommandKey = "disruption/command"
	HistoryKey = "disruption/history"
)

// waitingValidation is Result.Waiting of a command saved for validation.
const waitingValidation = "validation"

// Store is what the controller needs of internal/store (*store.Store).
type Store interface {
	AcquireLease(ctx context.Context, name, holder string, d time.Duration) (*store.Lease, error)
	ReleaseLease(ctx context.Context, l *store.Lease) error
	GetKV(ctx context.Context, k string) (*store.KV, error)
	PutKV(ctx context.Context, k string, value []byte, expectedVersion int64, ttl time.Duration) (int64, error)
	DeleteKV(ctx context.Context, k string, expectedVersion int64) error
	ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error)
	MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error)
}

// Cluster is what the controller needs of the API server (*kube.Client).
type Cluster interface {
	Snapshot(ctx context.Context, opts kube.SnapshotOptions) (*kube.Snapshot, error)
	NodeEvent(ctx context.Context, n *corev1.Node, eventType, reason, format string, args ...any) error
	AddTaint(ctx context.Context, node string, t corev1.Taint) (*corev1.Node, error)
	RemoveTaints(ctx context.Context, node, key string, effect corev1.TaintEffect) (*corev1.Node, error)
}

// Cloud tells whether instances drifted from what their EC2NodeClass
// resolves to (*aws.Provider). Optional: without it only spec-hash and
// requirement drift are seen.
type Cloud interface {
	ListClusterInstances(ctx context.Context) ([]nwaws.Instance, error)
	Drift(ctx context.Context, nc *apis.EC2NodeClass, inst nwaws.Instance) (string, error)
}

// Deps are the controller's adapters.
type Deps struct {
	Store   Store
	Cluster Cluster
	Cloud   Cloud
	// Catalog returns the region's instance types with current prices.
	Catalog func(ctx context.Context) (*catalog.Catalog, error)
	// Unavailable returns the ICE set (optional).
	Unavailable func(ctx context.Context) (map[scheduling.OfferingKey]bool, error)
	// Provision runs one provisioning pass (*provisioning.Provisioner.Pass).
	// The pass places the pods of nodes marked disrupting, so calling it
	// after marking the candidates launches their replacements, and calling
	// it again launches nothing more.
	Provision provisioning.Pass
	// Requeue hands claims marked for deletion to the lifecycle at once
	// (optional: the lifecycle's schedule picks them up within a minute).
	Requeue func(ctx context.Context, msg queue.Message, delay time.Duration) error
	// Wakeup sends a message to the disruption queue, which invokes the
	// function again after delay (optional: without it, passes run on the
	// schedule only; see wakeup.go).
	Wakeup   func(ctx context.Context, msg queue.Message, delay time.Duration) error
	Config   *apis.Config
	Metrics  *metrics.Recorder
	Log      *slog.Logger
	Now      func() time.Time
	Holder   string
	Settings Settings
}

// Controller runs disruption passes. Safe for concurrent use (the lease
// serialises passes).
type Controller struct {
	d   Deps
	s   Settings
	log *slog.Logger
	// memo keeps a warm function from emitting the same findings every
	// pass (findings.go).
	memo findingMemo
}

// New checks the dependencies and returns a Controller.
func New(d Deps) (*Controller, error) {
	switch {
	case d.Store == nil || d.Cluster == nil:
		return nil, errors.New("disruption: store and cluster are required")
	case d.Catalog == nil || d.Config == nil:
		return nil, errors.New("disruption: catalog and configuration are required")
	case d.Provision == nil:
		return nil, errors.New("disruption: a provisioning pass is required (replacements)")
	}
	d.Log, d.Now, d.Metrics = basedeps.Logger(d.Log), basedeps.Clock(d.Now), basedeps.Recorder(d.Metrics)
	if d.Holder == "" {
		d.Holder = "disruption"
	}
	s := d.Settings
	s.Defaults()
	return &Controller{d: d, s: s, log: d.Log}, nil
}

// Result summarises a pass.
type Result struct {
	Skipped string `json:"skipped,omitempty"`
	// Phase of the command the pass worked on ("" when none).
	Phase   string `json:"phase,omitempty"`
	Method  string `json:"method,omitempty"`
	Action  string `json:"action,omitempty"`
	Message string `json:"message,omitempty"`
	// Decided: a new command was decided (and saved for validation).
	Decided bool `json:"decided,omitempty"`
	// Executed: candidates were marked for deletion (or disrupting).
	Executed bool `json:"executed,omitempty"`
	// Done: the command finished (candidates handed to termination).
	Done bool `json:"done,omitempty"`
	// Dropped says why a command was abandoned (validation or rollback).
	Dropped string `json:"dropped,omitempty"`
	// Waiting says what the command waits for.
	Waiting    string         `json:"waiting,omitempty"`
	Candidates []string       `json:"candidates,omitempty"`
	Eligible   map[string]int `json:"eligible,omitempty"`
	// CostPerHour is what the managed nodes cost at the start of the pass.
	CostPerHour float64 `json:"costPerHour"`
	// WakeAt is when the next pass is due (a candidate's consolidateAfter
	// runs out, the pending command is due for validation), WakeFor says
	// which, and WakeSent that a wake-up message was sent for it.
	WakeAt  time.Time `json:"wakeAt,omitzero"`
	WakeFor string    `json:"wakeFor,omitempty"`
	// WakeNodes are the nodes the wake-up is for.
	WakeNodes []string `json:"wakeNodes,omitempty"`
	WakeSent  bool     `json:"wakeSent,omitempty"`
}

// Run performs one disruption pass: continue the pending command if there
// is one, else decide a new one.
func (c *Controller) Run(ctx context.Context) (*Result, error) {
	res := &Result{}
	lease, err := c.d.Store.AcquireLease(ctx, LeaseName, c.d.Holder, c.s.LeaseDuration)
	if errors.Is(err, store.ErrLeaseHeld) {
		res.Skipped = "lease held"
		c.log.InfoContext(ctx, "disruption pass skipped: another pass holds the lease", "error", err.Error())
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("disruption: acquire lease: %w", err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := c.d.Store.ReleaseLease(rctx, lease); err != nil {
			c.log.WarnContext(ctx, "releasing the disruption lease", "error", err)
		}
		if err := c.d.Metrics.Flush(); err != nil {
			c.log.WarnContext(ctx, "flushing metrics", "error", err)
		}
	}()

	cmd, version, err := c.loadCommand(ctx)
	if err != nil {
		return nil, err
	}
	// A pending command acts (validates, hands nodes to termination), so it
	// reads fresh state; deciding a new one may read the cached view.
	v, err := c.view(ctx, cmd == nil)
	if err != nil {
		return nil, err
	}
	res.CostPerHour = clusterCost(v.Cluster)
	c.d.Metrics.Gauge(metrics.ClusterCostPerHour, res.CostPerHour, nil)
	for pool, cost := range poolCosts(v.Cluster) {
		c.d.Metrics.Gauge(metrics.ClusterCostPerHour, cost, metrics.Dimensions{"nodepool": pool})
	}
	c.poolMetrics(v.Cluster)
	c.podStartup(ctx, v.Cluster)

	if cmd != nil {
		if err := c.advance(ctx, v, cmd, version, res); err != nil {
			return res, err
		}
		if res.Waiting != waitingValidation {
			c.nextEligible(ctx, v, res)
		}
		c.wake(ctx, res)
		return res, nil
	}
	res, err = c.decide(ctx, v, res)
	if err == nil {
		c.wake(ctx, res)
	}
	return res, err
}

// decide looks for a new command when none is pending. A command without
// a validation delay is validated against a fresh view and acted on at
// once; otherwise it is saved for a later pass to validate.
func (c *Controller) decide(ctx context.Context, v *View, res *Result) (*Result, error) {
	if n := c.sweepOrphans(ctx, v); n > 0 {
		// Their nodes count as disrupting in this view; decide next pass.
		res.Dropped = fmt.Sprintf("released %d nodes left disrupting by a lost command", n)
		return res, nil
	}
	dec, err := Decide(ctx, v)
	if err != nil {
		return nil, err
	}
	res.Eligible = dec.Eligible
	res.wakeAt(dec.NextEligible, "consolidateAfter", dec.NextEligibleNode)
	for m, n := range dec.Eligible {
		c.d.Metrics.Gauge(metrics.DisruptionEligibleNodes, float64(n), metrics.Dimensions{"method": m})
	}
	c.findings(ctx, v, dec.Findings)
	if dec.Command == nil {
		c.log.InfoContext(ctx, "disruption pass: nothing to disrupt", "eligible", dec.Eligible, "cost", res.CostPerHour)
		return res, nil
	}
	cmd := dec.Command
	c.describe(res, cmd)
	res.Decided = true
	c.d.Metrics.Add(metrics.DisruptionDecisions, 1, metrics.Dimensions{"method": cmd.Method, "decision": cmd.Action()})
	c.log.InfoContext(ctx, "disruption decided; validating before acting", "method", cmd.Method, "action", cmd.Action(),
		"message", cmd.Message, "nodes", cmd.NodeNames(), "validate-after", cmd.ValidateAfter)
	if !cmd.ValidateAfter.After(v.Now) {
		// No validation delay configured: validate against a fresh view now.
		fresh, err := c.view(ctx, false)
		if err != nil {
			return nil, err
		}
		return res, c.advance(ctx, fresh, cmd, 0, res)
	}
	if _, err := c.saveCommand(ctx, cmd, 0); err != nil {
		return nil, err
	}
	res.Phase = cmd.Phase
	res.Waiting = waitingValidation
	res.wakeAt(cmd.ValidateAfter, "validation of the "+cmd.Method+" decision", cmd.NodeNames()...)
	return res, nil
}

func (c *Controller) describe(res *Result, cmd *Command) {
	res.Method, res.Action, res.Message, res.Phase = cmd.Method, cmd.Action(), cmd.Message, cmd.Phase
	res.Candidates = cmd.NodeNames()
}

// advance moves a pending command on: validate and act, or wait for its
// replacements and then hand the candidates to termination.
func (c *Controller) advance(ctx context.Context, v *View, cmd *Command, version int64, res *Result) error {
	c.describe(res, cmd)
	log := c.log.With("method", cmd.Method, "action", cmd.Action(), "nodes", cmd.NodeNames())
	switch cmd.Phase {
	case PhaseValidating:
		if v.Now.Before(cmd.ValidateAfter) {
			res.Waiting = waitingValidation
			res.wakeAt(cmd.ValidateAfter, "validation of the "+cmd.Method+" decision", cmd.NodeNames()...)
			return nil
		}
		ok, why, err := Validate(ctx, v, cmd)
		if err != nil {
			return err
		}
		if !ok {
			log.InfoContext(ctx, "disruption command no longer valid; dropped", "why", why, "message", cmd.Message)
			c.d.Metrics.Add(metrics.DisruptionDecisions, 1, metrics.Dimensions{"method": cmd.Method, "decision": "invalidated"})
			res.Dropped = why
			return c.dropCommand(ctx, version)
		}
		return c.execute(ctx, v, cmd, version, res, log)
	case PhaseReplacing:
		return c.replacing(ctx, v, cmd, version, res, log)
	default:
		log.WarnContext(ctx, "disruption command in an unknown phase; dropped", "phase", cmd.Phase)
		res.Dropped = "unknown phase " + cmd.Phase
		return c.dropCommand(ctx, version)
	}
}

func (c *Controller) event(ctx context.Context, v *View, node, typ, reason, format string, args ...any) {
	n, ok := v.Cluster.Node(node)
	if !ok || n.Node == nil {
		return
	}
	if err := c.d.Cluster.NodeEvent(ctx, n.Node, typ, reason, format, args...); err != nil {
		c.log.DebugContext(ctx, "node event", "node", node, "error", err)
	}
}
