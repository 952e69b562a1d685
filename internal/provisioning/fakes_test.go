package provisioning

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/store"
)

// memStore is an in-memory Store with the real one's conditional semantics
// (create-if-absent, versions, leases held by one holder).
type memStore struct {
	mu      sync.Mutex
	now     func() time.Time
	claims  map[string][]byte
	deleted map[string]*apis.NodeClaim
	kv      map[string]*store.KV
	lease   *store.Lease
	calls   []string
}

func newMemStore(now func() time.Time) *memStore {
	return &memStore{now: now, claims: map[string][]byte{}, deleted: map[string]*apis.NodeClaim{}, kv: map[string]*store.KV{}}
}

func (m *memStore) record(op string) {
	m.calls = append(m.calls, op)
}

func (m *memStore) AcquireLease(_ context.Context, name, holder string, d time.Duration) (*store.Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("AcquireLease")
	now := m.now()
	if m.lease != nil && m.lease.Holder != "" && m.lease.Holder != holder && m.lease.Expires.After(now) {
		return nil, &store.LeaseHeldError{Name: name, Holder: m.lease.Holder, Expires: m.lease.Expires}
	}
	tok := int64(1)
	if m.lease != nil {
		tok = m.lease.Token + 1
	}
	m.lease = &store.Lease{Name: name, Holder: holder, Token: tok, Expires: now.Add(d)}
	cp := *m.lease
	return &cp, nil
}

func (m *memStore) RenewLease(_ context.Context, l *store.Lease, d time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil || m.lease.Token != l.Token || m.lease.Holder != l.Holder {
		return store.ErrLeaseLost
	}
	m.lease.Expires = m.now().Add(d)
	l.Expires = m.lease.Expires
	return nil
}

func (m *memStore) ReleaseLease(_ context.Context, l *store.Lease) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lease == nil || m.lease.Token != l.Token || m.lease.Holder != l.Holder {
		return store.ErrLeaseLost
	}
	m.lease.Holder = ""
	m.lease.Expires = m.now()
	return nil
}

func (m *memStore) GetKV(_ context.Context, k string) (*store.KV, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.kv[k]
	if !ok {
		return nil, store.ErrNotFound
	}
	cp := *v
	return &cp, nil
}

func (m *memStore) PutKV(_ context.Context, k string, value []byte, expected int64, _ time.Duration) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.kv[k]
	if (ok && cur.Version != expected) || (!ok && expected != 0) {
		return 0, store.ErrConflict
	}
	v := expected + 1
	m.kv[k] = &store.KV{Key: k, Value: append([]byte(nil), value...), Version: v}
	return v, nil
}

func decodeClaim(b []byte) *apis.NodeClaim {
	var c apis.NodeClaim
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

func (m *memStore) ListNodeClaims(context.Context) ([]*apis.NodeClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("ListNodeClaims")
	names := make([]string, 0, len(m.claims))
	for n := range m.claims {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*apis.NodeClaim, 0, len(names))
	for _, n := range names {
		out = append(out, decodeClaim(m.claims[n]))
	}
	return out, nil
}

func (m *memStore) CreateNodeClaim(_ context.Context, nc *apis.NodeClaim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("CreateNodeClaim")
	if _, ok := m.claims[nc.Name]; ok {
		return fmt.Errorf("nodeclaim %s: %w", nc.Name, store.ErrAlreadyExists)
	}
	if _, ok := m.deleted[nc.Name]; ok {
		return fmt.Errorf("nodeclaim %s (tombstone): %w", nc.Name, store.ErrAlreadyExists)
	}
	nc.ResourceVersion = "1"
	b, _ := json.Marshal(nc)
	m.claims[nc.Name] = b
	return nil
}

func (m *memStore) GetNodeClaim(_ context.Context, name string) (*apis.NodeClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.claims[name]
	if !ok {
		return nil, store.ErrNotFound
	}
	return decodeClaim(b), nil
}

func (m *memStore) MutateNodeClaim(_ context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("MutateNodeClaim")
	b, ok := m.claims[name]
	if !ok {
		return nil, store.ErrNotFound
	}
	c := decodeClaim(b)
	if err := fn(c); err != nil {
		return nil, err
	}
	v, _ := strconv.Atoi(c.ResourceVersion)
	c.ResourceVersion = strconv.Itoa(v + 1)
	b, _ = json.Marshal(c)
	m.claims[name] = b
	return decodeClaim(b), nil
}

func (m *memStore) DeleteNodeClaim(_ context.Context, nc *apis.NodeClaim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record("DeleteNodeClaim")
	b, ok := m.claims[nc.Name]
	if !ok {
		return store.ErrNotFound
	}
	if decodeClaim(b).ResourceVersion != nc.ResourceVersion {
		return store.ErrConflict
	}
	delete(m.claims, nc.Name)
	m.deleted[nc.Name] = nc
	return nil
}

func (m *memStore) live() []*apis.NodeClaim {
	out, _ := m.ListNodeClaims(context.Background())
	return out
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

const testPoolYAML = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels: {team: web}
    spec:
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: [%TYPES%]
        - key: karpenter.sh/capacity-type
          operator: In
          values: [%CT%]
        - key: topology.kubernetes.io/zone
          operator: In
          values: ["us-west-2a", "us-west-2b"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
%LIMITS%
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: NodeRole
  subnetSelectorTerms:
    - tags: {karpenter.sh/discovery: test}
  securityGroupSelectorTerms:
    - tags: {karpenter.sh/discovery: test}
`

type poolOpts struct {
	types  string // YAML list items, e.g. `"m5.large", "m5.xlarge"`
	ct     string
	limits string
	// broad replaces the instance-type list with the seeds' default pool
	// requirements (categories c, m, r; generation > 5): hundreds of types.
	broad bool
}

func testConfig(t testing.TB, o poolOpts) *apis.Config {
	t.Helper()
	if o.types == "" {
		o.types = `"m5.large", "m5.xlarge", "m5.2xlarge"`
	}
	if o.ct == "" {
		o.ct = `"on-demand"`
	}
	body := strings.NewReplacer("%TYPES%", o.types, "%CT%", o.ct, "%LIMITS%", o.limits).Replace(testPoolYAML)
	if o.broad {
		body = strings.Replace(body, `        - key: node.kubernetes.io/instance-type
          operator: In
          values: [`+o.types+`]`, `        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["5"]`, 1)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pool.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := apis.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
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
