package lifecycle

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/store/storetest"
)

// The state machine's unit tests run the controller in memory: fast, no
// servers. The store is storetest's (the DynamoDB store's contract); the
// cluster and cloud fakes below model only the calls the phases (and the
// termination steps they start) make, and any other call hits the embedded
// nil interface and panics, so a phase that starts calling something new
// shows up here. The slower tests beside these run the same transitions
// against a real API server, dynalite and the AWS simulator.

// fakeCluster is the API server: Nodes by name and the pods bound to them.
type fakeCluster struct {
	Cluster
	mu     sync.Mutex
	nodes  map[string]*corev1.Node
	pods   map[string][]*corev1.Pod
	events []string
}

func (f *fakeCluster) ClaimNode(_ context.Context, cl *apis.NodeClaim) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.nodes {
		if n.Name == cl.Status.NodeName || (cl.Status.ProviderID != "" && n.Spec.ProviderID == cl.Status.ProviderID) {
			return n.DeepCopy(), nil
		}
	}
	return nil, nil
}

func (f *fakeCluster) node(name string) (*corev1.Node, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[name]
	return n.DeepCopy(), ok
}

func (f *fakeCluster) PodsOnNode(_ context.Context, node string) ([]*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*corev1.Pod(nil), f.pods[node]...), nil
}

func (f *fakeCluster) PatchNodeLabels(_ context.Context, node string, set map[string]string, remove []string) (*corev1.Node, error) {
	return f.patchNode(node, func(n *corev1.Node) *map[string]string { return &n.Labels }, set, remove)
}

func (f *fakeCluster) PatchNodeAnnotations(_ context.Context, node string, set map[string]string, remove []string) (*corev1.Node, error) {
	return f.patchNode(node, func(n *corev1.Node) *map[string]string { return &n.Annotations }, set, remove)
}

// patchNode sets and removes keys of the node's map that field picks, as a
// merge patch of metadata.labels or metadata.annotations does.
func (f *fakeCluster) patchNode(node string, field func(*corev1.Node) *map[string]string, set map[string]string, remove []string) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[node]
	if !ok {
		return nil, kube.ErrNotFound
	}
	m := field(n)
	if *m == nil {
		*m = map[string]string{}
	}
	maps.Copy(*m, set)
	for _, k := range remove {
		delete(*m, k)
	}
	return n.DeepCopy(), nil
}

func (f *fakeCluster) UpdateNodeTaints(_ context.Context, node string, mutate func([]corev1.Taint) ([]corev1.Taint, bool)) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[node]
	if !ok {
		return nil, kube.ErrNotFound
	}
	if taints, changed := mutate(append([]corev1.Taint(nil), n.Spec.Taints...)); changed {
		n.Spec.Taints = taints
	}
	return n.DeepCopy(), nil
}

// DeleteNode deletes as the API server does: a Node with finalizers only
// gets its deletionTimestamp and stays until they are gone.
func (f *fakeCluster) DeleteNode(_ context.Context, name string, _ types.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[name]
	switch {
	case !ok:
	case len(n.Finalizers) > 0:
		if n.DeletionTimestamp == nil {
			now := metav1.Now()
			n.DeletionTimestamp = &now
		}
	default:
		delete(f.nodes, name)
	}
	return nil
}

func (f *fakeCluster) AddNodeFinalizer(_ context.Context, node, finalizer string) (*corev1.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[node]
	if !ok {
		return nil, kube.ErrNotFound
	}
	if !slices.Contains(n.Finalizers, finalizer) {
		n.Finalizers = append(n.Finalizers, finalizer)
	}
	return n.DeepCopy(), nil
}

func (f *fakeCluster) ReleaseNode(ctx context.Context, name string, uid types.UID) error {
	f.mu.Lock()
	if n, ok := f.nodes[name]; ok {
		n.Finalizers = slices.DeleteFunc(n.Finalizers, func(s string) bool { return s == apis.TerminationFinalizer })
		if n.DeletionTimestamp != nil && len(n.Finalizers) == 0 {
			delete(f.nodes, name)
		}
	}
	f.mu.Unlock()
	return f.DeleteNode(ctx, name, uid)
}

// deleteNode deletes a Node behind the controller's back (kubectl delete):
// with the finalizer the controller put on it, it is only marked.
func (f *fakeCluster) deleteNode(name string) { _ = f.DeleteNode(context.Background(), name, "") }

