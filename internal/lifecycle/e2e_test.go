package lifecycle_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
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
	prov, err := provisioning.New(provisioning.Deps{
		Store: e.st, Cluster: e.kc, Launcher: e.p, Config: e.cfg, Now: e.clock.Now,
		Catalog:     provisioning.ProviderCatalog(e.p, nil, e.cloud.Region, nil),
		Unavailable: provisioning.ProviderICE(e.p),
		Requeue:     e.requeueVia(e.sqs),
		Settings:    provisioning.Settings{BatchIdle: 200 * time.Millisecond, BatchMax: 2 * time.Second, RegistrationCheck: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}

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
