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
// # Safety rules
//
// The provisioner only adds capacity, and it keeps these rules (the crash
// sweep in integration_test.go checks the first after killing a run between
// every two external calls):
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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
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
	CapacityFailed []string      `json:"capacityFailed,omitempty"`
	Nominated      int           `json:"nominated"`
	Unschedulable  int           `json:"unschedulable"`
	SolveTime      time.Duration `json:"solveTime"`
	Duration       time.Duration `json:"duration"`
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

// lastRun is the record of the last completed run, which lets nudges sent
// before it started be dropped: that run already saw their pods.
type lastRun struct {
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt"`
	Token      int64     `json:"token"`
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
		p.log.InfoContext(ctx, "provisioner run skipped: another run holds the lease; it will see the pending pods", "error", err.Error())
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
		err = fmt.Errorf("%w (%v)", err, cause)
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
		"failed", len(res.Failed), "capacity-failed", len(res.CapacityFailed), "nominated", res.Nominated,
		"unschedulable", res.Unschedulable, "solve-time", res.SolveTime.String(), "duration", res.Duration.String()}
	if err != nil {
		p.log.ErrorContext(ctx, "provisioner run failed", append(attrs, "error", err.Error())...)
		return res, err
	}
	p.log.InfoContext(ctx, "provisioner run", attrs...)
	return res, nil
}

// keepLease renews the lease in the background while the run lasts and
// cancels the run if the lease is lost: another provisioner may be planning
// by then, and two planners would double the capacity.
func (p *Provisioner) keepLease(ctx context.Context, lease *store.Lease) (context.Context, func()) {
	runCtx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(p.s.LeaseDuration / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-runCtx.Done():
				return
			case <-t.C:
				if err := p.d.Store.RenewLease(runCtx, lease, p.s.LeaseDuration); err != nil {
					if errors.Is(err, store.ErrLeaseLost) {
						cancel(fmt.Errorf("provisioner lease lost: %w", err))
						return
					}
					p.log.WarnContext(runCtx, "renewing the provisioner lease", "error", err)
				}
			}
		}
	})
	return runCtx, func() {
		close(done)
		wg.Wait()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		if err := p.d.Store.ReleaseLease(rctx, lease); err != nil && !errors.Is(err, store.ErrLeaseLost) {
			p.log.WarnContext(ctx, "releasing the provisioner lease", "error", err)
		}
		cancel(nil)
	}
}

func (p *Provisioner) lastRun(ctx context.Context) (*lastRun, int64, error) {
	kv, err := p.d.Store.GetKV(ctx, LastRunKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var lr lastRun
	if err := json.Unmarshal(kv.Value, &lr); err != nil {
		return nil, kv.Version, fmt.Errorf("decode %s: %w", LastRunKey, err)
	}
	return &lr, kv.Version, nil
}

func (p *Provisioner) recordRun(ctx context.Context, rec lastRun, version int64) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := p.d.Store.PutKV(ctx, LastRunKey, body, version, 0); err != nil {
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		// Someone wrote it since we read it (we held the lease, so it was
		// a run that lost it): re-read and write ours only if newer.
		cur, v, rerr := p.lastRun(ctx)
		if rerr != nil {
			return rerr
		}
		if cur != nil && !cur.StartedAt.Before(rec.StartedAt) {
			return nil
		}
		_, err = p.d.Store.PutKV(ctx, LastRunKey, body, v, 0)
		return err
	}
	return nil
}

// allBefore reports whether every nudge was sent before t. A nudge without
// a send time can never be proved stale.
func allBefore(ts []time.Time, t time.Time) bool {
	for _, x := range ts {
		if x.IsZero() || !x.Before(t) {
			return false
		}
	}
	return true
}

