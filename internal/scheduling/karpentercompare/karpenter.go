package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakecr "sigs.k8s.io/controller-runtime/pkg/client/fake"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	kscheduler "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/events"
	"sigs.k8s.io/karpenter/pkg/operator/injection"
	"sigs.k8s.io/karpenter/pkg/operator/options"
	kscheduling "sigs.k8s.io/karpenter/pkg/scheduling"
	"sigs.k8s.io/karpenter/pkg/utils/daemonset"
	nodepoolutils "sigs.k8s.io/karpenter/pkg/utils/nodepool"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// karpenterInput is everything Karpenter's scheduler reads that does not
// change between solves of one input: what the provisioner would get from
// its informers and from the cloud provider's instance type cache.
type karpenterInput struct {
	nodePools     []*karpv1.NodePool
	instanceTypes map[string][]*cloudprovider.InstanceType
	daemonPods    []*corev1.Pod
	pods          []*corev1.Pod
	// existing nodes and every object the fake API server must hold: the
	// nodes' pods (for topology counts and node usage) and volume objects.
	nodes    []*corev1.Node
	objects  []client.Object
	deleting map[string]bool
	settings karpenterSettings
}

// karpenterSettings are the knobs of the provisioner that shape a solve.
type karpenterSettings struct {
	// concurrency is NumConcurrentReconciles; 0 takes the controller's
	// default, ceil(cpu-requests/1000) = 1.
	concurrency int
	// timeout bounds Solve as Provisioner.Schedule does (1 minute there);
	// 0 lets it run to the end.
	timeout time.Duration
}

// provisionerSolveTimeout is Provisioner.Schedule's bound on Solve: what is
// not scheduled by then waits for the next provisioning loop.
const provisionerSolveTimeout = time.Minute

func newKarpenterInput(cfg *apis.Config, in *scheduling.Input, settings karpenterSettings) (*karpenterInput, error) {
	k := &karpenterInput{instanceTypes: instanceTypes(in), deleting: map[string]bool{}, settings: settings}
	for _, np := range cfg.NodePools {
		kp, err := nodePool(np)
		if err != nil {
			return nil, err
		}
		k.nodePools = append(k.nodePools, kp)
	}
	// The provisioner orders pools by weight before building templates.
	nodepoolutils.OrderByWeight(k.nodePools)
	for _, ds := range in.DaemonSets {
		k.daemonPods = append(k.daemonPods, daemonPod(ds))
	}
	k.pods = in.Pods
	k.addExisting(in.Nodes)
	k.addVolumes(in)
	return k, nil
}

// nodePool converts nodewright's karpenter.sh/v1 NodePool into Karpenter's
// own type through JSON: both follow the same CRD schema.
func nodePool(np *apis.NodePool) (*karpv1.NodePool, error) {
	raw, err := json.Marshal(np)
	if err != nil {
		return nil, fmt.Errorf("NodePool %s: marshal: %w", np.Name, err)
	}
	out := &karpv1.NodePool{}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("NodePool %s: as Karpenter's NodePool: %w", np.Name, err)
	}
	if out.Spec.Template.Spec.NodeClassRef == nil {
		return nil, fmt.Errorf("NodePool %s: no nodeClassRef (Karpenter requires one)", np.Name)
	}
	return out, nil
}

// daemonPod is the pod the provisioner derives from a DaemonSet when none of
// its pods is running yet (Provisioner.getDaemonSetPods): the template with
// limits merged into requests, and the template's required node affinity
// kept, since the DaemonSet controller overrides it per node.
func daemonPod(ds *appsv1.DaemonSet) *corev1.Pod {
	return daemonset.PodForDaemonSet(ds.DeepCopy())
}

// addExisting turns nodewright's existing nodes into Nodes for cluster
// state, with nodewright's allocatable (computed from the catalog when the
// input gave none) so both solvers see the same free room.
func (k *karpenterInput) addExisting(nodes []*scheduling.ExistingNode) {
	for _, en := range nodes {
		n := &corev1.Node{}
		n.Name = en.Name
		n.Labels = en.Labels
		n.Spec.Taints = en.Taints
		// Cluster state keys nodes by provider ID and ignores a managed node without one.
		n.Spec.ProviderID = en.Name
		n.Status.Allocatable = en.Allocatable
		n.Status.Capacity = en.Capacity
		if len(n.Status.Capacity) == 0 {
			n.Status.Capacity = en.Allocatable
		}
		k.nodes = append(k.nodes, n)
		k.objects = append(k.objects, n)
		if en.MarkedForDeletion {
			k.deleting[en.Name] = true
		}
		for _, p := range en.Pods {
			bound := p.DeepCopy()
			bound.Spec.NodeName = en.Name
			bound.ResourceVersion = ""
			if bound.Status.Phase == "" {
				bound.Status.Phase = corev1.PodRunning
			}
			k.objects = append(k.objects, bound)
		}
	}
}

