package lifecycle

import (
	"slices"
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
)

// Registration puts the claim's annotations on the Node as Karpenter does
// (the NodePool template's and karpenter.sh/...), but not nodewright's own
// bookkeeping.
func TestRegistrationAnnotatesTheNode(t *testing.T) {
	w := newWorld(t, smPool("10"))
	cl := w.launched("c", func(cl *apis.NodeClaim) {
		cl.Annotations = map[string]string{"example.com/cost-centre": "42", apis.NodePoolHashAnnotKey: "123",
			apis.NodewrightPrefix + "provisioner-run": "7"}
	})
	node := w.kubelet(cl).Name
	if out := w.reconcile("c"); out.Action != ActionRegistered {
		t.Fatalf("reconcile: %+v", out)
	}
	n, _ := w.cluster.node(node)
	if n.Annotations["example.com/cost-centre"] != "42" || n.Annotations[apis.NodePoolHashAnnotKey] != "123" {
		t.Errorf("template or karpenter.sh annotation missing on the node: %v", n.Annotations)
	}
	if _, ok := n.Annotations[apis.NodewrightPrefix+"provisioner-run"]; ok {
		t.Errorf("nodewright bookkeeping copied onto the node: %v", n.Annotations)
	}
}

// A registered Node without the termination finalizer (registered by an
// older nodewright, or stripped by hand) gets it back on the next reconcile.
func TestRegisteredNodeGetsTheFinalizerBack(t *testing.T) {
	w := newWorld(t, smPool("0"))
	node := w.initialized("f").Status.NodeName
	w.cluster.mu.Lock()
	w.cluster.nodes[node].Finalizers = nil
	w.cluster.mu.Unlock()
	w.reconcile("f")
	if n, _ := w.cluster.node(node); !slices.Contains(n.Finalizers, apis.TerminationFinalizer) {
		t.Fatalf("finalizer not restored: %v", n.Finalizers)
	}
}
