// Package provisioning is nodewright's provisioner: it turns pending pods
// into NodeClaims and instances, once per run, under a lease.
//
// A run takes the provisioner lease, waits for the burst of pending pods to
// settle (batching), snapshots the cluster, solves with existing nodes and
// in-flight NodeClaims as capacity, writes the planned claims, launches them
// concurrently, records the results and re-plans in the same run the pods
// of claims that hit capacity errors. Every step is idempotent and a run
// killed anywhere is completed by the next one (see ClaimName).
//
// Static NodePools (spec.replicas) are not planned for pods: the first
// round of every run brings each to its replica count instead, launching
// the shortfall through the same write-ahead path and marking the surplus
// for deletion (see static.go).
//
// # Safety rules
//
// The provisioner adds capacity; the only capacity it takes away is a
// static pool's surplus over its replicas, exactly that many of the pool's
// own claims, through termination.Mark and the lifecycle's drain. It keeps
// these rules (the crash sweep in integration_test.go checks the first
// after killing a run between every two external calls):
//   - It never launches twice for one NodeClaim: the claim is written before
//     its launch, its name is CreateFleet's client token, and a run that
//     finds a claim without an instance looks for the instance tagged with
//     it before launching.
//   - It never acts on another stack's resources: every launch carries this
//     stack's owner tag, and launch templates are reused only when they
//     carry it.
//   - It never launches beyond a NodePool's limits, counting claims in
//     flight.
package provisioning

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/store"
)

// Store keys of the provisioner.
const (
	LeaseName  = "provisioner"
	LastRunKey = "provisioner/last-run"
)

// Trigger sources.
const (
	TriggerSchedule = "schedule"
	TriggerNudge    = "nudge"
	TriggerManual   = "manual"
)

// Event reasons (Karpenter's).
const (
	ReasonNominated        = "Nominated"
	ReasonFailedScheduling = "FailedScheduling"
)

// snapshotParts is what a provisioning pass reads (PDBs are disruption's).
const snapshotParts = kube.PartPendingPods | kube.PartBoundPods | kube.PartNodes | kube.PartDaemonSets | kube.PartVolumes

// createdReason is the reason dimension of karpenter_nodeclaims_created_total:
// "provisioning" for pending pods (schedule, webhook nudges), "replacement"
// when the disruption or interruption function runs the pass to replace
// nodes it is about to take away (they call with TriggerManual).
func createdReason(tr Trigger) string {
	if tr.Source == TriggerManual {
		return "replacement"
	}
	return "provisioning"
}

// Trigger says why a run starts.
type Trigger struct {
	Source string
	// Nudges are the SentAt times of the provision nudges behind the run.
	Nudges []time.Time
}

// Result summarises a run.
type Result struct {
	// Skipped says why the run did nothing ("lease held", "stale nudges").
	Skipped string `json:"skipped,omitempty"`
	// Pending is the provisionable pending pods of the final snapshot.
	Pending  int           `json:"pending"`
	Batch    time.Duration `json:"batch"`
	Rounds   int           `json:"rounds"`
	Created  []string      `json:"created,omitempty"`
	Launched []string      `json:"launched,omitempty"`
	// Resumed are claims of earlier runs this run launched or recorded.
	Resumed []string `json:"resumed,omitempty"`
	// Failed are claims whose launch failed for reasons other than
	// capacity; they stay for the next run to retry.
	Failed []string `json:"failed,omitempty"`
	// CapacityFailed are claims deleted after capacity errors (their pods
	// were re-planned).
	CapacityFailed []string `json:"capacityFailed,omitempty"`
	// Throttled are claims kept unlaunched because EC2 throttled the
	// launch path (this claim's call, or an earlier one of the run): no
	// capacity answer came, so they wait for a later run (ThrottleBackoff).
	Throttled     []string      `json:"throttled,omitempty"`
	Nominated     int           `json:"nominated"`
	Unschedulable int           `json:"unschedulable"`
	SolveTime     time.Duration `json:"solveTime"`
	Duration      time.Duration `json:"duration"`
}

// Pass is one provisioning pass run on behalf of another controller: the
// disruption and interruption controllers call it after marking nodes, so
// the pods of those nodes get their replacements through this one launch
// path. A pass that did not run (another holds the provisioner lease) says
// why in Result.Skipped.
type Pass func(ctx context.Context) (Result, error)

