package provisioning

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/store/storetest"
)

// memStore is the shared in-memory store (internal/store/storetest, held to
// the DynamoDB store's contract) recording the lease and claim calls made
// to it (the last-run record's reads and writes are not recorded).
type memStore struct {
	*storetest.Store
	mu    sync.Mutex
	calls []string
}

func newMemStore(now func() time.Time) *memStore {
	m := &memStore{}
	m.Store = storetest.New(storetest.WithClock(now), storetest.WithObserver(m.record))
	return m
}

func (m *memStore) record(op string) {
	switch op {
	case "AcquireLease", "ListNodeClaims", "CreateNodeClaim", "MutateNodeClaim", "UpdateNodeClaim", "DeleteNodeClaim":
		m.mu.Lock()
		defer m.mu.Unlock()
		m.calls = append(m.calls, op)
	}
}

func (m *memStore) live() []*apis.NodeClaim {
	out, _ := m.Store.ListNodeClaims(context.Background())
	return out
}

// tombstone is the deleted claim name as it was deleted (nil if none).
func (m *memStore) tombstone(name string) *apis.NodeClaim {
	ts, err := m.Store.GetTombstone(context.Background(), name)
	if err != nil {
		return nil
	}
	return ts.Claim
}

// fakeCluster serves snapshots and records pod events.
type fakeCluster struct {
	mu sync.Mutex
	// pending returns the pending pods for the nth pending-pod listing
	// (0-based); nil serves snap.PendingPods every time.
	pending func(n int) []*corev1.Pod
	snap    kube.Snapshot
	lists   int
	events  []recordedEvent
	// boundReads counts the snapshots that asked for the bound pods.
	boundReads int
}

type recordedEvent struct {
	Pod, Type, Reason, Message string
}

func (f *fakeCluster) Snapshot(_ context.Context, o kube.SnapshotOptions) (*kube.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.snap
	if f.pending != nil {
		s.PendingPods = f.pending(f.lists)
	}
	f.lists++
	if o.Parts == kube.PartPendingPods {
		return &kube.Snapshot{PendingPods: s.PendingPods}, nil
	}
	if o.Parts != 0 && o.Parts&kube.PartBoundPods == 0 {
		s.PodsByNode = nil // as the real client: only the parts asked for
	} else {
		f.boundReads++
	}
	return &s, nil
}

func (f *fakeCluster) PodEvent(_ context.Context, p *corev1.Pod, typ, reason, format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, recordedEvent{Pod: p.Namespace + "/" + p.Name, Type: typ, Reason: reason, Message: fmt.Sprintf(format, args...)})
	return nil
}

func (f *fakeCluster) eventsWith(reason string) []recordedEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []recordedEvent
	for _, e := range f.events {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// fakeLauncher launches the cheapest allowed offering, idempotently per
// claim name, with capacity errors for the offerings in ice (which it also
// marks unavailable, as the real ICE cache does).
type fakeLauncher struct {
	mu        sync.Mutex
	cat       *catalog.Catalog
	ice       map[scheduling.OfferingKey]bool // offerings with no capacity
	marked    map[scheduling.OfferingKey]bool // the ICE set the planner reads
	failNext  []error                         // errors returned by the next calls
	instances map[string]nwaws.Instance       // by claim name
	calls     []string                        // claim names, one per call
	fresh     []bool                          // req.New, one per call
	firsts    []int                           // req.FirstAttempt, one per call
	seq       int
}

func newFakeLauncher(cat *catalog.Catalog) *fakeLauncher {
	return &fakeLauncher{cat: cat, ice: map[scheduling.OfferingKey]bool{}, marked: map[scheduling.OfferingKey]bool{}, instances: map[string]nwaws.Instance{}}
}

func (f *fakeLauncher) Launch(_ context.Context, req nwaws.LaunchRequest) (nwaws.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	name := req.NodeClaim.Name
	f.calls = append(f.calls, name)
	f.fresh = append(f.fresh, req.New)
	f.firsts = append(f.firsts, req.FirstAttempt)
	if _, ok := f.instances[name]; ok && req.New {
		// What the real launcher would not see: a second instance.
		return nwaws.Instance{}, fmt.Errorf("launch of %s marked new, but it has an instance", name)
	}
	if len(f.failNext) > 0 {
		err := f.failNext[0]
		f.failNext = f.failNext[1:]
		return nwaws.Instance{}, err
	}
	if inst, ok := f.instances[name]; ok {
		return inst, nil
	}
	allowed := func(key, v string) bool {
		for _, r := range req.NodeClaim.Spec.Requirements {
			if r.Key == key && r.Operator == corev1.NodeSelectorOpIn {
				for _, x := range r.Values {
					if x == v {
						return true
					}
				}
				return false
			}
		}
		return true
	}
	best, bestPrice, bestOff := "", 0.0, catalog.Offering{}
	for _, it := range req.InstanceTypes {
		for _, o := range it.Offerings {
			if !o.Available || !allowed(catalog.LabelTopologyZone, o.Zone) || !allowed(catalog.LabelCapacityType, o.CapacityType) {
				continue
			}
			k := scheduling.OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}
			if f.ice[k] {
				f.marked[k] = true
				continue
			}
			if best == "" || o.Price < bestPrice {
				best, bestPrice, bestOff = it.Name, o.Price, o
			}
		}
	}
	if best == "" {
		return nwaws.Instance{}, &nwaws.LaunchError{NodeClaim: name, Err: fmt.Errorf("%w: every offering short", nwaws.ErrInsufficientCapacity)}
	}
	f.seq++
	inst := nwaws.Instance{ID: fmt.Sprintf("i-%05d", f.seq), Type: best, Zone: bestOff.Zone, CapacityType: bestOff.CapacityType,
		ImageID: "ami-1", State: "pending", NodeClaim: name, LaunchTemplate: "lt-1"}
	f.instances[name] = inst
	return inst, nil
}

