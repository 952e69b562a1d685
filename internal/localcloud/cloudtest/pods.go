package cloudtest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

// Claims are st's live NodeClaims, failing t if they cannot be listed.
func Claims(ctx context.Context, t testing.TB, st *store.Store) []*apis.NodeClaim {
	t.Helper()
	cls, err := st.ListNodeClaims(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cls
}

// Unschedulable reports whether the scheduler found no node for p.
func Unschedulable(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
	})
}

// WaitUnschedulable waits until namespace ns holds n pods matching selector
// (not being deleted) and the scheduler has found every one unschedulable:
// only then is a provisioner run sure to see them all.
func WaitUnschedulable(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns, selector string, n int, within time.Duration) {
	t.Helper()
	Eventually(t, "pods unschedulable", within, func() (bool, string) {
		list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		live := 0
		for i := range list.Items {
			p := &list.Items[i]
			if p.DeletionTimestamp != nil {
				continue
			}
			live++
			if !Unschedulable(p) {
				return false, p.Name + " not yet unschedulable"
			}
		}
		return live == n, fmt.Sprintf("%d/%d pods", live, n)
	})
}

// WatchTaint starts watching node now; wait reports when the API server
// first showed the node with a taint of key, or zero if it did not within
// the given time after wait was called.
func WatchTaint(ctx context.Context, t testing.TB, cs kubernetes.Interface, node, key string, within time.Duration) (wait func() time.Time) {
	t.Helper()
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan time.Time, 1)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if ok && slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == key }) {
				done <- time.Now()
				return
			}
		}
		done <- time.Time{}
	}()
	return func() time.Time {
		select {
		case at := <-done:
			return at
		case <-time.After(within):
			w.Stop()
			return time.Time{}
		}
	}
}
