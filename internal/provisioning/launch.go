package provisioning

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
)

// launched is an instance with what the claim records about it.
type launched struct {
	nwaws.Instance
	labels      map[string]string
	capacity    corev1.ResourceList
	allocatable corev1.ResourceList
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
	o := outcome{job: j}
	log := pa.p.log.With("nodeclaim", j.claim.Name, "nodepool", j.claim.NodePoolName())
	if j.create {
		if o.err = pa.create(ctx, log, j); o.err != nil {
			return o
		}
	}
	cl := j.claim
	if cl.IsTrue(apis.ConditionLaunched) {
		o.done = true
		pa.nominate(ctx, j.pods, cl.Name, "nodeclaim/"+cl.Name)
		return o
	}
	nc := pa.nodeClass(cl)
	if nc == nil {
		o.err = fmt.Errorf("launch nodeclaim %s: its EC2NodeClass is not configured", cl.Name)
		pa.launchFailed(ctx, log, cl, "NodeClassNotFound", o.err)
		return o
	}
	if pa.throttled.Load() {
		// EC2 already throttled this pass: another call would only dig
		// the bucket deeper. The claim waits, as a throttled one does.
		return pa.throttledWait(ctx, log, o, errPassThrottled)
	}
	inst, err := pa.attempt(ctx, log, j, nc)
	if err != nil {
		return pa.failed(ctx, log, o, err)
	}
	return pa.record(ctx, log, o, inst)
}

// create writes a new claim's record before its launch. A retried write of
// this run finds the record already there and continues with the stored one
// (j.claim is replaced by it).
func (pa *pass) create(ctx context.Context, log *slog.Logger, j *job) error {
	p := pa.p
	cl := j.claim
	err := p.d.Store.CreateNodeClaim(ctx, cl)
	switch {
	case errors.Is(err, store.ErrAlreadyExists):
		stored, gerr := p.d.Store.GetNodeClaim(ctx, cl.Name)
		if gerr != nil {
			return fmt.Errorf("create nodeclaim %s: %w", cl.Name, gerr)
		}
		j.claim = stored
	case err != nil:
		log.ErrorContext(ctx, "creating nodeclaim", "error", err)
		return fmt.Errorf("create nodeclaim %s: %w", cl.Name, err)
	default:
		j.created = true
		pa.appendResult(&pa.res.Created, cl.Name)
		p.d.Metrics.Add(metrics.NodeClaimsCreated, 1, metrics.Dimensions{"nodepool": cl.NodePoolName(), "reason": pa.reason})
	}
	return nil
}

// nodeClass is the claim's configured EC2NodeClass (nil when none).
func (pa *pass) nodeClass(cl *apis.NodeClaim) *apis.EC2NodeClass {
	if cl.Spec.NodeClassRef == nil {
		return nil
	}
	return pa.p.d.Config.NodeClass(cl.Spec.NodeClassRef.Name)
}

// attempt calls the launcher up to LaunchAttempts times, backing off between
// attempts; capacity errors, a node class not ready and a launch in doubt
// end the attempts at once. The first attempt for a claim this pass just
// created tells the launcher it is new: looking for an instance tagged with
// a name no launch has used yet was one EC2 DescribeInstances per launch.
func (pa *pass) attempt(ctx context.Context, log *slog.Logger, j *job, nc *apis.EC2NodeClass) (nwaws.Instance, error) {
	p := pa.p
	cl := j.claim
	types := launchTypes(pa.catalog, cl)
	planned := pa.catalog.OptionsFor(nc)
	var inst nwaws.Instance
	var err error
	first := cl.NextLaunchAttempt()
	for attempt := 0; attempt < p.s.LaunchAttempts; attempt++ {
		if attempt > 0 {
			if serr := p.d.Sleep(ctx, time.Duration(attempt)*500*time.Millisecond); serr != nil {
				err = errors.Join(err, serr)
				break
			}
		}
		inst, err = p.d.Launcher.Launch(ctx, nwaws.LaunchRequest{NodeClaim: cl, NodeClass: nc, InstanceTypes: types, New: j.created && attempt == 0,
			FirstAttempt: first, Allocatable: &planned})
		if next, ok := nwaws.NextAttempt(err); ok {
			first = next // the settled attempts are not sent again
		}
		// A launch in doubt already waited for its instance to show up; the
		// lifecycle's launch timeout settles it, not another attempt here.
		// A throttled launch already had the SDK's retries with backoff;
		// retrying at once would only take the tokens others wait for.
		if err == nil || errors.Is(err, nwaws.ErrInsufficientCapacity) || errors.Is(err, nwaws.ErrNodeClassNotReady) ||
			errors.Is(err, nwaws.ErrLaunchInDoubt) || errors.Is(err, nwaws.ErrThrottled) || ctx.Err() != nil {
			break
		}
		log.WarnContext(ctx, "launch attempt failed", "attempt", attempt+1, "error", err)
	}
	return inst, err
}

