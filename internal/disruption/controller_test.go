package disruption

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/store/storetest"
)

// memStore is the shared in-memory store (internal/store/storetest, held to
// the DynamoDB store's contract).
type memStore struct{ *storetest.Store }

func newMemStore(now func() time.Time, claims []*apis.NodeClaim) *memStore {
	s := &memStore{storetest.New(storetest.WithClock(now))}
	s.Seed(claims...)
	return s
}

// claim is a copy of the stored claim (nil when there is none).
func (s *memStore) claim(name string) *apis.NodeClaim { return s.Claim(name) }

// fakeCluster serves snapshots of a fixture and records what is done to it.
type fakeCluster struct {
	f      *fixture
	mu     sync.Mutex
	events []string
	// cached records each snapshot's SnapshotOptions.Cached.
	cached []bool
}

func (c *fakeCluster) Snapshot(_ context.Context, o kube.SnapshotOptions) (*kube.Snapshot, error) {
	c.mu.Lock()
	c.cached = append(c.cached, o.Cached)
	c.mu.Unlock()
	snap := &kube.Snapshot{PendingPods: c.f.pend, Nodes: c.f.nodes, PodsByNode: map[string][]*corev1.Pod{}, PDBs: c.f.pdbs}
	for _, p := range c.f.pods {
		snap.PodsByNode[p.Spec.NodeName] = append(snap.PodsByNode[p.Spec.NodeName], p)
	}
	return snap, nil
}

func (c *fakeCluster) NodeEvent(_ context.Context, n *corev1.Node, typ, reason, format string, args ...any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, fmt.Sprintf("%s %s %s: %s", n.Name, typ, reason, fmt.Sprintf(format, args...)))
	return nil
}

func (c *fakeCluster) node(name string) *corev1.Node {
	for _, n := range c.f.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func (c *fakeCluster) AddTaint(_ context.Context, name string, t corev1.Taint) (*corev1.Node, error) {
	n := c.node(name)
	if n == nil {
		return nil, errors.New("no node " + name)
	}
	n.Spec.Taints = append(n.Spec.Taints, t)
	return n, nil
}

func (c *fakeCluster) RemoveTaints(_ context.Context, name, key string, effect corev1.TaintEffect) (*corev1.Node, error) {
	n := c.node(name)
	if n == nil {
		return nil, errors.New("no node " + name)
	}
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key && t.Effect == effect })
	return n, nil
}

func (c *fakeCluster) eventsWith(reason string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, e := range c.events {
		if strings.Contains(e, " "+reason+": ") {
			out = append(out, e)
		}
	}
	return out
}

type harness struct {
	f        *fixture
	st       *memStore
	cl       *fakeCluster
	c        *Controller
	now      time.Time
	passes   int // provisioning passes
	launched []string
	requeued []string
	metrics  *bytes.Buffer
}