// pass is one run's working state.
type pass struct {
	p     *Provisioner
	lease *store.Lease
	run   string
	res   *Result
	// reason is the "reason" dimension of karpenter_nodeclaims_created_total.
	reason  string
	snap    *kube.Snapshot
	catalog *catalog.Catalog
	events  atomic.Int64
	dropped atomic.Int64
	eventQ  chan podEvent

	mu sync.Mutex
	// nominated maps a pod (namespace/name) to where this run put it, so a
	// re-plan keeps those pods' room taken.
	nominated map[string]nomination
}

type nomination struct {
	pod    *corev1.Pod
	target string // node or claim name
}

// launched is an instance with what the claim records about it.
type launched struct {
	nwaws.Instance
	labels      map[string]string
	capacity    corev1.ResourceList
	allocatable corev1.ResourceList
}

// job is one claim to create and/or launch.
type job struct {
	claim  *apis.NodeClaim
	create bool
	pods   []*corev1.Pod
	price  float64
}

type outcome struct {
	job      *job
	inst     launched
	err      error
	capacity bool // the claim hit capacity errors everywhere: re-plan its pods
	done     bool // the claim is launched and recorded (or was already)
}

func (p *Provisioner) run(ctx context.Context, lease *store.Lease, res *Result, reason string) error {
	pa := &pass{p: p, lease: lease, run: strconv.FormatInt(lease.Token, 10), res: res, nominated: map[string]nomination{}, reason: reason}
	waitEvents := pa.startEvents(ctx)
	defer waitEvents()
	// The batch window is mostly waiting: fetch the catalog and warm the
	// launch path's discovery meanwhile, so the launch follows the window's
	// close by as little as possible.
	prefetched := make(chan error, 1)
	go func() {
		var err error
		pa.catalog, err = p.d.Catalog(ctx)
		p.warmLaunch(ctx)
		prefetched <- err
	}()
	batchStart := p.d.Now()
	n, err := p.batch(ctx)
	if err != nil {
		<-prefetched
		return err
	}
	res.Batch = p.d.Now().Sub(batchStart)
	p.d.Metrics.Observe(metrics.ProvisionerBatchSize, metrics.Count, float64(n), nil)

	pa.snap, err = p.d.Cluster.Snapshot(ctx, kube.SnapshotOptions{Parts: snapshotParts})
	if cerr := <-prefetched; cerr != nil && err == nil {
		return fmt.Errorf("provisioner: instance types: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("provisioner: %w", err)
	}

	var replan []*corev1.Pod
	for round := 0; round < p.s.MaxRounds; round++ {
		res.Rounds = round + 1
		cluster, err := pa.cluster(ctx)
		if err != nil {
			return err
		}
		if round == 0 {
			pa.observePending(cluster)
		}
		opts := state.InputOptions{IncludeDeletingPods: round == 0}
		if round > 0 {
			opts.Pods = replan
		}
		in, err := cluster.Input(opts)
		if err != nil {
			return fmt.Errorf("provisioner: %w", err)
		}
		if round > 0 {
			in.Nodes = pa.withNominated(in.Nodes, replan)
		}
		solveStart := p.d.Now()
		plan, err := scheduling.Solve(ctx, in)
		solveTime := p.d.Now().Sub(solveStart)
		res.SolveTime += solveTime
		p.d.Metrics.Observe(metrics.SchedulingDuration, metrics.Seconds, solveTime.Seconds(), nil)
		if err != nil {
			return fmt.Errorf("provisioner: solve: %w", err)
		}
		jobs, err := pa.jobs(cluster, plan, round)
		if err != nil {
			return err
		}
		lastRound := round == p.s.MaxRounds-1
		outcomes := pa.launchAll(ctx, jobs)
		replan = replan[:0]
		for _, o := range outcomes {
			if o.capacity {
				replan = append(replan, o.job.pods...)
			}
		}
		pa.nominateExisting(ctx, cluster, plan, jobs)
		pa.unschedulable(ctx, plan.Unschedulable)
		if ctx.Err() != nil {
			return fmt.Errorf("provisioner: %w", context.Cause(ctx))
		}
		if len(replan) == 0 {
			break
		}
		if lastRound {
			for _, pod := range replan {
				pa.podEvent(ctx, pod, kube.EventWarning, ReasonFailedScheduling,
					"Failed to schedule pod, every offering of its NodeClaim was short of capacity after %d re-plans", p.s.MaxRounds)
			}
			res.Unschedulable += len(replan)
		}
	}
	p.d.Metrics.Gauge(metrics.PodsUnschedulable, float64(res.Unschedulable), nil)
	if d := pa.dropped.Load(); d > 0 {
		p.log.InfoContext(ctx, "pod events capped", "emitted", pa.events.Load(), "dropped", d)
	}
	return nil
}

// discoverer is the discovery side of the launch path (*aws.Provider),
// whose answers the provider caches.
type discoverer interface {
	Cluster(ctx context.Context) (nwaws.ClusterInfo, error)
	Subnets(ctx context.Context, nc *apis.EC2NodeClass) ([]nwaws.Subnet, error)
	SecurityGroups(ctx context.Context, nc *apis.EC2NodeClass) ([]nwaws.SecurityGroup, error)
	AMIs(ctx context.Context, nc *apis.EC2NodeClass) ([]nwaws.AMI, error)
}

// warmLaunch fills the launcher's discovery caches for every configured
// EC2NodeClass. Errors are left for the launch to report.
func (p *Provisioner) warmLaunch(ctx context.Context) {
	disc, ok := p.d.Launcher.(discoverer)
	if !ok {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = disc.Cluster(ctx) })
	for _, nc := range p.d.Config.NodeClasses {
		wg.Go(func() { _, _ = disc.Subnets(ctx, nc) })
		wg.Go(func() { _, _ = disc.SecurityGroups(ctx, nc) })
		wg.Go(func() { _, _ = disc.AMIs(ctx, nc) })
	}
	wg.Wait()
}

