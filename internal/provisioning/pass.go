package provisioning

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/internal/store"
)

// pass is one run's working state.
type pass struct {
	p     *Provisioner
	lease *store.Lease
	run   string
	res   *Result
	// reason is the "reason" dimension of karpenter_nodeclaims_created_total.
	reason string
	snap   *kube.Snapshot
	// boundPodsSkipped: the snapshot has no bound pods (nothing was
	// pending); boundPodsIfNeeded reads them if a node is going away.
	boundPodsSkipped bool
	// first holds the claims and ICE set read beside the snapshot, for
	// the first cluster state; later ones read afresh.
	first   *sources
	catalog *catalog.Catalog
	events  atomic.Int64
	dropped atomic.Int64
	eventQ  chan podEvent
	// nominations rate-limits Nominated events; limited counts the ones
	// not written.
	nominations tokenBucket
	limited     atomic.Int64

	mu sync.Mutex
	// nominated maps a pod (namespace/name) to where this run put it, so a
	// re-plan keeps those pods' room taken.
	nominated map[string]nomination
	// static are the static NodePools' claims round 0 launches.
	static []*job
	// requeues are the lifecycle checks of the round's launches, sent
	// together once its launches are done.
	requeues []queue.Message
	// throttled: EC2 throttled a launch of this pass; no further claim
	// calls EC2 this pass (throttle.go). youngest is the creation time of
	// the youngest throttled claim, for the nudge's backoff.
	throttled atomic.Bool
	youngest  time.Time
}

type nomination struct {
	pod    *corev1.Pod
	target string // node or claim name
}

// job is one claim to create and/or launch.
type job struct {
	claim  *apis.NodeClaim
	create bool
	// created: this pass's create wrote the claim's record (it was not
	// there already), so no instance can carry its name yet.
	created bool
	pods    []*corev1.Pod
	price   float64
}

type outcome struct {
	job      *job
	inst     launched
	err      error
	capacity bool // the claim hit capacity errors everywhere: re-plan its pods
	done     bool // the claim is launched and recorded (or was already)
}

// run is one pass under the lease: batch, snapshot, then up to MaxRounds
// plan-and-launch rounds, each re-planning the pods of the claims the round
// before could not launch for capacity.
func (p *Provisioner) run(ctx context.Context, lease *store.Lease, res *Result, reason string) error {
	pa := &pass{p: p, lease: lease, run: strconv.FormatInt(lease.Token, 10), res: res, nominated: map[string]nomination{}, reason: reason}
	pa.nominations.burst, pa.nominations.rate = float64(p.s.NominationEventBurst), p.s.NominationEventRate
	waitEvents := pa.startEvents(ctx)
	defer waitEvents()
	if err := pa.prepare(ctx); err != nil {
		return err
	}
	var replan []*corev1.Pod
	for round := 0; round < p.s.MaxRounds; round++ {
		res.Rounds = round + 1
		var err error
		if replan, err = pa.round(ctx, round, replan); err != nil {
			return err
		}
		if len(replan) == 0 {
			break
		}
		if round == p.s.MaxRounds-1 {
			pa.giveUp(ctx, replan)
		}
	}
	pa.nudgeThrottled(ctx)
	p.d.Metrics.Gauge(metrics.PodsUnschedulable, float64(res.Unschedulable), nil)
	if d, l := pa.dropped.Load(), pa.limited.Load(); d > 0 || l > 0 {
		p.log.InfoContext(ctx, "pod events capped", "emitted", pa.events.Load()-d, "dropped", d, "nominations-rate-limited", l)
	}
	return nil
}