// forceDeleteNode deletes a Node ignoring its finalizers, as someone
// removing them by hand does.
func (f *fakeCluster) forceDeleteNode(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.nodes, name)
}

// setPods replaces the pods bound to a Node.
func (f *fakeCluster) setPods(node string, pods ...*corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[node] = pods
}

func (f *fakeCluster) VolumeAttachmentsOnNode(context.Context, string) ([]*storagev1.VolumeAttachment, error) {
	return nil, nil
}

func (f *fakeCluster) NodeEvent(_ context.Context, _ *corev1.Node, _, reason, _ string, _ ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, reason)
	return nil
}

// fakeCloud is EC2: this stack's instances by id.
type fakeCloud struct {
	Cloud
	mu         sync.Mutex
	instances  map[string]nwaws.Instance
	terminated []string
}

// Owns: every instance the fake knows is this stack's.
func (f *fakeCloud) Owns(i nwaws.Instance) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.instances[i.ID]
	return ok
}

func (f *fakeCloud) GetInstance(_ context.Context, id string) (nwaws.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	inst, ok := f.instances[id]
	if !ok {
		return nwaws.Instance{}, nwaws.ErrInstanceNotFound
	}
	return inst, nil
}

func (f *fakeCloud) Terminate(_ context.Context, ids ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		inst := f.instances[id]
		inst.State = "shutting-down"
		f.instances[id] = inst
		f.terminated = append(f.terminated, id)
	}
	return nil
}

// vanish makes an instance disappear from EC2 (terminated outside
// nodewright and long gone).
func (f *fakeCloud) vanish(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.instances, id)
}

// world is a controller over the fakes and the shared in-memory store,
// with a clock the test moves.
type world struct {
	t       *testing.T
	ctx     context.Context
	clock   *storetest.Clock
	store   *storetest.Store
	cluster *fakeCluster
	cloud   *fakeCloud
	metrics bytes.Buffer
	c       *Controller
}

// sm0 is when a state-machine test starts.
var sm0 = time.Date(2026, 11, 22, 2, 0, 0, 0, time.UTC)

// smPool is the pool the state-machine tests' claims belong to: WhenEmpty
// after 30 s, within budgets.
func smPool(budget string) *apis.NodePool {
	np := &apis.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Disruption = apis.Disruption{ConsolidationPolicy: apis.ConsolidationPolicyWhenEmpty,
		ConsolidateAfter: apis.DurationOf(30 * time.Second), Budgets: []apis.Budget{{Nodes: budget}}}
	return np
}

func newWorld(t *testing.T, pools ...*apis.NodePool) *world {
	t.Helper()
	clock := storetest.NewClock(sm0)
	w := &world{t: t, ctx: t.Context(), clock: clock, store: storetest.New(storetest.WithClock(clock.Now)),
		cluster: &fakeCluster{nodes: map[string]*corev1.Node{}, pods: map[string][]*corev1.Pod{}},
		cloud:   &fakeCloud{instances: map[string]nwaws.Instance{}}}
	c, err := New(Deps{Store: w.store, Cluster: w.cluster, Cloud: w.cloud, Config: &apis.Config{NodePools: pools},
		Metrics: metrics.New(&w.metrics, nil), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w.c = c
	return w
}

func (w *world) now() time.Time          { return w.clock.Now() }
func (w *world) advance(d time.Duration) { w.clock.Advance(d) }

// claim stores a new claim of the default pool, created now.
func (w *world) claim(name string, opts ...func(*apis.NodeClaim)) *apis.NodeClaim {
	w.t.Helper()
	cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(w.now()),
		Labels: map[string]string{apis.NodePoolLabelKey: "default", "team": "payments"}}}
	cl.Spec.StartupTaints = []corev1.Taint{{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}}
	cl.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule}}
	for _, o := range opts {
		o(cl)
	}
	w.store.Seed(cl)
	return w.get(name)
}

// launched stores a claim launched now on a running instance.
func (w *world) launched(name string, opts ...func(*apis.NodeClaim)) *apis.NodeClaim {
	w.t.Helper()
	w.claim(name, opts...)
	inst := nwaws.Instance{ID: "i-" + name, Type: "m5.large", Zone: "us-west-2a", CapacityType: "on-demand", State: "running"}
	w.cloud.mu.Lock()
	w.cloud.instances[inst.ID] = inst
	w.cloud.mu.Unlock()
	w.mutate(name, func(cl *apis.NodeClaim) {
		inst.Record(cl, metav1.NewTime(w.now()))
	})
	return w.get(name)
}

