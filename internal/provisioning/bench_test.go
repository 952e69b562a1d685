package provisioning

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
)

// BenchmarkProvisionerRun measures one whole provisioner run — batching,
// state build, solve, claim writes, launches, launch records and events —
// for 1,000 and 10,000 pending pods on a 500-node cluster, with an
// in-memory store, a snapshot held in memory and a launcher stub (no
// network), so the figures are the provisioner's own cost. It reports the
// run time (ms), the peak Go heap during the run (MiB; the snapshot
// included, as a Lambda holds it), the bytes allocated per run (MiB) and
// the claims created.
func BenchmarkProvisionerRun(b *testing.B) {
	for _, bc := range []struct {
		pending int
		pool    string
		broad   bool
	}{{1000, "12types", false}, {10000, "12types", false}, {1000, "cmr-gen6+", true}, {10000, "cmr-gen6+", true}} {
		pending := bc.pending
		b.Run(fmt.Sprintf("pods=%d/nodes=500/pool=%s", pending, bc.pool), func(b *testing.B) {
			cfg := testConfig(b, poolOpts{types: []string{"m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge", "c5.large", "c5.xlarge", "c5.2xlarge", "c5.4xlarge", "r5.large", "r5.xlarge", "r5.2xlarge", "r5.4xlarge"}, ct: []string{"spot", "on-demand"}, broad: bc.broad})
			cat := testCatalog(b)
			snap := benchSnapshot(b, cat, 500, pending)
			var peak, allocMiB, claims, total float64
			for b.Loop() {
				b.StopTimer()
				clock := &fakeClock{t: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
				st := newMemStore(clock.Now)
				cl := &fakeCluster{snap: *snap}
				p, err := New(Deps{
					Store: st, Cluster: cl, Launcher: newFakeLauncher(cat),
					Catalog: func(context.Context) (*catalog.Catalog, error) { return cat, nil },
					Config:  cfg, Now: clock.Now, Sleep: clock.Sleep,
				})
				if err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				stop := samplePeakHeap()
				b.StartTimer()

				start := time.Now()
				res, err := p.Run(context.Background(), Trigger{Source: TriggerSchedule})
				took := time.Since(start)

				b.StopTimer()
				peakHeap := stop()
				var after runtime.MemStats
				runtime.ReadMemStats(&after)
				if err != nil {
					b.Fatal(err)
				}
				if res.Pending != pending || len(res.Launched) == 0 {
					b.Fatalf("run: %+v", res)
				}
				total += float64(took.Milliseconds())
				peak = max(peak, float64(peakHeap)/(1<<20))
				allocMiB += float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
				claims = float64(len(res.Created))
				b.StartTimer()
			}
			b.ReportMetric(total/float64(b.N), "ms/run")
			b.ReportMetric(peak, "peak-heap-MiB")
			b.ReportMetric(allocMiB/float64(b.N), "alloc-MiB/run")
			b.ReportMetric(claims, "claims")
			b.ReportMetric(float64(pending)/(total/float64(b.N)/1000), "pods/s")
		})
	}
}

// samplePeakHeap samples the live heap every millisecond until the returned
// func is called, which returns the highest value seen.
func samplePeakHeap() func() uint64 {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak.Load()
	}
}

// benchSnapshot is a cluster of nodes (m5.2xlarge, mostly full with 14 bound
// pods each) and pending pods drawn like Karpenter's scheduling benchmark
// (CPU from {100m, 250m, 500m, 1, 1.5}, memory from {100Mi .. 4Gi}), a fifth
// of them spread across zones.
func benchSnapshot(b *testing.B, cat *catalog.Catalog, nodes, pending int) *kube.Snapshot {
	b.Helper()
	it, ok := cat.Get("m5.2xlarge")
	if !ok {
		b.Fatal("no m5.2xlarge")
	}
	alloc, err := it.Allocatable(catalog.OptionsForNodeClass(nil))
	if err != nil {
		b.Fatal(err)
	}
	s := &kube.Snapshot{PodsByNode: map[string][]*corev1.Pod{}, TakenAt: time.Now()}
	zones := []string{"us-west-2a", "us-west-2b"}
	for i := range nodes {
		name := fmt.Sprintf("ip-10-0-%d-%d", i/250, i%250)
		zone := zones[i%len(zones)]
		off, _ := it.Offering(zone, "on-demand")
		labels := it.NodeLabels(off)
		labels[apis.NodePoolLabelKey] = "default"
		labels[catalog.LabelHostname] = name
		labels["team"] = "web"
		s.Nodes = append(s.Nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.NodeSpec{ProviderID: "aws:///" + zone + "/i-" + name},
			Status: corev1.NodeStatus{Allocatable: alloc, Capacity: it.Capacity(catalog.OptionsForNodeClass(nil)),
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
		})
		for j := range 14 {
			p := benchPod(fmt.Sprintf("bound-%d-%d", i, j), "500m", "1Gi")
			p.Spec.NodeName = name
			p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
			s.PodsByNode[name] = append(s.PodsByNode[name], p)
		}
	}
	rng := rand.New(rand.NewPCG(42, 42))
	cpus := []string{"100m", "250m", "500m", "1", "1500m"}
	mems := []string{"100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"}
	for i := range pending {
		p := benchPod(fmt.Sprintf("pending-%d", i), cpus[rng.IntN(len(cpus))], mems[rng.IntN(len(mems))])
		if i%5 == 0 {
			p.Labels = map[string]string{"app": "spread"}
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: catalog.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}},
			}}
		}
		s.PendingPods = append(s.PendingPods, p)
	}
	return s
}

func benchPod(name, cpu, mem string) *corev1.Pod {
	p := pod(name, cpu, mem)
	p.Namespace = "bench"
	return p
}
