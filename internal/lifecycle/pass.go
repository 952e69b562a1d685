package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
)

// scheduleInterval is the schedule's period: a follow-up due sooner than
// the next tick is worth a work message.
const scheduleInterval = time.Minute

// passConcurrency bounds claims reconciled at once in a pass.
const passConcurrency = 8

// PassResult summarises a scheduled pass.
type PassResult struct {
	Claims  int            `json:"claims"`
	Nodes   int            `json:"nodes"`
	Actions map[string]int `json:"actions,omitempty"`
	// Garbage collection.
	TerminatedInstances []string `json:"terminatedInstances,omitempty"`
	// DrainedOrphans are orphaned instances whose Node had pods: adopted as
	// claims marked for deletion, so they leave through the drain.
	DrainedOrphans []string `json:"drainedOrphans,omitempty"`
	// GCRefused says why instance garbage collection did nothing this pass.
	GCRefused        string   `json:"gcRefused,omitempty"`
	DeletedNodes     []string `json:"deletedNodes,omitempty"`
	DeletedTemplates []string `json:"deletedLaunchTemplates,omitempty"`
	Errors           []string `json:"errors,omitempty"`
	Requeued         int      `json:"requeued"`
}

// TemplateGC is implemented by clouds that can delete unused launch
// templates (*aws.Provider); optional.
type TemplateGC interface {
	DeleteUnusedLaunchTemplates(ctx context.Context, inUse func(name string) bool, minAge time.Duration) ([]string, error)
}

// launchTemplateMinAge keeps templates a launch in flight may be using.
const launchTemplateMinAge = 30 * time.Minute

// ReconcileAll is the scheduled pass: every claim is reconciled from one
// cluster snapshot and one instance listing, then garbage is collected.
// A claim's failure, or a garbage collection step's, is reported (logged,
// counted in metrics.LifecycleFailures, listed in PassResult.Errors) and
// the pass goes on: one bad claim must neither stop the others nor fail
// the invocation, which would page through the heartbeat alarm for a
// fault the next tick retries anyway. The error is only for a pass that
// could not run at all (the listings, the snapshot, the chain records).
func (c *Controller) ReconcileAll(ctx context.Context) (PassResult, error) {
	res := PassResult{Actions: map[string]int{}}
	// The snapshot is read while the instances and claims are: each is a
	// wait of a second or more at 2,000 nodes. It is a cached view either
	// way (it may lag the claims), so reading it sooner changes nothing the
	// pass relies on.
	var snap *kube.Snapshot
	var snapErr error
	var reading sync.WaitGroup
	reading.Go(func() {
		snap, snapErr = c.d.Cluster.Snapshot(ctx, kube.SnapshotOptions{Parts: kube.PartNodes | kube.PartBoundPods, Cached: true})
	})
	instances, claims, skipped, err := c.cloudAndClaims(ctx)
	reading.Wait()
	if err != nil {
		return res, err
	}
	if snapErr != nil {
		return res, fmt.Errorf("lifecycle: snapshot: %w", snapErr)
	}
	res.Claims, res.Nodes = len(claims), len(snap.Nodes)
	v := newSnapView(c, snap, instances, claims)
	if v.chains, err = c.chains(ctx); err != nil {
		return res, err
	}

	var mu sync.Mutex
	sem := make(chan struct{}, passConcurrency)
	var wg sync.WaitGroup
	for _, cl := range claims {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := c.reconcile(ctx, cl, v)
			requeued := false
			if err == nil && (c.scheduleRequeues(out) || v.restartsChain(out)) {
				err = c.requeue(ctx, out.Claim, "schedule:"+out.Action, out.RequeueAfter)
				requeued = err == nil
			}
			mu.Lock()
			defer mu.Unlock()
			if out.Action != "" {
				res.Actions[out.Action]++
			}
			if requeued {
				res.Requeued++
			}
			if err != nil {
				c.failed(ctx, failedClaim, err, "nodeclaim", cl.Name)
				res.Errors = append(res.Errors, err.Error())
			}
		})
	}
	wg.Wait()

	if err := c.collectInstances(ctx, v, gcInput{instances: instances, claims: claims, skipped: skipped}, &res); err != nil {
		c.failed(ctx, failedInstanceGC, err)
		res.Errors = append(res.Errors, err.Error())
	}
	if err := c.collectNodes(ctx, v, &res); err != nil {
		c.failed(ctx, failedNodeGC, err)
		res.Errors = append(res.Errors, err.Error())
	}
	c.collectTemplates(ctx, claims, &res)
	sort.Strings(res.Errors)
	c.log.InfoContext(ctx, "lifecycle pass", "claims", res.Claims, "nodes", res.Nodes, "actions", res.Actions,
		"terminated-instances", len(res.TerminatedInstances), "deleted-nodes", len(res.DeletedNodes), "requeued", res.Requeued, "errors", len(res.Errors))
	return res, nil
}