// cluster re-reads the claims and the ICE set and joins them with the
// run's snapshot.
func (pa *pass) cluster(ctx context.Context) (*state.Cluster, error) {
	p := pa.p
	claims, err := p.d.Store.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("provisioner: list nodeclaims: %w", err)
	}
	var unavailable map[scheduling.OfferingKey]bool
	if p.d.Unavailable != nil {
		if unavailable, err = p.d.Unavailable(ctx); err != nil {
			// The launch path consults the ICE set itself; planning with a
			// stale one costs at most a re-plan.
			p.log.WarnContext(ctx, "reading the ICE set", "error", err)
		}
	}
	c, err := state.Build(state.Sources{Snapshot: pa.snap, Claims: claims, Config: p.d.Config, Catalog: pa.catalog, Unavailable: unavailable})
	if err != nil {
		return nil, fmt.Errorf("provisioner: %w", err)
	}
	for _, w := range c.Warnings {
		p.log.WarnContext(ctx, "cluster state", "warning", w)
	}
	return c, nil
}

func (pa *pass) observePending(c *state.Cluster) {
	m := pa.p.d.Metrics
	pa.res.Pending = len(c.Pending)
	m.Gauge(metrics.PodsPending, float64(len(c.Pending)), nil)
	oldest := 0.0
	now := pa.p.d.Now()
	for _, pod := range c.Pending {
		if age := now.Sub(pod.CreationTimestamp.Time).Seconds(); !pod.CreationTimestamp.IsZero() && age > oldest {
			oldest = age
		}
	}
	m.Gauge(metrics.OldestPendingPodSeconds, oldest, nil)
}