func newHarness(t *testing.T, f *fixture, s Settings) *harness {
	t.Helper()
	h := &harness{f: f, now: f.now, metrics: &bytes.Buffer{}}
	h.st = newMemStore(func() time.Time { return h.now }, f.claims)
	h.cl = &fakeCluster{f: f}
	c, err := New(Deps{
		Store: h.st, Cluster: h.cl, Config: f.cfg,
		Catalog: func(context.Context) (*catalog.Catalog, error) { return f.cat, nil },
		Provision: func(context.Context) (provisioning.Result, error) {
			h.passes++
			return provisioning.Result{Launched: h.launched}, nil
		},
		Requeue: func(_ context.Context, m queue.Message, _ time.Duration) error {
			if m.Kind != queue.KindLifecycle {
				t.Errorf("requeue of kind %s", m.Kind)
			}
			h.requeued = append(h.requeued, m.Subject)
			return nil
		},
		Now: func() time.Time { return h.now }, Holder: "test", Settings: s,
		Metrics: metrics.New(h.metrics, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h
}

func (h *harness) run(t *testing.T) *Result {
	t.Helper()
	// The snapshot shows claims as the store has them (the fixture's
	// copies are only the seed).
	res, err := h.c.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A decision waits in the store for the validation delay (no sleeping)
// and acts on a later pass: the claim is marked, the lifecycle told, the
// node told why.
func TestControllerValidatesOnALaterPass(t *testing.T) {
	f := newFixture(t, fixOpt{})
	f.node("a", "m5.xlarge")
	f.node("b", "m5.xlarge")
	f.pod("p", "a", "500m", "512Mi")
	f.pod("q", "b", "500m", "512Mi")
	h := newHarness(t, f, Settings{})

	res := h.run(t)
	if !res.Decided || res.Executed || res.Waiting != "validation" || res.Action != ActionDelete {
		t.Fatalf("first pass: %+v", res)
	}
	victim := res.Candidates[0]
	if _, err := h.st.GetKV(ctx, CommandKey); err != nil {
		t.Fatalf("command not persisted: %v", err)
	}
	h.now = h.now.Add(5 * time.Second)
	if res = h.run(t); res.Executed || res.Waiting != "validation" {
		t.Fatalf("acted before the validation delay: %+v", res)
	}
	h.now = h.now.Add(11 * time.Second)
	res = h.run(t)
	if !res.Executed || !res.Done {
		t.Fatalf("validated pass: %+v", res)
	}
	cl := h.st.claim("claim-" + victim)
	if !cl.Deleting() || cl.DeletionReason() != apis.DeletionReasonUnderutilized {
		t.Fatalf("claim not marked: %+v", cl.DeletionTimestamp)
	}
	if !slices.Equal(h.requeued, []string{"claim-" + victim}) {
		t.Errorf("lifecycle messages %v", h.requeued)
	}
	if ev := h.cl.eventsWith(ReasonDisrupting); len(ev) != 1 || !strings.Contains(ev[0], "Consolidating: delete 1 node (m5.xlarge, $0.192/h), saves $0.192/h") {
		t.Errorf("events %v", ev)
	}
	if _, err := h.st.GetKV(ctx, CommandKey); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("finished command left in the store: %v", err)
	}
	for _, m := range []string{metrics.DisruptionDecisions, metrics.DisruptionEligibleNodes, metrics.DisruptionActions, metrics.NodeClaimsDisrupted, metrics.ClusterCostPerHour} {
		if !strings.Contains(h.metrics.String(), m) {
			t.Errorf("metric %s not recorded", m)
		}
	}
	byPool := false
	for _, line := range strings.Split(h.metrics.String(), "\n") {
		byPool = byPool || strings.Contains(line, `"`+metrics.ClusterCostPerHour+`"`) && strings.Contains(line, `"nodepool":`)
	}
	if !byPool {
		t.Errorf("no %s by nodepool:\n%s", metrics.ClusterCostPerHour, h.metrics.String())
	}
	// The other node is now the last one; the victim is deleting and the
	// budget (10% of 2 = 1) is spent.
	if res = h.run(t); res.Decided {
		t.Errorf("decided again while the budget is spent: %+v", res)
	}
}

// A decision the world no longer supports is dropped at validation.
func TestControllerDropsInvalidatedCommand(t *testing.T) {
	f := newFixture(t, fixOpt{})
	f.node("big", "m5.2xlarge")
	p := f.pod("small", "big", "500m", "512Mi")
	h := newHarness(t, f, Settings{})
	if res := h.run(t); !res.Decided {
		t.Fatalf("no decision: %+v", res)
	}
	p.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "true"}
	h.now = h.now.Add(20 * time.Second)
	res := h.run(t)
	if res.Executed || !strings.Contains(res.Dropped, "no longer a disruption candidate") {
		t.Fatalf("validation pass: %+v", res)
	}
	if cl := h.st.claim("claim-big"); cl.Deleting() || cl.IsTrue(apis.ConditionDisrupting) {
		t.Fatal("invalidated command still acted")
	}
}

// Deciding may read the watch cache and reused pods; validating a command
// and acting on it read fresh state, whether on a later pass or at once.
func TestControllerActsOnFreshReadsOnly(t *testing.T) {
	for _, delay := range []time.Duration{0, -1} {
		f := newFixture(t, fixOpt{})
		f.node("a", "m5.xlarge")
		f.node("b", "m5.xlarge")
		f.pod("p", "a", "500m", "512Mi")
		f.pod("q", "b", "500m", "512Mi")
		h := newHarness(t, f, Settings{ValidationDelay: delay})
		res := h.run(t)
		if delay == 0 {
			h.now = h.now.Add(20 * time.Second)
			res = h.run(t)
		}
		if !res.Executed {
			t.Fatalf("delay %v: not executed: %+v", delay, res)
		}
		if want := []bool{true, false}; !slices.Equal(h.cl.cached, want) {
			t.Fatalf("delay %v: snapshots cached %v, want %v (decide cached, validate fresh)", delay, h.cl.cached, want)
		}
	}
}

// Replace: candidates marked Disrupting and tainted, replacement asked of
// the provisioner; drained only once a replacement is initialized.
func TestControllerReplaceThenDrain(t *testing.T) {
	f := newFixture(t, fixOpt{})
	f.node("big", "m5.2xlarge")
	f.pod("small", "big", "500m", "512Mi")
	h := newHarness(t, f, Settings{ValidationDelay: -1})
	h.launched = []string{"claim-new"}
	res := h.run(t)
	if !res.Executed || res.Phase != PhaseReplacing || res.Action != ActionReplace || h.passes != 1 {
		t.Fatalf("first pass: %+v (provisioning passes %d)", res, h.passes)
	}
	cl := h.st.claim("claim-big")
	if !cl.IsTrue(apis.ConditionDisrupting) || cl.Deleting() {
		t.Fatal("candidate not disrupting, or deleted before its replacement exists")
	}
	if n := h.cl.node("big"); !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == apis.DisruptedTaintKey }) {
		t.Fatal("candidate not tainted")
	}
	h.now = h.now.Add(time.Minute)
	if res = h.run(t); res.Done || res.Waiting == "" || h.passes != 2 {
		t.Fatalf("pass without replacement: %+v (passes %d)", res, h.passes)
	}
	// The provisioner's replacement comes up.
	_, repl := f.node("new", "m5.large")
	h.st.Seed(repl)
	h.now = h.now.Add(time.Minute)
	if res = h.run(t); !res.Done {
		t.Fatalf("pass with an initialized replacement: %+v", res)
	}
	if cl := h.st.claim("claim-big"); !cl.Deleting() {
		t.Fatal("candidate not handed to termination")
	}
	if cl := h.st.claim(repl.Name); cl.Deleting() || cl.IsTrue(apis.ConditionDisrupting) {
		t.Fatal("replacement touched")
	}
	// The replacement is remembered: it will not be turned back into an
	// m5.2xlarge within the flip-flop window.
	hist := h.c.history(ctx)
	if len(hist) != 1 || !slices.Equal(hist[0].Replacements, []string{"claim-new"}) || !slices.Equal(hist[0].FromTypes, []string{"m5.2xlarge"}) {
		t.Fatalf("history %+v", hist)
	}
}