// prepare waits out the batch window and takes the run's snapshot. The
// window is mostly waiting: the catalog is fetched and the launch path's
// discovery warmed meanwhile, so the launch follows the window's close by as
// little as possible.
func (pa *pass) prepare(ctx context.Context) error {
	p := pa.p
	prefetched := make(chan error, 1)
	go func() {
		var err error
		pa.catalog, err = p.d.Catalog(ctx)
		p.warmLaunch(ctx)
		prefetched <- err
	}()
	batchStart := p.d.Now()
	n, pending, err := p.batch(ctx)
	if err != nil {
		<-prefetched
		return err
	}
	pa.res.Batch = p.d.Now().Sub(batchStart)
	p.d.Metrics.Observe(metrics.ProvisionerBatchSize, metrics.Count, float64(n), nil)

	// From the watch cache, reusing unchanged nodes' pods: a stale view
	// can only make the pass add capacity, never remove it, and with
	// nothing pending (every scheduled tick of a steady cluster) it is one
	// cheap table read instead of every pod. The pending pods are the
	// batch's last listing (from the same cache): listing them again cost
	// a 5,000-pod burst another read and decode of every pod.
	parts := snapshotParts &^ kube.PartPendingPods
	if len(pending.PendingPods) == 0 && pending.OtherPendingPods == 0 {
		// Nothing pending: the bound pods matter only if some node is
		// being removed (its pods need room elsewhere); cluster reads
		// them then. A steady tick reads nodes and claims, not 40,000 pods.
		parts &^= kube.PartBoundPods
		pa.boundPodsSkipped = true
	}
	err = pa.readSources(ctx, parts)
	if cerr := <-prefetched; cerr != nil && err == nil {
		return fmt.Errorf("provisioner: instance types: %w", cerr)
	}
	if err != nil {
		return err
	}
	pa.snap.PendingPods, pa.snap.OtherPendingPods = pending.PendingPods, pending.OtherPendingPods
	return nil
}

// round plans (round 0: every pending pod; later rounds: only replan, the
// pods of claims that hit capacity errors), launches the plan's claims and
// nominates the pods. It returns the pods to re-plan next round (replan's
// backing array, reused).
func (pa *pass) round(ctx context.Context, round int, replan []*corev1.Pod) ([]*corev1.Pod, error) {
	cluster, plan, err := pa.plan(ctx, round, replan)
	if err != nil {
		return nil, err
	}
	jobs, err := pa.jobs(cluster, plan, round)
	if err != nil {
		return nil, err
	}
	if round == 0 {
		jobs = append(jobs, pa.static...)
	}
	outcomes := pa.launchAll(ctx, jobs)
	pa.requeueLaunched(ctx)
	replan = replan[:0]
	for _, o := range outcomes {
		if o.capacity {
			replan = append(replan, o.job.pods...)
		}
	}
	pa.nominateExisting(ctx, cluster, plan, jobs)
	pa.unschedulable(ctx, plan.Unschedulable)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("provisioner: %w", context.Cause(ctx))
	}
	return replan, nil
}

// plan reads the cluster state and solves one round. Round 0 also scales
// the static NodePools (re-reading the cluster when it marked claims), takes
// the pending-pod gauges and counts pods of deleting nodes; later rounds keep
// the room of pods this run already placed.
func (pa *pass) plan(ctx context.Context, round int, replan []*corev1.Pod) (*state.Cluster, *scheduling.Plan, error) {
	p := pa.p
	cluster, err := pa.cluster(ctx)
	if err != nil {
		return nil, nil, err
	}
	if round == 0 {
		var marked bool
		if pa.static, marked = pa.scaleStatic(ctx, cluster); marked {
			if cluster, err = pa.cluster(ctx); err != nil {
				return nil, nil, err
			}
		}
		pa.observePending(cluster)
	}
	opts := state.InputOptions{IncludeDeletingPods: round == 0}
	if round > 0 {
		opts.Pods = replan
	}
	in, err := cluster.Input(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("provisioner: %w", err)
	}
	if round > 0 {
		in.Nodes = pa.withNominated(in.Nodes, replan)
	}
	solveStart := p.d.Now()
	plan, err := scheduling.Solve(ctx, in)
	solveTime := p.d.Now().Sub(solveStart)
	pa.res.SolveTime += solveTime
	p.d.Metrics.Observe(metrics.SchedulingDuration, metrics.Seconds, solveTime.Seconds(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("provisioner: solve: %w", err)
	}
	if round == 0 {
		pa.skippedPools(ctx, plan.SkippedNodePools)
	}
	return cluster, plan, nil
}

// skippedPools logs the NodePools the solve left out, as Karpenter logs
// "skipping, nodepool requirements filtered out all instance types" and
// provisions from the other pools.
func (pa *pass) skippedPools(ctx context.Context, skipped []scheduling.SkippedNodePool) {
	for _, s := range skipped {
		pa.p.log.WarnContext(ctx, "skipping nodepool: no claim can come from it", "nodepool", s.NodePool, "reason", s.Reason)
	}
}

// giveUp reports the pods still short of capacity after the last re-plan.
func (pa *pass) giveUp(ctx context.Context, replan []*corev1.Pod) {
	for _, pod := range replan {
		pa.podEvent(ctx, pod, kube.EventWarning, ReasonFailedScheduling,
			"Failed to schedule pod, every offering of its NodeClaim was short of capacity after %d re-plans", pa.p.s.MaxRounds)
	}
	pa.res.Unschedulable += len(replan)
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

// sources are the claims and the ICE set a cluster state joins with the
// run's snapshot.
type sources struct {
	claims      []*apis.NodeClaim
	unavailable map[scheduling.OfferingKey]bool
}

// readSources takes the run's snapshot and, beside it, the claims and the
// ICE set of the first cluster state. Read one after the other, the
// snapshot and the 2,000 claims of a 2,000-node cluster were most of the
// time between the batch window's close and the first launch. Reading the
// claims while the snapshot is taken, rather than after it, makes them no
// staler than the snapshot already is by the time the plan launches.
func (pa *pass) readSources(ctx context.Context, parts kube.Parts) error {
	p := pa.p
	var first *sources
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		if pa.snap, err = p.d.Cluster.Snapshot(gctx, kube.SnapshotOptions{Parts: parts, Cached: true}); err != nil {
			return fmt.Errorf("provisioner: %w", err)
		}
		return nil
	})
	g.Go(func() (err error) {
		first, err = pa.readClaimsAndICE(gctx)
		return err
	})
	if err := g.Wait(); err != nil {
		return err
	}
	pa.first = first
	return nil
}

