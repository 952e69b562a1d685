package disruption

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// Store keys and lease of the disruption function.
const (
	LeaseName  = "disruption"
	CommandKey = "disruption/command"
	HistoryKey = "disruption/history"
)

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
	Requeue  func(ctx context.Context, msg queue.Message, delay time.Duration) error
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

	v, err := c.view(ctx)
	if err != nil {
		return nil, err
	}
	res.CostPerHour = clusterCost(v.Cluster)
	c.d.Metrics.Gauge(metrics.ClusterCostPerHour, res.CostPerHour, nil)
	for pool, cost := range poolCosts(v.Cluster) {
		c.d.Metrics.Gauge(metrics.ClusterCostPerHour, cost, metrics.Dimensions{"nodepool": pool})
	}

	cmd, version, err := c.loadCommand(ctx)
	if err != nil {
		return nil, err
	}
	if cmd != nil {
		return res, c.advance(ctx, v, cmd, version, res)
	}

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
	for m, n := range dec.Eligible {
		c.d.Metrics.Gauge(metrics.DisruptionEligibleNodes, float64(n), metrics.Dimensions{"method": m})
	}
	c.findings(ctx, v, dec.Findings)
	if dec.Command == nil {
		c.log.InfoContext(ctx, "disruption pass: nothing to disrupt", "eligible", dec.Eligible, "cost", res.CostPerHour)
		return res, nil
	}
	cmd = dec.Command
	c.describe(res, cmd)
	res.Decided = true
	c.d.Metrics.Add(metrics.DisruptionDecisions, 1, metrics.Dimensions{"method": cmd.Method, "decision": cmd.Action()})
	c.log.InfoContext(ctx, "disruption decided; validating before acting", "method", cmd.Method, "action", cmd.Action(),
		"message", cmd.Message, "nodes", cmd.NodeNames(), "validate-after", cmd.ValidateAfter)
	if !cmd.ValidateAfter.After(v.Now) {
		// No validation delay configured: validate against a fresh view now.
		fresh, err := c.view(ctx)
		if err != nil {
			return nil, err
		}
		return res, c.advance(ctx, fresh, cmd, 0, res)
	}
	if _, err := c.saveCommand(ctx, cmd, 0); err != nil {
		return nil, err
	}
	res.Phase = cmd.Phase
	res.Waiting = "validation"
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
			res.Waiting = "validation"
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

// execute acts on a validated command. Deletions are handed to termination
// at once; replacements first mark the candidates disrupting (no new pods,
// the provisioner moves their pods to new capacity) and wait.
func (c *Controller) execute(ctx context.Context, v *View, cmd *Command, version int64, res *Result, log *slog.Logger) error {
	// The lifecycle spends emptiness budget under this lease; holding it
	// while marking keeps the two from spending the same budget.
	el, err := c.d.Store.AcquireLease(ctx, store.EmptinessLease, c.d.Holder, 30*time.Second)
	if errors.Is(err, store.ErrLeaseHeld) {
		res.Waiting = "emptiness lease"
		if version == 0 {
			_, err = c.saveCommand(ctx, cmd, 0)
		}
		return err
	}
	if err != nil {
		return fmt.Errorf("disruption: emptiness lease: %w", err)
	}
	defer func() {
		if err := c.d.Store.ReleaseLease(context.WithoutCancel(ctx), el); err != nil {
			log.WarnContext(ctx, "releasing the emptiness lease", "error", err)
		}
	}()
	res.Executed = true
	for _, n := range cmd.Candidates {
		c.d.Metrics.Add(metrics.DisruptionActions, 1, metrics.Dimensions{"method": cmd.Method, "action": cmd.Action(), "nodepool": n.NodePool})
	}
	if cmd.Action() == ActionDelete {
		log.InfoContext(ctx, cmd.Message)
		if err := c.markForDeletion(ctx, v, cmd); err != nil {
			return err
		}
		res.Done = true
		return c.dropCommand(ctx, version)
	}

	// Write-ahead: the command is Replacing before any candidate is marked,
	// so a pass killed in between resumes the marking (replacing) instead
	// of finding marked candidates and dropping the command as invalid.
	cmd.Phase = PhaseReplacing
	cmd.ReplacingSince = v.Now
	version, err = c.saveCommand(ctx, cmd, version)
	if err != nil {
		return err
	}
	res.Phase = cmd.Phase
	if err := c.ensureDisrupting(ctx, v, cmd, log); err != nil {
		return err
	}
	log.InfoContext(ctx, cmd.Message, "phase", PhaseReplacing)
	c.provision(ctx, cmd, log)
	_, err = c.saveCommand(ctx, cmd, version)
	res.Waiting = "replacements"
	return err
}

