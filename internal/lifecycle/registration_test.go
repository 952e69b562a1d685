package lifecycle_test

import (
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/lifecycle"
)

// The unregistered taint keeps pods off a node whose labels are not yet its
// claim's: no version of the Node the API server ever held may lack the
// taint while still lacking the registration labels.
func TestRegistrationLabelsBeforeTheTaintGoes(t *testing.T) {
	e := newEnv(t)
	c, err := lifecycle.New(e.deps())
	if err != nil {
		t.Fatal(err)
	}
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
