package lifecycle_test

import (
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	nwpods "github.com/nodewright/nodewright/internal/pods"
	"github.com/nodewright/nodewright/internal/provisioning"
)

// e2ePool is the end-to-end test's NodePool "e2e": three sizes on-demand,
// WhenEmpty after 5 s.
var e2ePool = apistest.Pool{
	Name: "e2e",
	Requirements: []apistest.Req{
		apistest.In(apis.CapacityTypeLabelKey, "on-demand"),
		apistest.In("node.kubernetes.io/instance-type", "m5.large", "m5.xlarge", "m5.2xlarge"),
	},
	ConsolidationPolicy: "WhenEmpty",
	ConsolidateAfter:    "5s",
}

// The whole loop through the real handlers: pending pods -> provisioner
// run -> lifecycle work items register and initialize the nodes -> the
// scheduler runs the pods; scaled to zero -> the schedule notices the
// empty nodes -> after consolidateAfter they are drained, terminated,
// their Nodes deleted and their claims tombstoned.
func TestEndToEndScaleUpAndDown(t *testing.T) {
	e := newEnv(t, withConfig(e2ePool.YAML()))
	d := e.deps()
	h := e.handler(d)
	prov := e.provisioner(nil)

	const replicas = 4
	cloudtest.Workload{Name: "inflate", Replicas: replicas, CPU: "1", Memory: "1Gi", NodeSelector: map[string]string{apis.NodePoolLabelKey: "e2e"},
		GraceSeconds: new(int64(0)), NoServiceAccountToken: true}.Deploy(e.ctx, e.t, e.cs, e.ns)
	pods := func() (total, pending, running int) {
		list, err := e.cs.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=inflate"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			total++
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					pending++
				}
			}
		}
		return
	}
	start := time.Now()
	for {
		if _, pending, _ := pods(); pending == replicas {
			break
		}
		if time.Since(start) > 60*time.Second {
			t.Fatal("pods never became Unschedulable")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t0 := time.Now()
	res, err := prov.Run(e.ctx, provisioning.Trigger{Source: provisioning.TriggerManual})
	if err != nil {
		t.Fatalf("provisioner run: %v", err)
	}
	if len(res.Launched) == 0 {
		t.Fatalf("provisioner launched nothing: %+v", res)
	}
	t.Logf("provisioner: %d claims launched (%v)", len(res.Launched), res.Launched)

	lastTick := time.Now()
	for {
		if _, _, running := pods(); running == replicas {
			break
		}
		if time.Since(t0) > 90*time.Second {
			_, pending, running := pods()
			t.Fatalf("pods not Running after 90 s: pending %d running %d", pending, running)
		}
		e.pumpOnce(h)
		if time.Since(lastTick) > 10*time.Second {
			e.tick(h)
			lastTick = time.Now()
		}
	}
	toRunning := time.Since(t0)
	// Work items in flight (the claims' post-initialization looks) are
	// consumed while the pods run, as Lambda's event source would.
	for settle := time.Now(); time.Since(settle) < 7*time.Second; {
		e.pumpOnce(h)
	}
	claims, err := e.st.ListNodeClaims(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for _, cl := range claims {
		if !cl.IsTrue(apis.ConditionInitialized) {
			t.Errorf("claim %s runs pods but is not initialized", cl.Name)
		}
		nodes = append(nodes, cl.Status.NodeName)
	}

	// Scale to zero.
	patch := []byte(`{"spec":{"replicas":0}}`)
	if _, err := e.cs.AppsV1().Deployments(e.ns).Patch(e.ctx, "inflate", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for {
		if total, _, _ := pods(); total == 0 {
			break
		}
		if time.Since(t0) > 3*time.Minute {
			t.Fatal("pods not gone after scale to 0")
		}
		// The work queue keeps being consumed, as Lambda's event source does.
		e.pumpOnce(h)
	}
	t1 := time.Now()
	// The schedule notices the emptied nodes; the work queue carries them
	// through consolidateAfter and the termination.
	e.tick(h)
	lastTick = time.Now()
	for {
		left, err := e.st.ListNodeClaims(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if time.Since(t1) > 90*time.Second {
			t.Fatalf("%d claims left 90 s after scale to 0", len(left))
		}
		e.pumpOnce(h)
		if time.Since(lastTick) > 10*time.Second {
			e.tick(h)
			lastTick = time.Now()
		}
	}
	scaleDown := time.Since(t1)
	for _, cl := range claims {
		if e.terminateCalls(cl.Status.InstanceID) != 1 {
			t.Errorf("instance %s of %s not terminated exactly once", cl.Status.InstanceID, cl.Name)
		}
		ts, err := e.st.GetTombstone(e.ctx, cl.Name)
		if err != nil || ts.Claim.DeletionReason() != apis.DeletionReasonEmpty {
			t.Errorf("claim %s tombstone: %+v %v", cl.Name, ts, err)
			continue
		}
		// Never sooner than consolidateAfter after the last pod left.
		emptyFor := ts.Claim.DeletionTimestamp.Sub(nwpods.LastPodEvent(ts.Claim))
		t.Logf("claim %s: last pod event %s, marked %s (empty for %v)", cl.Name, nwpods.LastPodEvent(ts.Claim).Format("15:04:05.000"),
			ts.Claim.DeletionTimestamp.Format("15:04:05.000"), emptyFor.Round(time.Millisecond))
		if emptyFor < 5*time.Second || nwpods.LastPodEvent(ts.Claim).Before(t1.Add(-time.Second)) {
			t.Errorf("claim %s deleted %v after its last pod event (consolidateAfter 5s; pods left at %s)", cl.Name, emptyFor, t1.Format("15:04:05.000"))
		}
	}
	for _, n := range nodes {
		if e.nodeExists(n) {
			t.Errorf("node %s left behind", n)
		}
	}
	t.Logf("e2e: %d pods on %d nodes; time to running %v (provisioner run %v); scale down %v (consolidateAfter 5s)",
		replicas, len(claims), toRunning.Round(time.Millisecond), res.Duration.Round(time.Millisecond), scaleDown.Round(time.Millisecond))
}

// staticWorld drives a static pool "fixed" beside a dynamic pool "elastic"
// through the real provisioner and lifecycle handlers.
type staticWorld struct {
	*env
	h    *lifecycle.Handler
	prov *provisioning.Provisioner
	last time.Time // last scheduled lifecycle pass
	// fixedSel and elasticSel select the pools' nodes (template labels).
	fixedSel, elasticSel map[string]string
}

const staticWorldLabel = "nodewright.io/static-world"

func newStaticWorld(t *testing.T) *staticWorld {
	reqs := []apistest.Req{
		apistest.In(apis.CapacityTypeLabelKey, "on-demand"),
		apistest.In("node.kubernetes.io/instance-type", "m5.large"),
	}
	two := int64(2)
	// Both pools consolidate empty nodes after 5 s; the static one ignores it.
	budget := []apistest.Budget{{Nodes: "10"}}
	// The pods select the world's own nodes by a label, not by pool name:
	// Nodes of earlier runs (-count) stay behind with the same pool names.
	id := strconv.FormatInt(seq.Add(1), 10)
	w := &staticWorld{fixedSel: map[string]string{staticWorldLabel: "fixed-" + id}, elasticSel: map[string]string{staticWorldLabel: "elastic-" + id}}
	fixed := apistest.Pool{Name: "fixed", Labels: w.fixedSel, Requirements: reqs, Replicas: &two,
		ConsolidationPolicy: "WhenEmpty", ConsolidateAfter: "5s", Budgets: budget}
	elastic := apistest.Pool{Name: "elastic", Labels: w.elasticSel, Requirements: reqs, ConsolidationPolicy: "WhenEmpty", ConsolidateAfter: "5s", Budgets: budget}
	e := newEnv(t, withConfig(apistest.Doc(fixed.YAML(), elastic.YAML())))
	prov, err := provisioning.New(provisioning.Deps{
		Store: e.st, Cluster: e.kc, Launcher: e.p, Config: e.cfg, Now: e.clock.Now,
		Catalog:     provisioning.ProviderCatalog(e.p, nil, e.cloud.Region, nil),
		Unavailable: provisioning.ProviderICE(e.p),
		Requeue:     e.requeueVia(e.sqs),
		Settings:    provisioning.Settings{BatchIdle: 100 * time.Millisecond, BatchMax: time.Second, RegistrationCheck: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	w.env, w.h, w.prov = e, e.handler(e.deps()), prov
	return w
}

// provision runs the provisioner once and returns the claims it launched.
func (w *staticWorld) provision() []string {
	w.t.Helper()
	res, err := w.prov.Run(w.ctx, provisioning.Trigger{Source: provisioning.TriggerSchedule})
	if err != nil {
		w.t.Fatalf("provisioner run: %v", err)
	}
	return res.Launched
}

// claims are the live claims of pool.
func (w *staticWorld) claims(pool string) []*apis.NodeClaim {
	w.t.Helper()
	all, err := w.st.ListNodeClaims(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []*apis.NodeClaim
	for _, cl := range all {
		if cl.NodePoolName() == pool {
			out = append(out, cl)
		}
	}
	return out
}

// until consumes the work queue (and runs the schedule every 5 s) until
// done holds.
func (w *staticWorld) until(what string, timeout time.Duration, done func() bool) {
	w.t.Helper()
	start := time.Now()
	for !done() {
		if time.Since(start) > timeout {
			w.t.Fatalf("%s: not after %v", what, timeout)
		}
		w.pumpOnce(w.h)
		if time.Since(w.last) > 5*time.Second {
			w.tick(w.h)
			w.last = time.Now()
		}
	}
}

// initialized reports whether pool has exactly n live claims, all
// initialized and none marked.
func (w *staticWorld) initialized(pool string, n int) func() bool {
	return func() bool {
		cls := w.claims(pool)
		for _, cl := range cls {
			if !cl.IsTrue(apis.ConditionInitialized) || cl.Deleting() {
				return false
			}
		}
		return len(cls) == n
	}
}

func (w *staticWorld) setReplicas(n int64) { w.cfg.NodePool("fixed").Spec.Replicas = &n }

func (w *staticWorld) podNode(app string) string {
	w.t.Helper()
	list, err := w.cs.CoreV1().Pods(w.ns).List(w.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		w.t.Fatal(err)
	}
	for _, p := range list.Items {
		if p.Status.Phase == corev1.PodRunning {
			return p.Spec.NodeName
		}
	}
	return ""
}

// The static pool end to end: its nodes come with no pod pending, follow
// spec.replicas up and down (down: the empty nodes go, through the drain),
// are not consolidated while an empty dynamic node is, and an expired or
// interrupted one is replaced.
func TestStaticPoolEndToEnd(t *testing.T) {
	w := newStaticWorld(t)
	if got := w.provision(); len(got) != 2 {
		t.Fatalf("replicas 2, no pod: launched %v", got)
	}
	w.until("2 static nodes initialized", 90*time.Second, w.initialized("fixed", 2))
	if got := w.provision(); len(got) != 0 {
		t.Fatalf("a kept pool launched %v", got)
	}

	w.setReplicas(3)
	if got := w.provision(); len(got) != 1 {
		t.Fatalf("replicas 3: launched %v", got)
	}
	w.until("3 static nodes initialized", 90*time.Second, w.initialized("fixed", 3))

	// One pod on a static node (kube-scheduler puts it there), one on a
	// dynamic node the provisioner launches for it.
	cloudtest.Workload{Name: "pinned", Replicas: 1, CPU: "100m", Memory: "64Mi", NodeSelector: w.fixedSel,
		GraceSeconds: new(int64(0)), NoServiceAccountToken: true}.Deploy(w.ctx, t, w.cs, w.ns)
	w.until("the pinned pod running", 60*time.Second, func() bool { return w.podNode("pinned") != "" })
	busy := w.podNode("pinned")
	cloudtest.Workload{Name: "elastic", Replicas: 1, CPU: "100m", Memory: "64Mi", NodeSelector: w.elasticSel,
		GraceSeconds: new(int64(0)), NoServiceAccountToken: true}.Deploy(w.ctx, t, w.cs, w.ns)
	w.until("the elastic pod pending", 30*time.Second, func() bool { return len(w.claims("elastic")) > 0 || len(w.provision()) > 0 })
	w.until("the elastic pod running", 90*time.Second, func() bool { return w.podNode("elastic") != "" })
	if n := len(w.claims("fixed")); n != 3 {
		t.Fatalf("the elastic pod's run changed the static pool: %d claims", n)
	}

	// Down to 1: the two empty static nodes go, the busy one stays.
	before := w.claims("fixed")
	w.setReplicas(1)
	w.provision()
	w.until("the static pool down to 1", 90*time.Second, w.initialized("fixed", 1))
	if kept := w.claims("fixed")[0]; kept.Status.NodeName != busy {
		t.Errorf("kept %s (node %s), want the busy node %s", kept.Name, kept.Status.NodeName, busy)
	}
	for _, cl := range before {
		if cl.Status.NodeName == busy {
			continue
		}
		ts, err := w.st.GetTombstone(w.ctx, cl.Name)
		if err != nil || ts.Claim.DeletionReason() != apis.DeletionReasonOverprovisioned || w.terminateCalls(cl.Status.InstanceID) != 1 {
			t.Errorf("removed claim %s: tombstone %+v %v, %d terminations", cl.Name, ts, err, w.terminateCalls(cl.Status.InstanceID))
		}
	}
	if w.podNode("pinned") != busy {
		t.Errorf("the pinned pod moved off %s", busy)
	}
	if !w.initialized("elastic", 1)() {
		t.Errorf("the static scale-down touched the dynamic pool: %+v", w.claims("elastic"))
	}

	// Both pods go: the empty dynamic node is consolidated, the empty
	// static node is not.
	for _, app := range []string{"pinned", "elastic"} {
		if err := w.cs.AppsV1().Deployments(w.ns).Delete(w.ctx, app, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w.until("the empty dynamic node consolidated", 90*time.Second, func() bool { return len(w.claims("elastic")) == 0 })
	if !w.initialized("fixed", 1)() {
		t.Fatalf("the empty static node was disrupted: %+v", w.claims("fixed"))
	}

	w.replaced(t, "expired", func(cl *apis.NodeClaim) {
		if _, err := w.st.MutateNodeClaim(w.ctx, cl.Name, func(c *apis.NodeClaim) error {
			c.Spec.ExpireAfter = apis.DurationOf(time.Second)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		w.send(cl.Name)
		w.until("the static claim expired", 30*time.Second, func() bool { return len(w.claims("fixed")) == 0 || w.claims("fixed")[0].Deleting() })
		w.awaitNudge("nodepool/fixed") // its replacement need not wait for the provisioner's schedule
	})
	// The interruption function's mark (a spot reclaim), then its pass.
	w.replaced(t, "interrupted", func(cl *apis.NodeClaim) {
		w.mark(cl.Name, apis.DeletionReasonInterrupted)
		w.send(cl.Name)
	})
}

// replaced takes the static pool's one node away by remove and checks a
// new one replaces it.
func (w *staticWorld) replaced(t *testing.T, how string, remove func(*apis.NodeClaim)) {
	t.Helper()
	old := w.claims("fixed")[0]
	remove(old)
	launched := w.provision()
	if len(launched) != 1 || launched[0] == old.Name {
		t.Fatalf("%s: the provisioner launched %v", how, launched)
	}
	w.until(how+" static node replaced", 90*time.Second, func() bool {
		cls := w.claims("fixed")
		return w.initialized("fixed", 1)() && cls[0].Name == launched[0] && !slices.ContainsFunc(cls, func(c *apis.NodeClaim) bool { return c.Name == old.Name })
	})
	if w.terminateCalls(old.Status.InstanceID) != 1 {
		t.Errorf("%s: instance %s terminated %d times", how, old.Status.InstanceID, w.terminateCalls(old.Status.InstanceID))
	}
}
