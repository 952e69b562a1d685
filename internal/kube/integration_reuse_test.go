package kube_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodewright/nodewright/internal/kube"
)

// A cached snapshot reads the pods' table first and re-reads only the nodes
// whose rows changed, reusing the others' pods from the client's last
// cached snapshot: after a pod leaves one node and another comes to a
// second, it shows what a fresh snapshot shows, from the real API server's
// watch cache (which answers resourceVersion=0 lists in one page).
func TestCachedSnapshotFollowsPodChanges(t *testing.T) {
	ctx, c, cs, ns := setup(t)
	a := fakeNode(t, ctx, cs, "reuse-a-"+ns)
	b := fakeNode(t, ctx, cs, "reuse-b-"+ns)
	runningPod(t, ctx, cs, ns, "a-0", a.Name, nil)
	runningPod(t, ctx, cs, ns, "a-1", a.Name, nil)
	runningPod(t, ctx, cs, ns, "b-0", b.Name, nil)
	expect := func(want map[string][]string) {
		t.Helper()
		var got map[string][]string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			snap, err := c.Snapshot(ctx, kube.SnapshotOptions{Parts: kube.PartBoundPods, PageSize: 1, Cached: true})
			if err != nil {
				return false, err
			}
			got = map[string][]string{}
			for node := range want {
				for _, p := range snap.PodsByNode[node] {
					got[node] = append(got[node], p.Name)
				}
				slices.Sort(got[node])
			}
			return reflect.DeepEqual(got, want), nil
		})
		if err != nil {
			t.Fatalf("cached snapshot shows %v, want %v: %v", got, want, err)
		}
	}
	expect(map[string][]string{a.Name: {"a-0", "a-1"}, b.Name: {"b-0"}})
	grace := int64(0)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "a-1", metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	runningPod(t, ctx, cs, ns, "b-1", b.Name, nil)
	expect(map[string][]string{a.Name: {"a-0"}, b.Name: {"b-0", "b-1"}})
}
