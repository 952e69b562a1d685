package lifecycle_test

import (
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/lifecycle"

	"time"
)

// The unregistered taint keeps pods off a node whose labels are not yet its
// claim's: no version of the Node the API server ever held may lack the
// taint while still lacking the registration labels.
func TestRegistrationLabelsBeforeTheTaintGoes(t *testing.T) {
	e := newEnv(t)
	c := e.newController(e.deps())
	list, err := e.cs.CoreV1().Nodes().List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := e.cs.CoreV1().Nodes().Watch(e.ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	var seen []*corev1.Node
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted {
				mu.Lock()
				seen = append(seen, n)
				mu.Unlock()
			}
		}
	}()
	cl := e.launchClaim("reg-order")
	cl = e.reconcileUntil(c, cl.Name, "registered", func(_ lifecycle.Outcome, cl *apis.NodeClaim) bool {
		return cl.IsTrue(apis.ConditionRegistered)
	})
	// The watch delivers the last writes shortly after they return.
	e.reconcileUntil(c, cl.Name, "the watch caught up", func(lifecycle.Outcome, *apis.NodeClaim) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range seen {
			if n.Name == cl.Status.NodeName && n.Labels[apis.NodeRegisteredLabel] == "true" && !hasTaint(n, apis.UnregisteredTaintKey) {
				return true
			}
		}
		return false
	})
	w.Stop()
	<-done
	versions := 0
	for _, n := range seen {
		if n.Name != cl.Status.NodeName {
			continue
		}
		versions++
		if !hasTaint(n, apis.UnregisteredTaintKey) && (n.Labels[apis.NodeRegisteredLabel] != "true" || n.Labels["team"] != "payments") {
			t.Errorf("node %s at resourceVersion %s had no unregistered taint but not its registration labels: %v", n.Name, n.ResourceVersion, n.Labels)
		}
	}
	if versions < 2 {
		t.Errorf("watched %d versions of the node", versions)
	}
}

// A launched claim registers (labels and taints synced, the unregistered
// taint removed) and initializes only once its startup taint is gone; the
// node's allocatable is learned for the instance type.
func TestRegistrationAndInitialization(t *testing.T) {
	e := newEnv(t)
	c := e.newController(e.deps())
	cl := e.launchClaim("reg-a")
	cl = e.reconcileUntil(c, cl.Name, "registered", func(o lifecycle.Outcome, cl *apis.NodeClaim) bool {
		return cl.IsTrue(apis.ConditionRegistered)
	})
	n, err := e.cs.CoreV1().Nodes().Get(e.ctx, cl.Status.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.ProviderID != cl.Status.ProviderID {
		t.Errorf("node providerID %s, claim %s", n.Spec.ProviderID, cl.Status.ProviderID)
	}
	for k, v := range map[string]string{
		apis.NodePoolLabelKey: "default", "team": "payments", apis.NodeRegisteredLabel: "true",
		corev1.LabelInstanceTypeStable: "m5.large", apis.CapacityTypeLabelKey: "on-demand", apis.NodeClassLabelKey: "default",
	} {
		if n.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if hasTaint(n, apis.UnregisteredTaintKey) {
		t.Error("unregistered taint still on the node")
	}
	if !hasTaint(n, "dedicated") || !hasTaint(n, "example.com/agent") {
		t.Errorf("pool taint or startup taint missing: %v", n.Spec.Taints)
	}
	// Ready, but the startup taint holds initialization back.
	for range 5 {
		if _, err := c.Reconcile(e.ctx, cl.Name); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cl, _ = e.st.GetNodeClaim(e.ctx, cl.Name); cl.IsTrue(apis.ConditionInitialized) {
		t.Fatal("initialized while the startup taint is present")
	}
	if _, err := e.kc.RemoveTaints(e.ctx, n.Name, "example.com/agent", ""); err != nil {
		t.Fatal(err)
	}
	cl = e.reconcileUntil(c, cl.Name, "initialized", func(o lifecycle.Outcome, cl *apis.NodeClaim) bool {
		return cl.IsTrue(apis.ConditionInitialized)
	})
	n, _ = e.cs.CoreV1().Nodes().Get(e.ctx, cl.Status.NodeName, metav1.GetOptions{})
	if n.Labels[apis.NodeInitializedLabel] != "true" {
		t.Error("node not labelled initialized")
	}
	if !cl.Status.Allocatable.Cpu().Equal(*n.Status.Allocatable.Cpu()) {
		t.Errorf("claim allocatable %v, node %v", cl.Status.Allocatable, n.Status.Allocatable)
	}
	obs, err := e.st.ObservedCapacities(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range obs {
		found = found || (o.InstanceType == "m5.large" && o.NodeName == n.Name && o.Allocatable.Memory().Equal(*n.Status.Allocatable.Memory()))
	}
	if !found {
		t.Errorf("no observed capacity for m5.large from node %s: %+v", n.Name, obs)
	}
}