// withNominated adds the pods this run already put on nodes and claims to
// those nodes (copies), so a re-plan of other pods sees their room taken.
func (pa *pass) withNominated(nodes []*scheduling.ExistingNode, replan []*corev1.Pod) []*scheduling.ExistingNode {
	skip := make(map[string]bool, len(replan))
	for _, pod := range replan {
		skip[podKey(pod)] = true
	}
	byTarget := map[string][]*corev1.Pod{}
	pa.mu.Lock()
	for k, n := range pa.nominated {
		if !skip[k] {
			byTarget[n.target] = append(byTarget[n.target], n.pod)
		}
	}
	pa.mu.Unlock()
	out := make([]*scheduling.ExistingNode, len(nodes))
	for i, en := range nodes {
		extra := byTarget[en.Name]
		if len(extra) == 0 {
			out[i] = en
			continue
		}
		cp := *en
		cp.Pods = append(append([]*corev1.Pod(nil), en.Pods...), extra...)
		out[i] = &cp
	}
	return out
}

// jobs lists the claims to launch this round: in the first round every live
// claim an earlier run left unlaunched (crash or launch error), then the
// plan's new claims.
func (pa *pass) jobs(c *state.Cluster, plan *scheduling.Plan, round int) ([]*job, error) {
	p := pa.p
	var jobs []*job
	if round == 0 {
		placed := map[string][]*corev1.Pod{}
		for _, np := range plan.ExistingNodes {
			placed[np.Name] = np.PodRefs
		}
		for _, n := range c.Nodes {
			if n.Claim == nil || n.Launched() || n.MarkedForDeletion() {
				continue
			}
			jobs = append(jobs, &job{claim: n.Claim, pods: placed[n.Name]})
		}
	}
	now := metav1.NewTime(p.d.Now())
	for _, cp := range plan.NodeClaims {
		np := p.d.Config.NodePool(cp.NodePool)
		if np == nil {
			return nil, fmt.Errorf("provisioner: plan names NodePool %s, which is not configured", cp.NodePool)
		}
		name := ClaimName(cp.NodePool, pa.lease.Token, round, podUIDs(cp.PodRefs))
		cl := newClaim(name, cp, np, p.d.Config.NodeClassFor(np), pa.run, now)
		jobs = append(jobs, &job{claim: cl, create: true, pods: cp.PodRefs, price: cp.PricePerHour})
		p.log.Info("nodeclaim planned", "nodeclaim", name, "nodepool", cp.NodePool, "instance-type", cp.InstanceType,
			"zone", cp.Zone, "capacity-type", cp.CapacityType, "price", cp.PricePerHour, "options", len(cp.InstanceTypeOptions),
			"pods", len(cp.PodRefs), "round", round)
	}
	return jobs, nil
}

// launchAll runs the jobs with bounded concurrency.
func (pa *pass) launchAll(ctx context.Context, jobs []*job) []outcome {
	out := make([]outcome, len(jobs))
	sem := make(chan struct{}, pa.p.s.LaunchConcurrency)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i] = outcome{job: j, err: ctx.Err()}
				return
			}
			defer func() { <-sem }()
			out[i] = pa.launch(ctx, j)
		})
	}
	wg.Wait()
	return out
}