// kubelet registers the claim's Node as a kubelet does: Ready, with the
// unregistered and startup taints, and allocatable.
func (w *world) kubelet(cl *apis.NodeClaim, taints ...corev1.Taint) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-" + cl.Name, UID: types.UID("uid-" + cl.Name),
			Labels: map[string]string{corev1.LabelInstanceTypeStable: "m5.large"}},
		Spec: corev1.NodeSpec{ProviderID: cl.Status.ProviderID,
			Taints: append([]corev1.Taint{{Key: apis.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}}, taints...)},
		Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		},
	}
	w.cluster.mu.Lock()
	w.cluster.nodes[n.Name] = n
	w.cluster.mu.Unlock()
	return n.DeepCopy()
}

// removeTaint takes a taint off a Node, as its agent does with a startup
// taint.
func (w *world) removeTaint(node, key string) {
	_, err := w.cluster.UpdateNodeTaints(w.ctx, node, func(ts []corev1.Taint) ([]corev1.Taint, bool) {
		out := ts[:0]
		for _, t := range ts {
			if t.Key != key {
				out = append(out, t)
			}
		}
		return out, true
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

// initialized launches a claim and drives it through registration and,
// once its agent lifted the startup taint, initialization.
func (w *world) initialized(name string, opts ...func(*apis.NodeClaim)) *apis.NodeClaim {
	w.t.Helper()
	n := w.kubelet(w.launched(name, opts...))
	if out := w.reconcile(name); out.Action != ActionRegistered {
		w.t.Fatalf("claim %s not registered: %+v", name, out)
	}
	w.removeTaint(n.Name, "example.com/agent")
	if out := w.reconcile(name); out.Action != ActionInitialized {
		w.t.Fatalf("claim %s not initialized: %+v", name, out)
	}
	return w.get(name)
}

func (w *world) get(name string) *apis.NodeClaim {
	w.t.Helper()
	cl, err := w.store.GetNodeClaim(w.ctx, name)
	if err != nil {
		w.t.Fatal(err)
	}
	return cl
}

func (w *world) mutate(name string, fn func(*apis.NodeClaim)) {
	w.t.Helper()
	if _, err := w.store.MutateNodeClaim(w.ctx, name, func(cl *apis.NodeClaim) error { fn(cl); return nil }); err != nil {
		w.t.Fatal(err)
	}
}

// reconcile is a work message's reconcile of the claim.
func (w *world) reconcile(name string) Outcome {
	w.t.Helper()
	out, err := w.c.Reconcile(w.ctx, name)
	if err != nil {
		w.t.Fatalf("reconcile %s: %v", name, err)
	}
	return out
}

// at is one point of a claim's timeline: after the clock moved on by
// after, a reconcile has the outcome want (Claim is filled in).
type at struct {
	after time.Duration
	want  Outcome
}

// timeline reconciles the claim at each point in turn.
func (w *world) timeline(name string, points ...at) {
	w.t.Helper()
	for _, p := range points {
		w.advance(p.after)
		p.want.Claim = name
		w.want(w.reconcile(name), p.want)
	}
}

func (w *world) want(got, want Outcome) {
	w.t.Helper()
	if got != want {
		w.t.Fatalf("outcome %+v, want %+v", got, want)
	}
}

// wantGone checks that the claim is tombstoned with the reason.
func (w *world) wantGone(name, reason string) {
	w.t.Helper()
	if _, err := w.store.GetNodeClaim(w.ctx, name); err == nil {
		w.t.Fatalf("claim %s still there", name)
	}
	if ts := w.tombstone(name); ts.Claim.DeletionReason() != reason {
		w.t.Fatalf("claim %s tombstoned for %q, want %q", name, ts.Claim.DeletionReason(), reason)
	}
}

func (w *world) tombstone(name string) *store.Tombstone {
	w.t.Helper()
	ts, err := w.store.GetTombstone(w.ctx, name)
	if err != nil {
		w.t.Fatalf("claim %s not tombstoned: %v", name, err)
	}
	return ts
}

// wantTerminated checks which instances TerminateInstances was called for.
func (w *world) wantTerminated(ids ...string) {
	w.t.Helper()
	w.cloud.mu.Lock()
	defer w.cloud.mu.Unlock()
	if !slices.Equal(w.cloud.terminated, ids) {
		w.t.Errorf("terminated %v, want %v", w.cloud.terminated, ids)
	}
}