// readClaimsAndICE reads the claims and the ICE set.
func (pa *pass) readClaimsAndICE(ctx context.Context) (*sources, error) {
	p := pa.p
	claims, err := p.d.Store.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("provisioner: list nodeclaims: %w", err)
	}
	return &sources{claims: claims, unavailable: ReadICE(ctx, p.d.Unavailable, p.log)}, nil
}

// cluster joins the claims and the ICE set with the run's snapshot: those
// read beside the snapshot the first time, re-read after.
func (pa *pass) cluster(ctx context.Context) (*state.Cluster, error) {
	p := pa.p
	src := pa.first
	pa.first = nil
	if src == nil {
		var err error
		if src, err = pa.readClaimsAndICE(ctx); err != nil {
			return nil, err
		}
	}
	if err := pa.boundPodsIfNeeded(ctx, src.claims); err != nil {
		return nil, err
	}
	c, err := state.Build(state.Sources{Snapshot: pa.snap, Claims: src.claims, Config: p.d.Config, Catalog: pa.catalog, Unavailable: src.unavailable, Policy: p.s.Policy})
	if err != nil {
		return nil, fmt.Errorf("provisioner: %w", err)
	}
	for _, w := range c.Warnings {
		p.log.WarnContext(ctx, "cluster state", "warning", w)
	}
	return c, nil
}

// boundPodsIfNeeded reads the bound pods into the pass's snapshot when
// prepare skipped them (nothing pending) and a node or claim turns out to
// be going away: round 0 places a removed node's pods.
func (pa *pass) boundPodsIfNeeded(ctx context.Context, claims []*apis.NodeClaim) error {
	if !pa.boundPodsSkipped || !anyRemoval(pa.snap.Nodes, claims) {
		return nil
	}
	bound, err := pa.p.d.Cluster.Snapshot(ctx, kube.SnapshotOptions{Parts: kube.PartBoundPods, Cached: true})
	if err != nil {
		return fmt.Errorf("provisioner: %w", err)
	}
	pa.snap.PodsByNode, pa.boundPodsSkipped = bound.PodsByNode, false
	return nil
}

// anyRemoval reports a Node or claim that state marks for deletion.
func anyRemoval(nodes []*corev1.Node, claims []*apis.NodeClaim) bool {
	return slices.ContainsFunc(nodes, state.NodeMarkedForDeletion) || slices.ContainsFunc(claims, state.ClaimMarkedForDeletion)
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
		cp.Digest = nil // the solver digests the longer list itself
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
