package karpenter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/karpenter"
)

// Karpenter's own NodePool and KWOKNodeClass.
const (
	karpenterPool  = "kpool"
	karpenterClass = "kclass"
)

var (
	nodePools   = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"}
	nodeClaims  = schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodeclaims"}
	nodeClasses = schema.GroupVersionResource{Group: "karpenter.kwok.sh", Version: "v1alpha1", Resource: "kwoknodeclasses"}
)

// karpenterObjects is Karpenter's side of the cluster: a KWOKNodeClass and
// a NodePool whose nodes carry ownerLabel=karpenter, on-demand, of one
// 2-CPU type (so 6 pods take several nodes and scaling down consolidates
// them), consolidated when empty or underutilized after 2 s with a 100%
// budget.
var karpenterObjects = fmt.Sprintf(`apiVersion: karpenter.kwok.sh/v1alpha1
kind: KWOKNodeClass
metadata:
  name: %[1]s
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %[2]s
spec:
  template:
    metadata:
      labels:
        %[3]s: karpenter
    spec:
      nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: %[1]s}
      expireAfter: Never
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: kubernetes.io/os, operator: In, values: [linux]}
      - {key: node.kubernetes.io/instance-type, operator: In, values: [c-2x-amd64-linux]}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 2s
    budgets: [{nodes: "100%%"}]
`, karpenterClass, karpenterPool, ownerLabel)

// startKarpenter runs the controller in e's cluster with its NodePool and
// KWOKNodeClass; the controller's log is printed when t fails.
func startKarpenter(t *testing.T, e *cloudtest.Env) dynamic.Interface {
	t.Helper()
	c, err := karpenter.Start(e.Ctx, e.Cloud, karpenter.Options{})
	if err != nil {
		t.Fatalf("run Karpenter: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Karpenter's log (%s), last lines:\n%s", c.Log, c.Tail(60))
		}
		c.Close()
	})
	dyn, err := dynamic.NewForConfig(e.Cloud.REST)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(karpenterObjects, "\n---\n") {
		var obj unstructured.Unstructured
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		gvr := nodePools
		if obj.GetKind() == "KWOKNodeClass" {
			gvr = nodeClasses
		}
		if _, err := dyn.Resource(gvr).Create(e.Ctx, &obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	return dyn
}

// poolNodes is what Karpenter's NodePool status counts.
func poolNodes(ctx context.Context, dyn dynamic.Interface) (int64, error) {
	np, err := dyn.Resource(nodePools).Get(ctx, karpenterPool, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	n, _, err := unstructured.NestedInt64(np.Object, "status", "nodes")
	return n, err
}

// claimNames lists Karpenter's NodeClaims.
func claimNames(ctx context.Context, dyn dynamic.Interface) ([]string, error) {
	list, err := dyn.Resource(nodeClaims).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range list.Items {
		out = append(out, c.GetName())
	}
	return out, nil
}
