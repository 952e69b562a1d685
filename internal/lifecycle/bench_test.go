package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodewright/nodewright/internal/apis"
)

// BenchmarkDrain measures the termination workflow on the local cloud: a
// node running 100 pods (no PDBs) is marked for deletion and stepped, with
// the delays the steps ask for, until its claim is tombstoned. Reports
// evicted pods per second and the seconds from mark to tombstone.
//
//	go test ./internal/lifecycle -run '^$' -bench BenchmarkDrain -benchtime 1x
func BenchmarkDrain(b *testing.B) {
	const pods = 100
	e := newEnv(b)
	c := e.newController(e.deps())
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		cl, node := e.initializedClaim(c, fmt.Sprintf("bench-drain-%d", i))
		e.bulkPods(fmt.Sprintf("d%d", i), node.Name, pods)
		b.StartTimer()
		start := time.Now()
		e.mark(cl.Name, apis.DeletionReasonManual)
		steps := 0
		for {
			out, err := c.Reconcile(e.ctx, cl.Name)
			if err != nil {
				b.Fatal(err)
			}
			steps++
			if out.Done {
				break
			}
			if time.Since(start) > 3*time.Minute {
				b.Fatalf("drain of %d pods not done after 3 minutes", pods)
			}
			time.Sleep(out.RequeueAfter)
		}
		total += time.Since(start)
		b.ReportMetric(float64(steps), "steps")
	}
	b.ReportMetric(float64(pods*b.N)/total.Seconds(), "pods/s")
	b.ReportMetric(total.Seconds()/float64(b.N), "s/drain")
}

// BenchmarkScheduledPass measures the one-minute pass over 30 initialized,
// busy claims (steady state: nothing to do but look), which bounds how many
// claims one lifecycle invocation can keep up with.
//
//	go test ./internal/lifecycle -run '^$' -bench BenchmarkScheduledPass -benchtime 5x
func BenchmarkScheduledPass(b *testing.B) {
	const claims = 30
	e := newEnv(b, withBudget("0"))
	d := e.deps()
	c := e.newController(d)
	names := make([]string, claims)
	for i := range names {
		names[i] = e.launchClaim(fmt.Sprintf("bench-pass-%d", i)).Name
	}
	for _, n := range names {
		_, node := e.initialized(c, n)
		e.bulkPods("p"+n[len("bench-pass-"):], node.Name, 3)
	}
	// One pass to settle the pod-event clocks.
	if _, err := c.ReconcileAll(e.ctx); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res, err := c.ReconcileAll(e.ctx)
		if err != nil {
			b.Fatal(err)
		}
		if res.Claims != claims {
			b.Fatalf("pass saw %d claims", res.Claims)
		}
	}
	per := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(claims), "claims")
	b.ReportMetric(per.Seconds()*1000, "ms/pass")
}

// bulkPods creates n running pods bound to node.
func (e *env) bulkPods(prefix, node string, n int) {
	e.t.Helper()
	grace := int64(0)
	no := false
	for i := 0; i < n; i++ {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: e.ns, Labels: map[string]string{"app": prefix}},
			Spec: corev1.PodSpec{
				NodeName: node, TerminationGracePeriodSeconds: &grace, AutomountServiceAccountToken: &no,
				Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
				Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}}}},
			},
		}
		if _, err := e.cs.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	err := wait.PollUntilContextTimeout(e.ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + prefix})
		if err != nil {
			return false, nil
		}
		running := 0
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n, nil
	})
	if err != nil {
		e.t.Fatalf("%d pods %s-* not Running: %v", n, prefix, err)
	}
}
