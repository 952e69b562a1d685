package provisioning_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/provisioning"
)

// BenchmarkBurstToCreateFleet measures the provisioner's share of the
// issue's latency target: a burst of 100 pods is created (10 writers in
// parallel); when the scheduler marks the first one Unschedulable (the
// moment the admission webhook is called and nudges), a run starts with the
// default 1 s idle window. Reported: the time from that first Unschedulable
// to the first CreateFleet request in the simulator's call log and to the
// end of the run, how long the burst took to create, and the pods the run
// planned for (all 100 when the window caught the whole burst).
func BenchmarkBurstToCreateFleet(b *testing.B) {
	ps := poolSpec{types: `["m5.large", "m5.xlarge", "m5.2xlarge"]`}
	h := newHarness(b, ps)
	base := h.pool
	var toFleet, toDone, burstTook, batch, planned float64
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		h.freshPool(fmt.Sprintf("%s-%d", base, i), ps)
		d := h.deps(nil)
		d.Settings.BatchIdle, d.Settings.BatchMax = time.Second, 10*time.Second
		p, err := provisioning.New(d)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()

		burstStart := time.Now()
		burstDone := make(chan struct{})
		go func() {
			defer close(burstDone)
			h.burst(h.pool, 100, "250m", 10)
			burstTook += time.Since(burstStart).Seconds() * 1000
		}()
		start := h.firstUnschedulable(h.pool)
		res, err := p.Run(h.ctx, provisioning.Trigger{Source: provisioning.TriggerNudge, Nudges: []time.Time{start}})
		if err != nil {
			b.Fatal(err)
		}
		end := time.Since(start)
		<-burstDone

		b.StopTimer()
		calls := h.fleetCalls(true)
		if len(calls) == 0 {
			b.Fatalf("no CreateFleet (claims %d, result %+v)", len(h.claims()), res)
		}
		first := calls[0].Time
		for _, c := range calls {
			if c.Time.Before(first) {
				first = c.Time
			}
		}
		toFleet += first.Sub(start).Seconds() * 1000
		toDone += end.Seconds() * 1000
		batch += res.Batch.Seconds() * 1000
		planned += float64(res.Nominated)
		h.terminateAll()
		h.deletePods(h.pool)
		b.StartTimer()
	}
	b.ReportMetric(toFleet/float64(i), "ms-to-CreateFleet")
	b.ReportMetric(toDone/float64(i), "ms-to-run-end")
	b.ReportMetric(burstTook/float64(i), "ms-burst")
	b.ReportMetric(batch/float64(i), "ms-batching")
	b.ReportMetric(planned/float64(i), "pods-nominated")
	// What the provisioner adds after the window closes (lease and KV reads
	// before the window are included): snapshot, solve, claim writes, launch.
	b.ReportMetric((toFleet-batch)/float64(i), "ms-window-to-CreateFleet")
}

// firstUnschedulable polls until a pod of the app is marked Unschedulable
// and returns when it saw it.
func (h *harness) firstUnschedulable(app string) time.Time {
	h.t.Helper()
	for {
		list, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).List(h.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			h.t.Fatal(err)
		}
		for _, p := range list.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					return time.Now()
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// burst creates n pods with `writers` concurrent writers, without waiting.
func (h *harness) burst(prefix string, n int, cpu string, writers int) {
	h.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range writers {
		wg.Go(func() {
			for i := range next {
				if _, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).Create(h.ctx, h.pod(prefix, i, cpu), metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Fatal(err)
	}
}