// failed settles a launch that returned an error: capacity errors and a
// launch in doubt give the claim up and re-plan its pods, anything else
// keeps the claim for the next run.
func (pa *pass) failed(ctx context.Context, log *slog.Logger, o outcome, err error) outcome {
	cl := o.job.claim
	pa.p.d.Metrics.Add(metrics.CloudProviderErrors, 1, metrics.Dimensions{"method": "Launch"})
	o.err = err
	switch {
	case errors.Is(err, nwaws.ErrThrottled):
		pa.throttled.Store(true)
		return pa.throttledWait(ctx, log, o, err)
	case errors.Is(err, nwaws.ErrInsufficientCapacity):
		o.capacity = true
		pa.capacityFailed(ctx, log, cl, len(o.job.pods), "InsufficientCapacity", err)
	case errors.Is(err, nwaws.ErrLaunchInDoubt):
		// An earlier, crashed run used this claim's client token and no
		// instance has shown up for it. The claim is given up under its
		// name and its pods re-planned onto a new claim (new name, new
		// tokens); should the doubted instance appear after all, it has
		// no live claim and the lifecycle's GC terminates it.
		o.capacity = true
		pa.capacityFailed(ctx, log, cl, len(o.job.pods), "LaunchInDoubt", err)
	default:
		pa.launchFailed(ctx, log, cl, "LaunchFailed", err)
	}
	return o
}

// record writes the launched instance onto the claim, queues the
// lifecycle's registration check (sent with the round's others) and
// nominates the claim's pods.
func (pa *pass) record(ctx context.Context, log *slog.Logger, o outcome, inst nwaws.Instance) outcome {
	p := pa.p
	j, cl := o.job, o.job.claim
	o.inst = pa.describe(cl, inst)
	now := metav1.NewTime(p.d.Now())
	_, err := pa.mutateKnown(ctx, cl, func(c *apis.NodeClaim) error {
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
	if p.d.Requeue != nil || p.d.RequeueBatch != nil {
		pa.mu.Lock()
		pa.requeues = append(pa.requeues, queue.Message{Kind: queue.KindLifecycle, Subject: cl.Name, Reason: "launched"})
		pa.mu.Unlock()
	}
	msg := fmt.Sprintf("nodeclaim/%s (instance type %s, zone %s, capacity type %s)", cl.Name, inst.Type, inst.Zone, inst.CapacityType)
	pa.nominate(ctx, j.pods, cl.Name, msg)
	return o
}

// mutateKnown is Store.MutateNodeClaim starting from the version of the
// claim this pass holds (the one it created, or read this pass) instead of
// reading it first: the write is conditional on that version all the same,
// and a claim changed meanwhile is re-read and the change re-applied. A
// 5,000-pod burst's 250 launches each saved a DynamoDB read this way.
func (pa *pass) mutateKnown(ctx context.Context, known *apis.NodeClaim, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error) {
	s := pa.p.d.Store
	first := known.DeepCopy()
	get := func(ctx context.Context, name string) (*apis.NodeClaim, error) {
		if first == nil || first.ResourceVersion == "" {
			return s.GetNodeClaim(ctx, name)
		}
		cl := first
		first = nil
		return cl, nil
	}
	return store.MutateWith(ctx, known.Name, fn, get, s.UpdateNodeClaim)
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
	nc := pa.nodeClass(cl)
	out.labels = it.NodeLabelsForNodeClass(off, nc)
	opts := pa.catalog.OptionsFor(nc)
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
	pa.launchUnknown(ctx, log, cl, reason, cause)
}

// launchUnknown records on a kept claim why it is not launched yet
// (Launched=Unknown with the reason).
func (pa *pass) launchUnknown(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, reason string, cause error) {
	now := metav1.NewTime(pa.p.d.Now())
	_, err := pa.p.d.Store.MutateNodeClaim(ctx, cl.Name, func(c *apis.NodeClaim) error {
		c.SetCondition(apis.ConditionLaunched, metav1.ConditionUnknown, reason, oneLine(cause.Error()), now)
		// The next run's launch skips the attempts this one settled, so
		// it does not resend their tokens with changed parameters.
		if next, ok := nwaws.NextAttempt(cause); ok && next > c.NextLaunchAttempt() {
			c.SetNextLaunchAttempt(next)
		}
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		log.WarnContext(ctx, "recording launch failure", "error", err)
	}
}

// requeueLaunched asks the lifecycle to check the registration of the
// claims the round launched, ten to an SQS call: once per launch, the
// sends held each launch's slot for another round trip. Best effort, as
// the lifecycle's schedule finds every claim anyway.
func (pa *pass) requeueLaunched(ctx context.Context) {
	pa.mu.Lock()
	msgs := pa.requeues
	pa.requeues = nil
	pa.mu.Unlock()
	if len(msgs) == 0 {
		return
	}
	d, delay := pa.p.d, pa.p.s.RegistrationCheck
	var err error
	if d.RequeueBatch != nil {
		err = d.RequeueBatch(ctx, msgs, delay)
	} else {
		errs := make([]error, 0, len(msgs))
		for _, m := range msgs {
			errs = append(errs, d.Requeue(ctx, m, delay))
		}
		err = errors.Join(errs...)
	}
	if err != nil {
		pa.p.log.WarnContext(ctx, "requeueing the lifecycle checks", "nodeclaims", len(msgs), "error", err)
	}
}

func (pa *pass) appendResult(dst *[]string, name string) {
	pa.mu.Lock()
	*dst = append(*dst, name)
	pa.mu.Unlock()
}