func (f *fakeLauncher) unavailable(context.Context) (map[scheduling.OfferingKey]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[scheduling.OfferingKey]bool{}
	for k := range f.marked {
		out[k] = true
	}
	return out, nil
}

func (f *fakeLauncher) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// fakeClock is a clock Sleep advances.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
	return ctx.Err()
}

type poolOpts struct {
	types  []string // instance types; nil: m5.large, m5.xlarge, m5.2xlarge
	ct     []string // capacity types; nil: on-demand
	limits map[string]string
	// broad replaces the instance-type list with the seeds' default pool
	// requirements (categories c, m, r; generation > 5): hundreds of types.
	broad bool
	// replicas makes the pool static.
	replicas *int64
}

// testConfig loads the package's pool: "default", labelled team=web, in
// us-west-2a and us-west-2b, on the default node class.
func testConfig(t testing.TB, o poolOpts) *apis.Config {
	t.Helper()
	if o.types == nil {
		o.types = []string{"m5.large", "m5.xlarge", "m5.2xlarge"}
	}
	if o.ct == nil {
		o.ct = []string{"on-demand"}
	}
	types := []apistest.Req{apistest.In(catalog.LabelInstanceType, o.types...)}
	if o.broad {
		types = []apistest.Req{
			apistest.In(catalog.LabelInstanceCategory, "c", "m", "r"),
			{Key: catalog.LabelInstanceGeneration, Op: "Gt", Values: []string{"5"}},
		}
	}
	pool := apistest.Pool{
		Labels: map[string]string{"team": "web"},
		Requirements: append(types,
			apistest.In(catalog.LabelCapacityType, o.ct...),
			apistest.In(catalog.LabelTopologyZone, "us-west-2a", "us-west-2b")),
		Limits:   o.limits,
		Replicas: o.replicas,
	}
	return apistest.Load(t, apistest.Doc(pool.YAML(), apistest.NodeClass{}.YAML()))
}

func testCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Builtin("us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func pod(name, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000, 0))},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		}}},
	}
}

func pods(prefix string, n int, cpu, mem string) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("%s-%d", prefix, i), cpu, mem)
	}
	return out
}

// env is a provisioner over fakes.
type env struct {
	t        *testing.T
	clock    *fakeClock
	store    *memStore
	cluster  *fakeCluster
	launcher *fakeLauncher
	cfg      *apis.Config
	cat      *catalog.Catalog
	settings Settings
}

func newEnv(t *testing.T, o poolOpts, pending []*corev1.Pod) *env {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	cat := testCatalog(t)
	return &env{
		t: t, clock: clock, store: newMemStore(clock.Now),
		cluster:  &fakeCluster{snap: kube.Snapshot{PendingPods: pending, PodsByNode: map[string][]*corev1.Pod{}}},
		launcher: newFakeLauncher(cat), cfg: testConfig(t, o), cat: cat,
	}
}

func (e *env) provisioner() *Provisioner {
	e.t.Helper()
	p, err := New(Deps{
		Store: e.store, Cluster: e.cluster, Launcher: e.launcher,
		Catalog:     func(context.Context) (*catalog.Catalog, error) { return e.cat, nil },
		Unavailable: e.launcher.unavailable,
		Config:      e.cfg, Now: e.clock.Now, Sleep: e.clock.Sleep, Settings: e.settings,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) run(tr Trigger) *Result {
	e.t.Helper()
	res, err := e.provisioner().Run(context.Background(), tr)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}