// Replacements that never come up are rolled back: the node takes pods
// again and says why.
func TestControllerRollsBackReplacement(t *testing.T) {
	f := newFixture(t, fixOpt{})
	f.node("big", "m5.2xlarge")
	f.pod("small", "big", "500m", "512Mi")
	h := newHarness(t, f, Settings{ValidationDelay: -1, ReplacementTimeout: 10 * time.Minute})
	if res := h.run(t); res.Phase != PhaseReplacing {
		t.Fatalf("first pass: %+v", res)
	}
	h.now = h.now.Add(11 * time.Minute)
	res := h.run(t)
	if !strings.HasPrefix(res.Dropped, "replacement timeout") {
		t.Fatalf("timeout pass: %+v", res)
	}
	cl := h.st.claim("claim-big")
	if cl.IsTrue(apis.ConditionDisrupting) || cl.Deleting() {
		t.Fatal("rollback left the candidate disrupting")
	}
	if n := h.cl.node("big"); len(n.Spec.Taints) != 0 {
		t.Fatalf("taints left: %v", n.Spec.Taints)
	}
	if ev := h.cl.eventsWith(ReasonBlocked); len(ev) == 0 || !strings.Contains(ev[0], "rolled back") {
		t.Errorf("events %v", ev)
	}
}

// Another pass holding the lease: this one does nothing.
func TestControllerLeaseHeld(t *testing.T) {
	f := newFixture(t, fixOpt{})
	f.node("big", "m5.2xlarge")
	h := newHarness(t, f, Settings{})
	if _, err := h.st.AcquireLease(ctx, LeaseName, "other", time.Minute); err != nil {
		t.Fatal(err)
	}
	if res := h.run(t); res.Skipped == "" || res.Decided {
		t.Fatalf("pass under a held lease: %+v", res)
	}
}

// A pass killed after saving Replacing but before marking resumes the
// marking; claims left Disrupting by a lost command are released.
func TestControllerCrashSafety(t *testing.T) {
	f := newFixture(t, fixOpt{})
	f.node("big", "m5.2xlarge")
	f.pod("small", "big", "500m", "512Mi")
	h := newHarness(t, f, Settings{ValidationDelay: -1})
	dec, err := Decide(ctx, func() *View { v := f.view(); v.Settings = Settings{ValidationDelay: -1}; return v }())
	if err != nil || dec.Command == nil {
		t.Fatalf("decide: %v", err)
	}
	cmd := dec.Command
	cmd.Phase, cmd.ReplacingSince = PhaseReplacing, h.now
	if _, err := h.c.saveCommand(ctx, cmd, 0); err != nil {
		t.Fatal(err)
	}
	res := h.run(t)
	if res.Phase != PhaseReplacing || res.Done {
		t.Fatalf("resumed pass: %+v", res)
	}
	if cl := h.st.claim("claim-big"); !cl.IsTrue(apis.ConditionDisrupting) {
		t.Fatal("resumed pass did not mark the candidate")
	}
	// Now lose the command.
	kv, err := h.st.GetKV(ctx, CommandKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.st.DeleteKV(ctx, CommandKey, kv.Version); err != nil {
		t.Fatal(err)
	}
	res = h.run(t)
	if !strings.Contains(res.Dropped, "released 1 nodes") {
		t.Fatalf("sweep pass: %+v", res)
	}
	if cl := h.st.claim("claim-big"); cl.IsTrue(apis.ConditionDisrupting) {
		t.Fatal("orphaned Disrupting mark kept")
	}
	if n := h.cl.node("big"); len(n.Spec.Taints) != 0 {
		t.Fatalf("orphan's taint kept: %v", n.Spec.Taints)
	}
}
