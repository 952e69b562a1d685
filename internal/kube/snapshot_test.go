package kube

import (
	"context"
	"maps"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestSnapshotPaginatesFiltersAndStrips(t *testing.T) {
	ls := newListServer(t, 30, 7, 11)
	c, err := NewClient(ls.restConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(context.Background(), SnapshotOptions{PageSize: 20})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) != 30 {
		t.Fatalf("%d nodes", len(snap.Nodes))
	}
	// 11 pending, the even ones Unschedulable.
	if len(snap.PendingPods) != 6 || snap.OtherPendingPods != 5 {
		t.Fatalf("pending %d, other %d", len(snap.PendingPods), snap.OtherPendingPods)
	}
	for i := 1; i < len(snap.PendingPods); i++ {
		if podKey(snap.PendingPods[i-1]) >= podKey(snap.PendingPods[i]) {
			t.Fatal("pending pods not sorted")
		}
	}
	total := 0
	for node, pods := range snap.PodsByNode {
		if len(pods) != 7 {
			t.Fatalf("node %s has %d pods", node, len(pods))
		}
		total += len(pods)
		for _, p := range pods {
			if p.Spec.NodeName != node {
				t.Fatalf("pod %s filed under %s", p.Spec.NodeName, node)
			}
		}
	}
	if total != 210 {
		t.Fatalf("%d bound pods", total)
	}
	// 210 bound pods at 20 per page: 11 requests, plus 1 for pending.
	if n := ls.count("/api/v1/pods"); n != 12 {
		t.Fatalf("%d pod list requests, want 12", n)
	}
	p := snap.PodsByNode[snap.Nodes[0].Name][0]
	if p.ManagedFields != nil || p.Annotations[corev1.LastAppliedConfigAnnotation] != "" || p.Spec.Containers[0].Env != nil ||
		p.Spec.Containers[0].LivenessProbe != nil || p.Status.ContainerStatuses != nil {
		t.Fatal("pod not stripped")
	}
	if p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 250 || len(p.OwnerReferences) != 1 || len(p.Spec.Tolerations) != 1 {
		t.Fatal("stripping removed scheduling fields")
	}
	if snap.Nodes[0].Status.Images != nil || snap.Nodes[0].Status.Allocatable.Cpu().MilliValue() != 3920 {
		t.Fatal("node not stripped correctly")
	}
	if snap.NamespaceLabels["ns-0"]["team"] != "a" {
		t.Fatalf("namespace labels %v", snap.NamespaceLabels)
	}
	only, err := c.Snapshot(context.Background(), SnapshotOptions{Parts: PartNodes})
	if err != nil {
		t.Fatal(err)
	}
	if len(only.Nodes) != 30 || only.PodsByNode != nil || only.PendingPods != nil {
		t.Fatal("Parts not honoured")
	}
}

// With client-go's fake clientset (other packages' unit tests) the snapshot
// falls back to typed lists. The fake ignores field selectors, so only the
// plumbing is checked here.
func TestSnapshotWithFakeClientset(t *testing.T) {
	cs := fake.NewClientset(synthNode("n1"), synthPod("ns-1", "p1", "n1", true))
	snap, err := NewClientFromClientset(cs, nil).Snapshot(context.Background(), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) != 1 || len(snap.PodsByNode["n1"]) != 1 {
		t.Fatalf("nodes %d, pods on n1 %d", len(snap.Nodes), len(snap.PodsByNode["n1"]))
	}
}

// An expired continue token (410) restarts the list instead of failing the
// pass or returning a partial list.
func TestSnapshotRestartsExpiredList(t *testing.T) {
	ls := newListServer(t, 10, 3, 0)
	ls.expireContinue = 1
	c, err := NewClient(ls.restConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.Snapshot(context.Background(), SnapshotOptions{Parts: PartNodes, PageSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) != 10 {
		t.Fatalf("%d nodes after a restarted list, want 10", len(snap.Nodes))
	}
	ls.expireContinue = 5
	if _, err := c.Snapshot(context.Background(), SnapshotOptions{Parts: PartNodes, PageSize: 4}); err == nil {
		t.Fatal("a list that keeps expiring must fail, not loop")
	}
}

// A cached snapshot reads its first pages from the watch cache
// (resourceVersion=0) and continues them with the token alone: the API
// server refuses a resourceVersion beside a continue token. An uncached one
// never names a version (a quorum read).
func TestCachedSnapshotContinuesWithoutAVersion(t *testing.T) {
	ls := newListServer(t, 10, 3, 0)
	c, err := NewClient(ls.restConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cached := range []bool{true, false} {
		ls.versions = nil
		snap, err := c.Snapshot(context.Background(), SnapshotOptions{Parts: PartNodes | PartBoundPods, PageSize: 4, Cached: cached})
		if err != nil {
			t.Fatal(err)
		}
		if len(snap.Nodes) != 10 || len(snap.PodsByNode) != 10 {
			t.Fatalf("cached=%v: %d nodes, pods on %d nodes, want 10 and 10", cached, len(snap.Nodes), len(snap.PodsByNode))
		}
		counts := map[string]int{}
		for _, v := range ls.versions {
			counts[v]++
		}
		// Nodes: 3 pages of 4; bound pods: 8 pages of 4 (30 pods); a
		// cached snapshot first asks for the pods' table, which this
		// server does not serve (podreuse.go lists them whole then).
		want := map[string]int{"": 2, "+continue": 9}
		if cached {
			want = map[string]int{"0": 3, "+continue": 9}
		}
		if !maps.Equal(counts, want) {
			t.Fatalf("cached=%v: requests by version %v, want %v", cached, counts, want)
		}
	}
}

// BenchmarkSnapshot5kNodes50kPods lists a synthetic 5,000-node cluster with
// 45,000 bound and 5,000 pending pods (2,500 unschedulable) over HTTP (JSON;
// the real API server would send protobuf, cheaper to decode) and reports the
// seconds per snapshot and the MiB the snapshot keeps alive.
func BenchmarkSnapshot5kNodes50kPods(b *testing.B) {
	ls := newListServer(b, 5000, 9, 5000)
	c, err := NewClient(ls.restConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	// Warm the server's page cache so the loop measures the client.
	if _, err := c.Snapshot(ctx, SnapshotOptions{}); err != nil {
		b.Fatal(err)
	}
	var retained, peak uint64
	var secs, cpu float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start, cpuStart := time.Now(), cpuSeconds()
		stopPeak := samplePeakHeap()
		snap, err := c.Snapshot(ctx, SnapshotOptions{})
		if p := stopPeak(); p > before.HeapAlloc {
			peak += p - before.HeapAlloc
		}
		if err != nil {
			b.Fatal(err)
		}
		secs += time.Since(start).Seconds()
		cpu += cpuSeconds() - cpuStart
		runtime.GC()
		runtime.ReadMemStats(&after)
		if after.HeapAlloc > before.HeapAlloc {
			retained += after.HeapAlloc - before.HeapAlloc
		}
		pods := len(snap.PendingPods) + snap.OtherPendingPods
		for _, ps := range snap.PodsByNode {
			pods += len(ps)
		}
		if len(snap.Nodes) != 5000 || pods != 50000 {
			b.Fatalf("snapshot has %d nodes, %d pods", len(snap.Nodes), pods)
		}
		runtime.KeepAlive(snap)
	}
	b.ReportMetric(secs/float64(b.N), "s/snapshot")
	// CPU seconds (client decoding plus the in-process server writing cached
	// pages) are steadier than wall time on a shared machine.
	b.ReportMetric(cpu/float64(b.N), "cpu-s/snapshot")
	b.ReportMetric(float64(retained)/float64(b.N)/(1<<20), "MiB-retained")
	b.ReportMetric(float64(peak)/float64(b.N)/(1<<20), "MiB-peak")
	b.ReportMetric(50000, "pods")
	b.ReportMetric(5000, "nodes")
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// samplePeakHeap samples live heap bytes every 2 ms until the returned
// function is called, which returns the highest sample.
func samplePeakHeap() func() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	done := make(chan struct{})
	result := make(chan uint64)
	go func() {
		var peak uint64
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				result <- peak
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-result }
}