// ensureDisrupting marks the candidates Disrupting and taints them
// karpenter.sh/disrupted:NoSchedule (idempotent), as Karpenter does before
// launching replacements: no new pods land on them, and the provisioner
// moves their pods to new capacity while the lifecycle leaves them running.
func (c *Controller) ensureDisrupting(ctx context.Context, v *View, cmd *Command, log *slog.Logger) error {
	now := metav1.NewTime(v.Now)
	for _, n := range cmd.Candidates {
		if node, ok := v.Cluster.NodeForClaim(n.Claim); ok && node.Claim != nil && node.Claim.IsTrue(apis.ConditionDisrupting) && node.MarkedForDeletion() &&
			node.Node != nil && slices.ContainsFunc(node.Node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == apis.DisruptedTaintKey }) {
			continue
		}
		var newly bool
		_, err := c.d.Store.MutateNodeClaim(ctx, n.Claim, func(x *apis.NodeClaim) error {
			newly = false
			if !x.Deleting() && !x.IsTrue(apis.ConditionDisrupting) {
				x.SetCondition(apis.ConditionDisrupting, metav1.ConditionTrue, string(cmd.Reason), cmd.Message, now)
				newly = true
			}
			return nil
		})
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("disruption: mark nodeclaim %s disrupting: %w", n.Claim, err)
		}
		if _, err := c.d.Cluster.AddTaint(ctx, n.Node, termination.DisruptedTaint()); err != nil {
			log.WarnContext(ctx, "tainting candidate node", "node", n.Node, "error", err)
		}
		if newly {
			c.event(ctx, v, n.Node, kube.EventNormal, ReasonDisrupting, "%s", cmd.Message)
		}
	}
	return nil
}

// replacing waits for the replacements to be initialized, then hands the
// candidates to termination; past ReplacementTimeout it rolls back.
func (c *Controller) replacing(ctx context.Context, v *View, cmd *Command, version int64, res *Result, log *slog.Logger) error {
	if err := c.ensureDisrupting(ctx, v, cmd, log); err != nil {
		return err
	}
	var live []string
	for _, n := range cmd.Candidates {
		if node, ok := v.Cluster.NodeForClaim(n.Claim); ok && node.Node != nil {
			live = append(live, node.Name)
		}
	}
	ready, why, err := ReadyToDrain(ctx, v.Cluster, live)
	if err != nil {
		return err
	}
	if ready {
		log.InfoContext(ctx, "replacements initialized; draining candidates", "message", cmd.Message, "replacements", cmd.ReplacementClaims)
		if err := c.markForDeletion(ctx, v, cmd); err != nil {
			return err
		}
		c.remember(ctx, cmd, v.Now)
		res.Done = true
		return c.dropCommand(ctx, version)
	}
	if v.Now.Sub(cmd.ReplacingSince) > c.s.ReplacementTimeout {
		log.WarnContext(ctx, "replacements not initialized in time; rolling back", "why", why, "timeout", c.s.ReplacementTimeout.String())
		c.rollback(ctx, v, cmd, "replacements were not initialized within "+c.s.ReplacementTimeout.String()+": "+why)
		c.d.Metrics.Add(metrics.DisruptionDecisions, 1, metrics.Dimensions{"method": cmd.Method, "decision": "rolled-back"})
		res.Dropped = "replacement timeout: " + why
		return c.dropCommand(ctx, version)
	}
	res.Waiting = why
	// Idempotent: an in-flight replacement already takes the pods, so the
	// pass launches nothing more; it matters when the last one was skipped
	// (provisioner lease held) or a launch failed.
	c.provision(ctx, cmd, log)
	_, err = c.saveCommand(ctx, cmd, version)
	return err
}

