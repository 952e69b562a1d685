package kube

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// BenchmarkPodList40k lists 40,000 bound pods (2,000 nodes, 20 each: the
// scale harness's size) through the real client from an in-process server
// that answers in one protobuf response whatever the page limit, as the
// watch cache does; "gzip" compresses it, as the API server does for large
// responses to clients that accept it (client-go's transport does and
// decompresses as it reads).
//
// MiB-peak is the live heap's peak during a list above the heap before it
// (which holds the server's encoded response); MiB-alloc what a list
// allocates; cpu-s/list the process's CPU, the in-process server's
// writing included.
func BenchmarkPodList40k(b *testing.B) {
	for _, gz := range []bool{false, true} {
		name := "protobuf"
		if gz {
			name = "protobuf-gzip"
		}
		b.Run(name, func(b *testing.B) {
			ls := newListServer(b, 2000, 20, 0)
			ls.wholeLists, ls.gzip = true, gz
			c, err := NewClient(ls.restConfig(), nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			list := func() int {
				snap, err := c.Snapshot(ctx, SnapshotOptions{Parts: PartBoundPods})
				if err != nil {
					b.Fatal(err)
				}
				pods := 0
				for _, ps := range snap.PodsByNode {
					pods += len(ps)
				}
				return pods
			}
			if n := list(); n != 40000 { // and warms the server's cache
				b.Fatalf("listed %d pods", n)
			}
			var peak, alloc uint64
			var secs, cpu float64
			b.ResetTimer()
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				start, cpuStart := time.Now(), cpuSeconds()
				stopPeak := samplePeakHeap()
				n := list()
				if p := stopPeak(); p > before.HeapAlloc {
					peak += p - before.HeapAlloc
				}
				secs += time.Since(start).Seconds()
				cpu += cpuSeconds() - cpuStart
				runtime.ReadMemStats(&after)
				alloc += after.TotalAlloc - before.TotalAlloc
				if n != 40000 {
					b.Fatalf("listed %d pods", n)
				}
			}
			b.ReportMetric(secs/float64(b.N), "s/list")
			b.ReportMetric(cpu/float64(b.N), "cpu-s/list")
			b.ReportMetric(float64(peak)/float64(b.N)/(1<<20), "MiB-peak")
			b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "MiB-alloc")
			b.ReportMetric(float64(ls.count("/api/v1/pods"))/float64(b.N+1), "requests/list")
		})
	}
}