// launch creates (when new), launches and records one claim.
func (pa *pass) launch(ctx context.Context, j *job) outcome {
	p := pa.p
	o := outcome{job: j}
	cl := j.claim
	log := p.log.With("nodeclaim", cl.Name, "nodepool", cl.NodePoolName())
	if j.create {
		err := p.d.Store.CreateNodeClaim(ctx, cl)
		switch {
		case errors.Is(err, store.ErrAlreadyExists):
			// A retried write of this run: continue with the stored record.
			stored, gerr := p.d.Store.GetNodeClaim(ctx, cl.Name)
			if gerr != nil {
				o.err = fmt.Errorf("create nodeclaim %s: %w", cl.Name, gerr)
				return o
			}
			cl = stored
			j.claim = stored
		case err != nil:
			o.err = fmt.Errorf("create nodeclaim %s: %w", cl.Name, err)
			log.ErrorContext(ctx, "creating nodeclaim", "error", err)
			return o
		default:
			pa.appendResult(&pa.res.Created, cl.Name)
			p.d.Metrics.Add(metrics.NodeClaimsCreated, 1, metrics.Dimensions{"nodepool": cl.NodePoolName(), "reason": pa.reason})
		}
	}
	if cl.IsTrue(apis.ConditionLaunched) {
		o.done = true
		pa.nominate(ctx, j.pods, cl.Name, "nodeclaim/"+cl.Name)
		return o
	}
	var nc *apis.EC2NodeClass
	if cl.Spec.NodeClassRef != nil {
		nc = p.d.Config.NodeClass(cl.Spec.NodeClassRef.Name)
	}
	if nc == nil {
		o.err = fmt.Errorf("launch nodeclaim %s: its EC2NodeClass is not configured", cl.Name)
		pa.launchFailed(ctx, log, cl, "NodeClassNotFound", o.err)
		return o
	}
	types := launchTypes(pa.catalog, cl)
	var inst nwaws.Instance
	var err error
	for attempt := 0; attempt < p.s.LaunchAttempts; attempt++ {
		if attempt > 0 {
			if serr := p.d.Sleep(ctx, time.Duration(attempt)*500*time.Millisecond); serr != nil {
				err = errors.Join(err, serr)
				break
			}
		}
		inst, err = p.d.Launcher.Launch(ctx, nwaws.LaunchRequest{NodeClaim: cl, NodeClass: nc, InstanceTypes: types})
		// A launch in doubt already waited for its instance to show up; the
		// lifecycle's launch timeout settles it, not another attempt here.
		if err == nil || errors.Is(err, nwaws.ErrInsufficientCapacity) || errors.Is(err, nwaws.ErrNodeClassNotReady) ||
			errors.Is(err, nwaws.ErrLaunchInDoubt) || ctx.Err() != nil {
			break
		}
		log.WarnContext(ctx, "launch attempt failed", "attempt", attempt+1, "error", err)
	}
	if err != nil {
		p.d.Metrics.Add(metrics.CloudProviderErrors, 1, metrics.Dimensions{"method": "Launch"})
		switch {
		case errors.Is(err, nwaws.ErrInsufficientCapacity):
			o.capacity = true
			o.err = err
			pa.capacityFailed(ctx, log, cl, len(j.pods), "InsufficientCapacity", err)
			return o
		case errors.Is(err, nwaws.ErrLaunchInDoubt):
			// An earlier, crashed run used this claim's client token and no
			// instance has shown up for it. The claim is given up under its
			// name and its pods re-planned onto a new claim (new name, new
			// tokens); should the doubted instance appear after all, it has
			// no live claim and the lifecycle's GC terminates it.
			o.capacity = true
			o.err = err
			pa.capacityFailed(ctx, log, cl, len(j.pods), "LaunchInDoubt", err)
			return o
		}
		o.err = err
		pa.launchFailed(ctx, log, cl, "LaunchFailed", err)
		return o
	}
	o.inst = pa.describe(cl, inst)
	now := metav1.NewTime(p.d.Now())
	_, err = p.d.Store.MutateNodeClaim(ctx, cl.Name, func(c *apis.NodeClaim) error {
		recordLaunch(c, o.inst, now)
		return nil
	})
	if err != nil {
		// The instance exists and carries the claim's tag: the next run's
		// resume adopts it and records it then.
		o.err = fmt.Errorf("record launch of nodeclaim %s: %w", cl.Name, err)
		log.ErrorContext(ctx, "recording launch", "instance-id", inst.ID, "error", err)
		pa.appendResult(&pa.res.Failed, cl.Name)
		return o
	}
	o.done = true
	if j.create {
		pa.appendResult(&pa.res.Launched, cl.Name)
	} else {
		pa.appendResult(&pa.res.Resumed, cl.Name)
	}
	log.InfoContext(ctx, "launched nodeclaim", "instance-id", inst.ID, "instance-type", inst.Type, "zone", inst.Zone,
		"capacity-type", inst.CapacityType, "image", inst.ImageID, "pods", len(j.pods), "resumed", !j.create)
	if p.d.Requeue != nil {
		msg := queue.Message{Kind: queue.KindLifecycle, Subject: cl.Name, Reason: "launched"}
		if err := p.d.Requeue(ctx, msg, p.s.RegistrationCheck); err != nil {
			log.WarnContext(ctx, "requeueing the lifecycle check", "error", err)
		}
	}
	msg := fmt.Sprintf("nodeclaim/%s (instance type %s, zone %s, capacity type %s)", cl.Name, inst.Type, inst.Zone, inst.CapacityType)
	pa.nominate(ctx, j.pods, cl.Name, msg)
	return o
}