func (c *Controller) provision(ctx context.Context, cmd *Command, log *slog.Logger) {
	pr, err := c.d.Provision(ctx)
	if err != nil {
		log.WarnContext(ctx, "replacement provisioning pass failed; retried on the next pass", "error", err)
		return
	}
	for _, name := range pr.Launched {
		if !slices.Contains(cmd.ReplacementClaims, name) {
			cmd.ReplacementClaims = append(cmd.ReplacementClaims, name)
		}
	}
	log.InfoContext(ctx, "replacement provisioning pass", "skipped", pr.Skipped, "launched", pr.Launched, "failed", len(pr.Failed))
}

// markForDeletion hands the candidates to the termination workflow (the
// deletion mark, then a lifecycle message so the drain starts at once).
func (c *Controller) markForDeletion(ctx context.Context, v *View, cmd *Command) error {
	for _, n := range cmd.Candidates {
		updated, first, err := termination.Mark(ctx, c.d.Store, n.Claim, string(cmd.Reason), cmd.Message, v.Now)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("disruption: %w", err)
		}
		if first {
			c.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": string(cmd.Reason), "nodepool": updated.NodePoolName()})
			if cmd.Action() == ActionDelete {
				c.event(ctx, v, n.Node, kube.EventNormal, ReasonDisrupting, "%s", cmd.Message)
			}
			c.log.InfoContext(ctx, "nodeclaim marked for deletion", "nodeclaim", n.Claim, "node", n.Node, "nodepool", n.NodePool,
				"reason", cmd.Reason, "method", cmd.Method)
		}
		if c.d.Requeue != nil {
			msg := queue.Message{Kind: queue.KindLifecycle, Subject: n.Claim, Reason: "disruption:" + cmd.Method, SentAt: v.Now}
			if err := c.d.Requeue(ctx, msg, 0); err != nil {
				c.log.WarnContext(ctx, "handing the claim to the lifecycle", "nodeclaim", n.Claim, "error", err)
			}
		}
	}
	return nil
}

// sweepOrphans releases claims this controller marked Disrupting whose
// command is gone (expired or lost): with no command to finish them they
// would stay tainted and out of use forever. Disrupting marks of others
// (the interruption controller's rebalance replacements) are left alone.
func (c *Controller) sweepOrphans(ctx context.Context, v *View) int {
	var orphans []CommandNode
	for _, n := range v.Cluster.Nodes {
		cl := n.Claim
		if cl == nil || cl.Deleting() || !cl.IsTrue(apis.ConditionDisrupting) || n.Node == nil {
			continue
		}
		switch apis.DisruptionReason(cl.Condition(apis.ConditionDisrupting).Reason) {
		case apis.DisruptionReasonEmpty, apis.DisruptionReasonDrifted, apis.DisruptionReasonUnderutilized:
			orphans = append(orphans, CommandNode{Claim: cl.Name, Node: n.Name, NodePool: n.NodePool()})
		}
	}
	if len(orphans) == 0 {
		return 0
	}
	c.log.WarnContext(ctx, "nodes disrupting without a pending command; releasing them", "nodes", len(orphans))
	c.rollback(ctx, v, &Command{Candidates: orphans}, "its disruption command was lost before the replacement was ready")
	return len(orphans)
}

