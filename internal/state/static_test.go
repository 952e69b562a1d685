package state_test

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/state"
)

// staticConfig has a static pool "fixed" of the given replicas (limit: its
// limits.nodes, "" for none) beside the dynamic pool "default".
func staticConfig(t *testing.T, replicas int64, limit string) *apis.Config {
	t.Helper()
	reqs := []apistest.Req{
		apistest.In(catalog.LabelInstanceType, "m5.large", "m5.xlarge"),
		apistest.In(catalog.LabelCapacityType, "on-demand"),
	}
	fixed := apistest.Pool{Name: "fixed", Requirements: reqs, Replicas: &replicas}
	if limit != "" {
		fixed.Limits = map[string]string{"nodes": limit}
	}
	dynamic := apistest.Pool{Requirements: reqs}
	return apistest.Load(t, apistest.Doc(fixed.YAML(), dynamic.YAML(), apistest.NodeClass{}.YAML()))
}

// poolClaim is a claim of pool; registered ones get a Node (returned).
func poolClaim(name, pool string, launched, registered bool) (*apis.NodeClaim, *corev1.Node) {
	cl := launchedClaim(name, "m5.large", "us-west-2a", "i-"+name)
	cl.Labels[apis.NodePoolLabelKey] = pool
	if !launched {
		cl.Status = apis.NodeClaimStatus{}
		return cl, nil
	}
	if !registered {
		return cl, nil
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, Labels: map[string]string{apis.NodePoolLabelKey: pool}},
		Spec: corev1.NodeSpec{ProviderID: cl.Status.ProviderID}}
	return cl, n
}

type staticWorld struct {
	claims []*apis.NodeClaim
	nodes  []*corev1.Node
	pods   []*corev1.Pod
}

func (w *staticWorld) add(name, pool string, launched, registered bool) *apis.NodeClaim {
	cl, n := poolClaim(name, pool, launched, registered)
	w.claims = append(w.claims, cl)
	if n != nil {
		w.nodes = append(w.nodes, n)
	}
	return cl
}

func (w *staticWorld) build(t *testing.T, cfg *apis.Config) *state.Cluster {
	t.Helper()
	c, err := state.Build(state.Sources{Snapshot: snapshot(nil, w.nodes, w.pods...), Config: cfg, Catalog: builtin(t), Claims: w.claims})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func names(ns []*state.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Claim.Name)
	}
	return out
}

func TestStaticScaleLaunchesTheShortfall(t *testing.T) {
	now := time.Now()
	cfg := staticConfig(t, 3, "")
	w := &staticWorld{}
	w.add("fixed-a", "fixed", true, true)
	w.add("fixed-b", "fixed", false, false) // write-ahead record of a crashed run: counted
	w.add("default-a", "default", true, true)
	gone := w.add("fixed-c", "fixed", true, true)
	gone.MarkForDeletion(apis.DeletionReasonExpired, "expired", metav1.NewTime(now))
	s := w.build(t, cfg).StaticScale(cfg.NodePool("fixed"), now)
	if s.Launch != 1 || s.Limited || len(s.Remove) != 0 || s.Held != 3 {
		t.Fatalf("scale = launch %d limited %v remove %v held %d, want launch 1 (the expiring claim is replaced)", s.Launch, s.Limited, names(s.Remove), s.Held)
	}
	if got := names(s.Active); !slices.Equal(got, []string{"fixed-b", "fixed-a"}) && !slices.Equal(got, []string{"fixed-a", "fixed-b"}) {
		t.Errorf("active = %v", got)
	}
	if s := w.build(t, cfg).StaticScale(cfg.NodePool("default"), now); s.Launch != 0 || len(s.Remove) != 0 {
		t.Errorf("a dynamic pool has no replicas to keep: %+v", s)
	}
}