// Pass returns p's provisioning pass for other controllers (a manual trigger:
// no batching window, the current snapshot as it is).
func (p *Provisioner) Pass() Pass {
	return func(ctx context.Context) (Result, error) {
		res, err := p.Run(ctx, Trigger{Source: TriggerManual})
		if res == nil {
			return Result{}, err
		}
		return *res, err
	}
}

// Provisioner runs provisioning passes. Safe for concurrent use (the lease
// serialises runs).
type Provisioner struct {
	d      Deps
	s      Settings
	log    *slog.Logger
	holder string
}

// New checks the dependencies and returns a Provisioner.
func New(d Deps) (*Provisioner, error) {
	switch {
	case d.Store == nil:
		return nil, errors.New("provisioner: Store is required")
	case d.Cluster == nil:
		return nil, errors.New("provisioner: Cluster is required")
	case d.Launcher == nil:
		return nil, errors.New("provisioner: Launcher is required")
	case d.Catalog == nil:
		return nil, errors.New("provisioner: Catalog is required")
	case d.Config == nil:
		return nil, errors.New("provisioner: Config is required")
	}
	d.Log, d.Now, d.Metrics = basedeps.Logger(d.Log), basedeps.Clock(d.Now), basedeps.Recorder(d.Metrics)
	d.Sleep = basedeps.Sleeper(d.Sleep)
	s := d.Settings
	s.defaults()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("provisioner: holder id: %w", err)
	}
	return &Provisioner{d: d, s: s, log: d.Log, holder: "provisioner-" + hex.EncodeToString(b[:])}, nil
}

// Run performs one provisioning pass.
func (p *Provisioner) Run(ctx context.Context, tr Trigger) (*Result, error) {
	start := p.d.Now()
	res := &Result{}
	defer func() { res.Duration = p.d.Now().Sub(start) }()
	last, lastVersion, err := p.lastRun(ctx)
	if err != nil {
		// Only the stale-nudge shortcut depends on it: run anyway.
		p.log.WarnContext(ctx, "reading the last provisioner run", "error", err)
	}
	if tr.Source == TriggerNudge && last != nil && len(tr.Nudges) > 0 && allBefore(tr.Nudges, last.StartedAt) {
		res.Skipped = "stale nudges"
		p.log.InfoContext(ctx, "provisioner run skipped: nudges predate the last completed run", "nudges", len(tr.Nudges), "last-run-started", last.StartedAt)
		return res, nil
	}
	lease, err := p.d.Store.AcquireLease(ctx, LeaseName, p.holder, p.s.LeaseDuration)
	if errors.Is(err, store.ErrLeaseHeld) {
		res.Skipped = "lease held"
		p.log.InfoContext(ctx, "provisioner run skipped: another run holds the lease", "error", err.Error())
		p.nudgeAfterHolder(ctx, tr)
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("acquire provisioner lease: %w", err)
	}
	runCtx, stop := p.keepLease(ctx, lease)
	defer stop()

	runStart := p.d.Now()
	err = p.run(runCtx, lease, res, createdReason(tr))
	if cause := context.Cause(runCtx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	if err == nil {
		rec := lastRun{StartedAt: runStart, FinishedAt: p.d.Now(), Token: lease.Token}
		if werr := p.recordRun(runCtx, rec, lastVersion); werr != nil {
			p.log.WarnContext(ctx, "recording the provisioner run", "error", werr)
		}
	}
	if ferr := p.d.Metrics.Flush(); ferr != nil {
		p.log.WarnContext(ctx, "flushing metrics", "error", ferr)
	}
	res.Duration = p.d.Now().Sub(start)
	attrs := []any{"run", lease.Token, "trigger", tr.Source, "pending", res.Pending, "batch", res.Batch.String(),
		"rounds", res.Rounds, "created", len(res.Created), "launched", len(res.Launched), "resumed", len(res.Resumed),
		"failed", len(res.Failed), "capacity-failed", len(res.CapacityFailed), "throttled", len(res.Throttled), "nominated", res.Nominated,
		"unschedulable", res.Unschedulable, "solve-time", res.SolveTime.String(), "duration", res.Duration.String()}
	if err != nil {
		p.log.ErrorContext(ctx, "provisioner run failed", append(attrs, "error", err.Error())...)
		return res, err
	}
	p.log.InfoContext(ctx, "provisioner run", attrs...)
	return res, nil
}