// describe adds the labels, capacity and allocatable of the launched type.
func (pa *pass) describe(cl *apis.NodeClaim, inst nwaws.Instance) launched {
	out := launched{Instance: inst}
	it, ok := pa.catalog.Get(inst.Type)
	if !ok {
		return out
	}
	off, found := it.Offering(inst.Zone, inst.CapacityType)
	if !found {
		z, _ := pa.catalog.Zone(inst.Zone)
		off = catalog.Offering{Zone: inst.Zone, ZoneID: z.ID, CapacityType: inst.CapacityType}
	}
	out.labels = it.NodeLabels(off)
	var nc *apis.EC2NodeClass
	if cl.Spec.NodeClassRef != nil {
		nc = pa.p.d.Config.NodeClass(cl.Spec.NodeClassRef.Name)
	}
	opts := catalog.OptionsForNodeClass(nc)
	out.capacity = it.Capacity(opts)
	if alloc, err := it.Allocatable(opts); err == nil {
		out.allocatable = alloc
	}
	return out
}

// capacityFailed deletes a claim no offering could launch; the tombstone
// keeps the final state (Launched=False) for people to read.
func (pa *pass) capacityFailed(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, pods int, reason string, cause error) {
	pa.appendResult(&pa.res.CapacityFailed, cl.Name)
	log.WarnContext(ctx, "nodeclaim cannot launch; re-planning its pods", "reason", reason, "pods", pods, "error", cause)
	now := metav1.NewTime(pa.p.d.Now())
	for range 4 {
		cur, err := pa.p.d.Store.GetNodeClaim(ctx, cl.Name)
		if errors.Is(err, store.ErrNotFound) {
			return
		}
		if err != nil {
			log.ErrorContext(ctx, "reading nodeclaim to delete", "error", err)
			return
		}
		cur.SetCondition(apis.ConditionLaunched, metav1.ConditionFalse, reason, oneLine(cause.Error()), now)
		err = pa.p.d.Store.DeleteNodeClaim(ctx, cur)
		if err == nil || errors.Is(err, store.ErrNotFound) {
			return
		}
		if !errors.Is(err, store.ErrConflict) {
			log.ErrorContext(ctx, "deleting nodeclaim", "error", err)
			return
		}
	}
}