// limits.nodes counts every claim of the pool, the ones draining too.
func TestStaticScaleStopsAtTheNodeLimit(t *testing.T) {
	now := time.Now()
	cfg := staticConfig(t, 4, "3")
	w := &staticWorld{}
	w.add("fixed-a", "fixed", true, true)
	gone := w.add("fixed-b", "fixed", true, true)
	gone.MarkForDeletion(apis.DeletionReasonInterrupted, "spot", metav1.NewTime(now))
	s := w.build(t, cfg).StaticScale(cfg.NodePool("fixed"), now)
	if s.Launch != 1 || !s.Limited {
		t.Fatalf("launch %d limited %v, want 1 (3 - 2 held) and limited", s.Launch, s.Limited)
	}
	w.add("fixed-c", "fixed", true, false)
	if s := w.build(t, cfg).StaticScale(cfg.NodePool("fixed"), now); s.Launch != 0 || !s.Limited {
		t.Fatalf("launch %d limited %v, want 0 and limited", s.Launch, s.Limited)
	}
}

// Safety: a scale-down removes exactly the surplus, only claims of the
// pool itself, least disruptive first; never another pool's node or a node
// nodewright did not launch, even one labelled with the pool.
func TestStaticScaleRemovesOnlyTheSurplus(t *testing.T) {
	now := time.Now()
	w := &staticWorld{}
	w.add("fixed-busy", "fixed", true, true)
	w.add("fixed-empty", "fixed", true, true)
	w.add("fixed-booting", "fixed", true, false)
	w.add("fixed-unlaunched", "fixed", false, false)
	guarded := w.add("fixed-guarded", "fixed", true, true)
	guarded.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "true"}
	w.add("default-empty", "default", true, true)
	w.nodes = append(w.nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Labels: map[string]string{apis.NodePoolLabelKey: "fixed"}}})
	w.pods = []*corev1.Pod{boundPod("web", "node-fixed-busy", "100m"), boundPod("api", "node-fixed-guarded", "100m")}
	order := []string{"fixed-unlaunched", "fixed-booting", "fixed-empty", "fixed-busy", "fixed-guarded"}
	for replicas := int64(0); replicas <= 6; replicas++ {
		cfg := staticConfig(t, replicas, "")
		s := w.build(t, cfg).StaticScale(cfg.NodePool("fixed"), now)
		want := max(5-int(replicas), 0)
		if got := names(s.Remove); !slices.Equal(got, order[:want]) {
			t.Errorf("replicas %d: remove %v, want %v", replicas, got, order[:want])
		}
		if wantLaunch := max(int(replicas)-5, 0); s.Launch != wantLaunch {
			t.Errorf("replicas %d: launch %d, want %d", replicas, s.Launch, wantLaunch)
		}
	}
}

// Pending pods never open a node in a static pool; the static pool's own
// template still plans one node for its replicas.
func TestStaticPoolsAreLeftOutOfThePodsInput(t *testing.T) {
	cfg := staticConfig(t, 2, "")
	pinned := pendingPod("pinned", "100m")
	pinned.Spec.NodeSelector = map[string]string{apis.NodePoolLabelKey: "fixed"}
	c, err := state.Build(state.Sources{Snapshot: snapshot([]*corev1.Pod{pendingPod("free", "100m"), pinned}, nil), Config: cfg, Catalog: builtin(t)})
	if err != nil {
		t.Fatal(err)
	}
	plan := solve(t, c, state.InputOptions{})
	if len(plan.NodeClaims) != 1 || plan.NodeClaims[0].NodePool != "default" || len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod != "ns/pinned" {
		t.Fatalf("plan claims %+v unschedulable %+v: want one default claim and the pinned pod unschedulable", plan.NodeClaims, plan.Unschedulable)
	}
	in, err := c.StaticInput("fixed")
	if err != nil {
		t.Fatal(err)
	}
	if len(in.NodePools) != 1 || in.NodePools[0].Name != "fixed" || len(in.Nodes) != 0 || len(in.Pods) != 1 {
		t.Fatalf("static input: pools %v nodes %d pods %d", in.NodePools, len(in.Nodes), len(in.Pods))
	}
	if _, err := c.StaticInput("default"); err == nil {
		t.Error("a dynamic pool has no static input")
	}
}