// What failed, the part dimension of metrics.LifecycleFailures.
const (
	failedClaim      = "claim"
	failedWorkItem   = "work_item"
	failedInstanceGC = "instance_gc"
	failedNodeGC     = "node_gc"
)

// failed reports a failure the invocation goes on after: an ERROR log line
// (with attrs, such as the claim's name) and one metrics.LifecycleFailures.
func (c *Controller) failed(ctx context.Context, part string, err error, attrs ...any) {
	c.log.ErrorContext(ctx, "lifecycle "+strings.ReplaceAll(part, "_", " ")+" failed", append([]any{"error", err}, attrs...)...)
	c.d.Metrics.Add(metrics.LifecycleFailures, 1, metrics.Dimensions{"part": part})
}

// collectTemplates deletes the launch templates no claim names. A pass
// that found the table implausible (GC refused) deletes none either: the
// same claims that looked missing name them.
func (c *Controller) collectTemplates(ctx context.Context, claims []*apis.NodeClaim, res *PassResult) {
	gc, ok := c.d.Cloud.(TemplateGC)
	if !ok || res.GCRefused != "" {
		return
	}
	inUse := map[string]bool{}
	for _, cl := range claims {
		if n := cl.Annotations[nwaws.AnnotationLaunchTemplate]; n != "" {
			inUse[n] = true
		}
	}
	deleted, err := gc.DeleteUnusedLaunchTemplates(ctx, func(n string) bool { return inUse[n] }, launchTemplateMinAge)
	res.DeletedTemplates = deleted
	if err != nil {
		c.log.WarnContext(ctx, "launch template garbage collection", "error", err)
	}
}

// cloudAndClaims lists the cluster's instances, then the claims. Instances
// first: a claim created after this listing is younger than the GC grace,
// so it can never make its own instance look orphaned.
func (c *Controller) cloudAndClaims(ctx context.Context) ([]nwaws.Instance, []*apis.NodeClaim, []store.Undecodable, error) {
	instances, err := c.d.Cloud.ListClusterInstances(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("lifecycle: list cluster instances: %w", err)
	}
	claims, skipped, err := c.d.Store.ListNodeClaimsReport(ctx)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("lifecycle: list nodeclaims: %w", err)
	}
	return instances, claims, skipped, nil
}

// scheduleRequeues decides whether a scheduled pass starts a work-message
// chain for a claim: only for work it started itself and only when the
// follow-up is due before the next tick. Chains started by work messages
// carry themselves (restartsChain takes over the ones that got lost);
// re-sending for every claim in progress each minute would replace every
// chain every minute for nothing.
func (c *Controller) scheduleRequeues(out Outcome) bool {
	if !c.wantsChain(out) {
		return false
	}
	switch out.Action {
	case ActionRegistered, ActionInitialized, ActionExpired, ActionEmpty, ActionLiveness, "":
		// "" covers a freshly observed empty node whose consolidateAfter
		// ends before the next tick.
		return true
	}
	return false
}

// restartsChain reports whether the pass restarts a lost work chain: the
// claim still has work due before the next tick, and its chain's message
// is long overdue.
func (v *snapView) restartsChain(out Outcome) bool {
	return v.c.wantsChain(out) && v.chainLost(out.Claim)
}

// wantsChain: work is left and due before the next tick.
func (c *Controller) wantsChain(out Outcome) bool {
	return !out.Done && out.RequeueAfter > 0 && out.RequeueAfter < scheduleInterval
}