func (k *karpenterInput) addVolumes(in *scheduling.Input) {
	for _, o := range in.PersistentVolumes {
		k.objects = append(k.objects, clean(o.DeepCopy()))
	}
	for _, o := range in.PersistentVolumeClaims {
		k.objects = append(k.objects, clean(o.DeepCopy()))
	}
	for _, o := range in.StorageClasses {
		k.objects = append(k.objects, clean(o.DeepCopy()))
	}
}

// clean drops a resource version the fake client would reject on create.
func clean[T client.Object](o T) T {
	o.SetResourceVersion("")
	return o
}

// karpenterCluster is the cluster the scheduler runs against: a fake API
// server holding the existing objects and Karpenter's in-memory cluster
// state fed from it, as its informers would.
type karpenterCluster struct {
	client     client.Client
	cluster    *state.Cluster
	stateNodes []*state.StateNode
}

func (k *karpenterInput) cluster(ctx context.Context) (*karpenterCluster, error) {
	c := fakecr.NewClientBuilder().
		WithObjects(k.objects...).
		// Cluster state lists a node's pods by this index, as the operator registers it.
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string {
			return []string{o.(*corev1.Pod).Spec.NodeName}
		}).
		Build()
	// state.Cluster asks its cloud provider only in Synced, which the
	// scheduler never calls; Karpenter's fake provider is not used because
	// its init adds test labels to Karpenter's well-known labels.
	cl := state.NewCluster(clock.RealClock{}, c, nil)
	for _, n := range k.nodes {
		if err := cl.UpdateNode(ctx, n.DeepCopy()); err != nil {
			return nil, fmt.Errorf("cluster state: node %s: %w", n.Name, err)
		}
	}
	if err := k.updatePods(ctx, c, cl); err != nil {
		return nil, err
	}
	var ids []string
	for name := range k.deleting {
		ids = append(ids, name)
	}
	cl.MarkForDeletion(ids...)
	return &karpenterCluster{client: c, cluster: cl, stateNodes: cl.DeepCopyNodes().Active()}, nil
}

// updatePods feeds bound pods to cluster state, which tracks pods with
// required anti-affinity for the topology's inverse anti-affinity checks.
func (k *karpenterInput) updatePods(ctx context.Context, c client.Client, cl *state.Cluster) error {
	var pods corev1.PodList
	if err := c.List(ctx, &pods); err != nil {
		return fmt.Errorf("cluster state: list pods: %w", err)
	}
	for i := range pods.Items {
		if err := cl.UpdatePod(ctx, &pods.Items[i]); err != nil {
			return fmt.Errorf("cluster state: pod %s/%s: %w", pods.Items[i].Namespace, pods.Items[i].Name, err)
		}
	}
	return nil
}

// karpenterContext carries the options Karpenter's controller parses when
// started with no flags (its defaults), and the provisioner's controller name.
func karpenterContext(ctx context.Context) (context.Context, error) {
	o := &options.Options{}
	fs := &options.FlagSet{FlagSet: flag.NewFlagSet("karpenter", flag.ContinueOnError)}
	o.AddFlags(fs)
	if err := o.Parse(fs); err != nil {
		return nil, fmt.Errorf("karpenter default options: %w", err)
	}
	return options.ToContext(injection.WithControllerName(ctx, "provisioner"), o), nil
}

// karpenterResult is one solve: the scheduler's results, the pods the
// provisioner set aside before scheduling (volume topology it could not
// read), and, when Solve hit its timeout, the pods it never decided.
type karpenterResult struct {
	results      kscheduler.Results
	volumeErrors map[*corev1.Pod]error
	unreached    []*corev1.Pod
	timeout      time.Duration
}