// rollback clears the Disrupting condition and the taint so the nodes take
// pods again.
func (c *Controller) rollback(ctx context.Context, v *View, cmd *Command, why string) {
	for _, n := range cmd.Candidates {
		_, err := c.d.Store.MutateNodeClaim(ctx, n.Claim, func(x *apis.NodeClaim) error {
			if !x.Deleting() {
				x.ClearCondition(apis.ConditionDisrupting)
			}
			return nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			c.log.WarnContext(ctx, "clearing Disrupting", "nodeclaim", n.Claim, "error", err)
		}
		if node, ok := v.Cluster.NodeForClaim(n.Claim); ok && node.Claim != nil && !node.Claim.Deleting() && node.Node != nil {
			if _, err := c.d.Cluster.RemoveTaints(ctx, node.Name, apis.DisruptedTaintKey, corev1.TaintEffectNoSchedule); err != nil {
				c.log.WarnContext(ctx, "removing the disrupted taint", "node", node.Name, "error", err)
			}
		}
		c.event(ctx, v, n.Node, kube.EventWarning, ReasonBlocked, "Disruption rolled back: %s", why)
	}
}

// view reads one pass's truth.
func (c *Controller) view(ctx context.Context) (*View, error) {
	snap, err := c.d.Cluster.Snapshot(ctx, kube.SnapshotOptions{})
	if err != nil {
		return nil, fmt.Errorf("disruption: %w", err)
	}
	claims, err := c.d.Store.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("disruption: list nodeclaims: %w", err)
	}
	cat, err := c.d.Catalog(ctx)
	if err != nil {
		return nil, fmt.Errorf("disruption: instance types: %w", err)
	}
	var unavailable map[scheduling.OfferingKey]bool
	if c.d.Unavailable != nil {
		if unavailable, err = c.d.Unavailable(ctx); err != nil {
			c.log.WarnContext(ctx, "reading the ICE set", "error", err)
		}
	}
	cl, err := state.Build(state.Sources{Snapshot: snap, Claims: claims, Config: c.d.Config, Catalog: cat, Unavailable: unavailable})
	if err != nil {
		return nil, fmt.Errorf("disruption: %w", err)
	}
	v := &View{Cluster: cl, PDBs: snap.PDBs, Now: c.d.Now(), Settings: c.s, CloudDrift: c.cloudDrift(ctx, cl)}
	v.History = c.history(ctx)
	return v, nil
}

// cloudDrift asks EC2 which registered claims' instances drifted.
func (c *Controller) cloudDrift(ctx context.Context, cl *state.Cluster) map[string]string {
	out := map[string]string{}
	if c.d.Cloud == nil {
		return out
	}
	insts, err := c.d.Cloud.ListClusterInstances(ctx)
	if err != nil {
		c.log.WarnContext(ctx, "listing instances for drift; AMI/subnet/security-group drift not checked this pass", "error", err)
		return out
	}
	byID := map[string]nwaws.Instance{}
	for _, i := range insts {
		byID[i.ID] = i
	}
	for _, n := range cl.Nodes {
		if n.Claim == nil || n.Node == nil || n.Claim.Deleting() {
			continue
		}
		inst, ok := byID[n.Claim.Status.InstanceID]
		if !ok {
			continue
		}
		np := c.d.Config.NodePool(n.NodePool())
		if np == nil {
			continue
		}
		nc := c.d.Config.NodeClassFor(np)
		if nc == nil {
			continue
		}
		reason, err := c.d.Cloud.Drift(ctx, nc, inst)
		if err != nil {
			c.log.WarnContext(ctx, "checking drift", "nodeclaim", n.Claim.Name, "instance-id", inst.ID, "error", err)
			continue
		}
		if reason != "" {
			out[n.Claim.Name] = reason
		}
	}
	return out
}

func (c *Controller) loadCommand(ctx context.Context) (*Command, int64, error) {
	kv, err := c.d.Store.GetKV(ctx, CommandKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("disruption: read pending command: %w", err)
	}
	var cmd Command
	if err := json.Unmarshal(kv.Value, &cmd); err != nil {
		// Unreadable: drop it rather than block disruption forever.
		c.log.ErrorContext(ctx, "pending disruption command unreadable; dropped", "error", err)
		return nil, 0, c.dropCommand(ctx, kv.Version)
	}
	return &cmd, kv.Version, nil
}