// collectNodes deletes the Nodes of this stack's instances (its tags) that
// no live claim owns and whose instance EC2 confirms gone, releasing
// nodewright's finalizer.
func (c *Controller) collectNodes(ctx context.Context, v *snapView, res *PassResult) error {
	var errs []error
	for _, n := range v.snap.Nodes {
		if n.Labels[apis.NodePoolLabelKey] == "" || !strings.HasPrefix(n.Spec.ProviderID, "aws://") || v.owned[n.Name] {
			continue
		}
		_, id, err := nwaws.ParseProviderID(n.Spec.ProviderID)
		if err != nil {
			continue
		}
		if inst, ok := v.instances[id]; ok && !instanceGone(inst.State) {
			continue
		}
		inst, gone, err := v.instance(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !gone || !c.d.Cloud.Owns(inst) {
			// Another autoscaler's or stack's Node (or one whose instance
			// EC2 no longer describes): its own controller, or the cloud
			// controller manager, removes it. nodewright touches only its own.
			continue
		}
		if err := c.d.Cluster.ReleaseNode(ctx, n.Name, n.UID); err != nil {
			errs = append(errs, fmt.Errorf("lifecycle: delete node %s of terminated instance %s: %w", n.Name, id, err))
			continue
		}
		c.log.InfoContext(ctx, "deleted node of a terminated instance", "node", n.Name, "instance-id", id)
		res.DeletedNodes = append(res.DeletedNodes, n.Name)
	}
	return errors.Join(errs...)
}

// snapView answers from one pass's snapshot and instance listing.
type snapView struct {
	c          *Controller
	snap       *kube.Snapshot
	instances  map[string]nwaws.Instance
	byProvider map[string]*corev1.Node
	byName     map[string]*corev1.Node
	claims     []*apis.NodeClaim
	// owned marks Nodes some live claim matches.
	owned map[string]bool
	// chains are the claims' work-chain records.
	chains map[string]chainRecord
	lazy   *lazyView
	// status are the impaired instances, read once per pass on first use.
	status struct {
		once sync.Once
		m    map[string]time.Time
		err  error
	}
}

func (v *snapView) impaired(ctx context.Context) (map[string]time.Time, error) {
	v.status.once.Do(func() { v.status.m, v.status.err = v.lazy.impaired(ctx) })
	return v.status.m, v.status.err
}

func newSnapView(c *Controller, snap *kube.Snapshot, instances []nwaws.Instance, claims []*apis.NodeClaim) *snapView {
	v := &snapView{c: c, snap: snap, instances: map[string]nwaws.Instance{}, byProvider: map[string]*corev1.Node{},
		byName: map[string]*corev1.Node{}, claims: claims, owned: map[string]bool{}, lazy: &lazyView{c: c}}
	for _, inst := range instances {
		v.instances[inst.ID] = inst
	}
	for _, n := range snap.Nodes {
		v.byName[n.Name] = n
		if n.Spec.ProviderID != "" {
			v.byProvider[n.Spec.ProviderID] = n
		}
	}
	for _, cl := range claims {
		if n := v.match(cl); n != nil {
			v.owned[n.Name] = true
		}
	}
	return v
}

func (v *snapView) match(cl *apis.NodeClaim) *corev1.Node {
	if n := v.byName[cl.Status.NodeName]; n != nil && (cl.Status.ProviderID == "" || n.Spec.ProviderID == "" || n.Spec.ProviderID == cl.Status.ProviderID) {
		return n
	}
	if cl.Status.ProviderID != "" {
		return v.byProvider[cl.Status.ProviderID]
	}
	return nil
}

func (v *snapView) node(ctx context.Context, cl *apis.NodeClaim) (*corev1.Node, error) {
	if cl.IsTrue(apis.ConditionRegistered) && cl.Status.NodeName != "" && v.byName[cl.Status.NodeName] == nil {
		// The snapshot predates the registration of this claim in this pass.
		return v.lazy.node(ctx, cl)
	}
	if n := v.match(cl); n != nil {
		if !cl.IsTrue(apis.ConditionRegistered) || n.Labels[apis.NodeRegisteredLabel] == "true" {
			return n, nil
		}
		// Registered in this pass: the snapshot's copy is stale.
		return v.lazy.node(ctx, cl)
	}
	return nil, nil
}

func (v *snapView) pods(_ context.Context, node string) ([]*corev1.Pod, error) {
	return v.snap.PodsByNode[node], nil
}

func (v *snapView) instance(ctx context.Context, id string) (nwaws.Instance, bool, error) {
	if inst, ok := v.instances[id]; ok {
		return inst, instanceGone(inst.State), nil
	}
	// Not listed: confirm before acting (the listing may lag a launch).
	return v.lazy.instance(ctx, id)
}

func (v *snapView) poolClaims(ctx context.Context, pool string) ([]*apis.NodeClaim, error) {
	// Re-read: other claims of the pool may have been marked in this pass.
	fresh, err := v.lazy.poolClaims(ctx, pool)
	if err != nil {
		return nil, err
	}
	// A claim this pass already deleted (an empty node terminates within
	// one step) still counts against the budget until the next pass, so one
	// pass never disrupts more than the budget allows, as Karpenter's
	// per-pass emptiness does.
	live := map[string]bool{}
	for _, cl := range fresh {
		live[cl.Name] = true
	}
	for _, cl := range v.claims {
		if cl.NodePoolName() != pool || live[cl.Name] {
			continue
		}
		gone := cl.DeepCopy()
		if !gone.Deleting() {
			now := metav1.NewTime(v.c.d.Now())
			gone.DeletionTimestamp = &now
		}
		fresh = append(fresh, gone)
	}
	return fresh, nil
}

func (v *snapView) nodeReady(_ context.Context, cl *apis.NodeClaim) bool {
	n := v.match(cl)
	return n != nil && ready(n)
}
