package kube_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/apis"
)

// The finalizer round trip over the controllers' RBAC rights: added once
// beside another controller's, holding a deleted Node, and released
// without touching the other controller's finalizer.
func TestNodeFinalizerHoldsAndReleases(t *testing.T) {
	ctx, c, cs, _ := setup(t)
	name := "fin-" + fmt.Sprint(time.Now().UnixNano()%100000)
	node := fakeNode(t, ctx, cs, name)
	const other = "example.com/other"
	t.Cleanup(func() { clearFinalizers(cs, name) })
	if _, err := cs.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+other+`"]}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		n, err := c.AddNodeFinalizer(ctx, name, apis.TerminationFinalizer)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Sorted(slices.Values(n.Finalizers)); !slices.Equal(got, []string{other, apis.TerminationFinalizer}) {
			t.Fatalf("finalizers %v", n.Finalizers)
		}
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || n.DeletionTimestamp == nil {
		t.Fatalf("deleted node not held by its finalizers: %v %v", n, err)
	}
	if err := c.ReleaseNode(ctx, name, node.UID); err != nil {
		t.Fatal(err)
	}
	n, err = cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil || !slices.Equal(n.Finalizers, []string{other}) {
		t.Fatalf("after release: finalizers %v (%v), want only %s", n.Finalizers, err, other)
	}
	clearFinalizers(cs, name)
	if err := c.ReleaseNode(ctx, name, node.UID); err != nil {
		t.Fatalf("releasing a node already gone: %v", err)
	}
}

func clearFinalizers(cs kubernetes.Interface, name string) {
	_, _ = cs.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
}