func (c *Controller) saveCommand(ctx context.Context, cmd *Command, version int64) (int64, error) {
	body, err := json.Marshal(cmd)
	if err != nil {
		return version, fmt.Errorf("disruption: encode command: %w", err)
	}
	// The TTL outlives any command, so a lost one cannot block forever.
	v, err := c.d.Store.PutKV(ctx, CommandKey, body, version, c.s.ReplacementTimeout+c.s.ValidationDelay+time.Hour)
	if err != nil {
		return version, fmt.Errorf("disruption: save command: %w", err)
	}
	return v, nil
}

func (c *Controller) dropCommand(ctx context.Context, version int64) error {
	if version == 0 {
		return nil
	}
	if err := c.d.Store.DeleteKV(ctx, CommandKey, version); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("disruption: clear command: %w", err)
	}
	return nil
}

func (c *Controller) history(ctx context.Context) []HistoryEntry {
	kv, err := c.d.Store.GetKV(ctx, HistoryKey)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			c.log.WarnContext(ctx, "reading disruption history", "error", err)
		}
		return nil
	}
	var h []HistoryEntry
	if err := json.Unmarshal(kv.Value, &h); err != nil {
		c.log.WarnContext(ctx, "disruption history unreadable", "error", err)
		return nil
	}
	return h
}

// remember records a finished replacement for flip-flop protection.
func (c *Controller) remember(ctx context.Context, cmd *Command, now time.Time) {
	if len(cmd.ReplacementClaims) == 0 {
		return
	}
	for range 3 {
		var h []HistoryEntry
		var version int64
		if kv, err := c.d.Store.GetKV(ctx, HistoryKey); err == nil {
			version = kv.Version
			_ = json.Unmarshal(kv.Value, &h)
		}
		kept := h[:0]
		for _, e := range h {
			if now.Sub(e.At) <= c.s.FlipFlopWindow {
				kept = append(kept, e)
			}
		}
		var from []string
		for _, n := range cmd.Candidates {
			from = append(from, n.InstanceType)
		}
		kept = append(kept, HistoryEntry{At: now, FromTypes: from, Replacements: cmd.ReplacementClaims})
		body, _ := json.Marshal(kept)
		_, err := c.d.Store.PutKV(ctx, HistoryKey, body, version, c.s.FlipFlopWindow)
		if err == nil || !errors.Is(err, store.ErrConflict) {
			if err != nil {
				c.log.WarnContext(ctx, "recording disruption history", "error", err)
			}
			return
		}
	}
}

// findings turns a decision's findings into node events (capped).
func (c *Controller) findings(ctx context.Context, v *View, fs []Finding) {
	for i, f := range fs {
		if i >= c.s.MaxEvents {
			c.log.InfoContext(ctx, "disruption findings capped", "emitted", c.s.MaxEvents, "dropped", len(fs)-c.s.MaxEvents)
			return
		}
		c.log.InfoContext(ctx, "disruption finding", "node", f.Node, "reason", f.Reason, "message", f.Text)
		c.event(ctx, v, f.Node, kube.EventNormal, f.Reason, "%s", f.Text)
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

// poolCosts is clusterCost by NodePool (the dashboard's cost per pool).
func poolCosts(cl *state.Cluster) map[string]float64 {
	out := map[string]float64{}
	for _, n := range cl.Nodes {
		if n.Claim != nil {
			out[n.Claim.NodePoolName()] += nodePrice(cl, n)
		}
	}
	return out
}

// clusterCost is what the managed nodes cost per hour.
func clusterCost(cl *state.Cluster) float64 {
	sum := 0.0
	for _, n := range cl.Nodes {
		if n.Claim != nil {
			sum += nodePrice(cl, n)
		}
	}
	return sum
}

// nodePrice is the hourly price of a managed node's offering, read from its
// Node's labels once registered, else from its claim's.
func nodePrice(cl *state.Cluster, n *state.Node) float64 {
	labels := n.Claim.Labels
	if n.Node != nil {
		labels = n.Node.Labels
	}
	return offeringPrice(cl.Catalog, labels[catalog.LabelInstanceType], labels[catalog.LabelTopologyZone], labels[apis.CapacityTypeLabelKey])
}