// solve does what Provisioner.Schedule does after reading the cluster:
// volume topology, topology, scheduler, Solve, and the truncation of each
// claim's instance types. ctx must come from karpenterContext.
func (k *karpenterInput) solve(ctx context.Context, kc *karpenterCluster) (*karpenterResult, error) {
	out := &karpenterResult{volumeErrors: map[*corev1.Pod]error{}}
	pods, volumeReqs := k.volumeRequirements(ctx, kc.client, out.volumeErrors)
	opts := k.schedulerOptions(ctx)
	nodePools := slices.Clone(k.nodePools)
	topology, err := kscheduler.NewTopology(ctx, kc.client, kc.cluster, kc.stateNodes, nodePools, k.instanceTypes, pods, opts...)
	if err != nil {
		return nil, fmt.Errorf("karpenter topology: %w", err)
	}
	s := kscheduler.NewScheduler(ctx, kc.client, nodePools, kc.cluster, kc.stateNodes, topology, k.instanceTypes,
		k.daemonPods, events.NewRecorder(&record.FakeRecorder{}), clock.RealClock{}, volumeReqs, nil, opts...)
	solveCtx, cancel := ctx, context.CancelFunc(func() {})
	if k.settings.timeout > 0 {
		solveCtx, cancel = context.WithTimeout(ctx, k.settings.timeout)
	}
	defer cancel()
	results, err := s.Solve(solveCtx, pods)
	// Like the provisioner, keep what was scheduled before the deadline.
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("karpenter solve: %w", err)
	}
	out.results = results.TruncateInstanceTypes(ctx, kscheduler.MaxInstanceTypes)
	if err != nil {
		out.timeout = k.settings.timeout
		out.unreached = unreached(pods, out.results)
	}
	return out, nil
}

// unreached lists the pods a timed-out Solve neither placed nor rejected.
// Placed pods are the scheduler's deep copies, so pods match by UID.
func unreached(pods []*corev1.Pod, r kscheduler.Results) []*corev1.Pod {
	decided := map[types.UID]bool{}
	for p := range r.PodErrors {
		decided[p.UID] = true
	}
	for _, n := range r.NewNodeClaims {
		for _, p := range n.Pods {
			decided[p.UID] = true
		}
	}
	for _, n := range r.ExistingNodes {
		for _, p := range n.Pods {
			decided[p.UID] = true
		}
	}
	var out []*corev1.Pod
	for _, p := range pods {
		if !decided[p.UID] {
			out = append(out, p)
		}
	}
	return out
}

// schedulerOptions are the ones Provisioner.Schedule passes: strict
// reserved-capacity mode, the configured minValues policy and preference
// policy; concurrency is the controller's (ceil(cpu-requests/1000), 1 by
// default) unless the command line set it.
func (k *karpenterInput) schedulerOptions(ctx context.Context) []kscheduler.Options {
	o := options.FromContext(ctx)
	n := k.settings.concurrency
	if n <= 0 {
		n = int((o.CPURequests + 999) / 1000)
	}
	opts := []kscheduler.Options{
		kscheduler.DisableReservedCapacityFallback,
		kscheduler.NumConcurrentReconciles(n),
		kscheduler.MinValuesPolicy(o.MinValuesPolicy),
	}
	if o.PreferencePolicy == options.PreferencePolicyIgnore {
		opts = append(opts, kscheduler.IgnorePreferences)
	}
	return opts
}

// volumeRequirements mirrors Provisioner.getVolumeTopologyRequirements: a
// pod whose volumes' topology cannot be read is left out of the solve (the
// provisioner logs it and retries later; here it is reported). The pod
// slice is a fresh copy because the scheduler's queue sorts it in place.
func (k *karpenterInput) volumeRequirements(ctx context.Context, c client.Client, failed map[*corev1.Pod]error) ([]*corev1.Pod, map[types.UID][]kscheduling.Requirements) {
	vt := kscheduler.NewVolumeTopology(c)
	pods := make([]*corev1.Pod, 0, len(k.pods))
	reqs := map[types.UID][]kscheduling.Requirements{}
	for _, p := range k.pods {
		r, err := vt.GetRequirements(ctx, p)
		if err != nil {
			failed[p] = fmt.Errorf("volume topology: %w", err)
			continue
		}
		if len(r) > 0 {
			reqs[p.UID] = r
		}
		pods = append(pods, p)
	}
	return pods, reqs
}