// launchFailed keeps the claim for the next run to retry and says why on it.
func (pa *pass) launchFailed(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, reason string, cause error) {
	pa.appendResult(&pa.res.Failed, cl.Name)
	log.ErrorContext(ctx, "launching nodeclaim failed; the next run retries it", "reason", reason, "error", cause)
	if ctx.Err() != nil {
		return
	}
	now := metav1.NewTime(pa.p.d.Now())
	_, err := pa.p.d.Store.MutateNodeClaim(ctx, cl.Name, func(c *apis.NodeClaim) error {
		c.SetCondition(apis.ConditionLaunched, metav1.ConditionUnknown, reason, oneLine(cause.Error()), now)
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		log.WarnContext(ctx, "recording launch failure", "error", err)
	}
}

func (pa *pass) appendResult(dst *[]string, name string) {
	pa.mu.Lock()
	*dst = append(*dst, name)
	pa.mu.Unlock()
}

// nominate records where pods go and tells each pod.
func (pa *pass) nominate(ctx context.Context, pods []*corev1.Pod, target, where string) {
	pa.mu.Lock()
	for _, pod := range pods {
		pa.nominated[podKey(pod)] = nomination{pod: pod, target: target}
	}
	pa.res.Nominated += len(pods)
	pa.mu.Unlock()
	pa.p.d.Metrics.Add(metrics.PodsNominated, float64(len(pods)), nil)
	for _, pod := range pods {
		pa.podEvent(ctx, pod, kube.EventNormal, ReasonNominated, "Pod should schedule on: %s", where)
	}
}

// nominateExisting covers pods the plan put on existing nodes and on
// in-flight claims other than those this round launched (which nominate
// their own pods once launched).
func (pa *pass) nominateExisting(ctx context.Context, c *state.Cluster, plan *scheduling.Plan, jobs []*job) {
	launchedHere := map[string]bool{}
	for _, j := range jobs {
		launchedHere[j.claim.Name] = true
	}
	for _, np := range plan.ExistingNodes {
		if launchedHere[np.Name] {
			continue
		}
		where := "node/" + np.Name
		if n, ok := c.Node(np.Name); ok && n.InFlight() {
			where = "nodeclaim/" + np.Name
		}
		pa.nominate(ctx, np.PodRefs, np.Name, where)
	}
}

// unschedulable reports pods no node or claim can take, one log line per
// distinct reason.
func (pa *pass) unschedulable(ctx context.Context, us []*scheduling.Unschedulable) {
	if len(us) == 0 {
		return
	}
	pa.res.Unschedulable += len(us)
	byReason := map[string][]string{}
	for _, u := range us {
		byReason[u.Reason] = append(byReason[u.Reason], u.Pod)
		if u.PodRef != nil {
			pa.podEvent(ctx, u.PodRef, kube.EventWarning, ReasonFailedScheduling, "Failed to schedule pod, %s", u.Reason)
		}
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		pods := byReason[r]
		sample := pods
		if len(sample) > 5 {
			sample = sample[:5]
		}
		pa.p.log.InfoContext(ctx, "pods unschedulable", "reason", r, "count", len(pods), "pod", sample)
	}
}

type podEvent struct {
	pod                  *corev1.Pod
	typ, reason, message string
}

// startEvents runs the workers that send the run's pod events, so launches
// never wait on the API server's event writes; the returned func waits for
// the queue to drain.
func (pa *pass) startEvents(ctx context.Context) func() {
	pa.eventQ = make(chan podEvent, 256)
	var wg sync.WaitGroup
	for range eventWorkers {
		wg.Go(func() {
			for e := range pa.eventQ {
				if err := pa.p.d.Cluster.PodEvent(ctx, e.pod, e.typ, e.reason, "%s", e.message); err != nil {
					pa.p.log.DebugContext(ctx, "pod event", "pod", podKey(e.pod), "reason", e.reason, "error", err)
				}
			}
		})
	}
	return func() {
		close(pa.eventQ)
		wg.Wait()
	}
}

// eventWorkers bounds concurrent event writes (the client's QPS limit
// applies on top).
const eventWorkers = 8

// podEvent queues an event unless the run's cap is reached; events are
// advisory, so failures are only logged.
func (pa *pass) podEvent(ctx context.Context, pod *corev1.Pod, typ, reason, format string, args ...any) {
	if pa.events.Add(1) > int64(pa.p.s.MaxPodEvents) {
		pa.dropped.Add(1)
		return
	}
	select {
	case pa.eventQ <- podEvent{pod: pod, typ: typ, reason: reason, message: fmt.Sprintf(format, args...)}:
	case <-ctx.Done():
	}
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
