package disruption

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/catalog"
)

// BenchmarkDecide measures one disruption decision.
//
//   - nodes=50, nodes=200: one pool of m5.2xlarge nodes, each a quarter
//     used by 4 pods: every node a consolidation candidate, so the
//     multi-node binary search runs at full length and succeeds.
//   - nodes=2000: the scale harness's shape (internal/localcloud/scaletest):
//     four pools of one instance type each, 20 pods a node kept on their
//     pool by a node selector; nodes are half used, so the multi-node
//     search runs at full length and succeeds.
//   - nodes=2000-full: the same, with the nodes filled as the harness fills
//     them (no pod fits beside another node's pods): nothing can go, and
//     the single-node search weighs every candidate (the harness's steady
//     state, the pass that took minutes).
//
// MiB-peak is the heap's peak during the decisions above the heap before
// them (after a GC): the cluster view is not counted, what Decide adds is.
// cpu-s/op is the process's user+system CPU per decision, the figure to
// read when other work shares the machine (wall time, ns/op, is not).
func BenchmarkDecide(b *testing.B) {
	sizes := []struct {
		name  string
		build func(b *testing.B) *View
		want  bool // a command is expected
	}{
		{"nodes=50", func(b *testing.B) *View { return quarterUsed(b, 50) }, true},
		{"nodes=200", func(b *testing.B) *View { return quarterUsed(b, 200) }, true},
		{"nodes=2000", func(b *testing.B) *View { return harnessShaped(b, 2000, 40) }, true},
		{"nodes=2000-full", func(b *testing.B) *View { return harnessShaped(b, 2000, 20) }, false},
	}
	for _, sz := range sizes {
		b.Run(sz.name, func(b *testing.B) {
			v := sz.build(b)
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			peak := watchPeak()
			cpu0 := processCPU(b)
			b.ResetTimer()
			var d *Decision
			for b.Loop() {
				var err error
				if d, err = Decide(ctx, v); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu := processCPU(b) - cpu0
			top := peak()
			runtime.ReadMemStats(&ms)
			if (d.Command != nil) != sz.want {
				b.Fatalf("want a command: %v, got %s", sz.want, fmtCmd(d.Command))
			}
			disrupted, saved := 0, 0.0
			if d.Command != nil {
				disrupted, saved = len(d.Command.Candidates), d.Command.Savings()
			}
			b.ReportMetric(float64(len(v.Cluster.Nodes)), "nodes")
			b.ReportMetric(float64(disrupted), "nodes-disrupted")
			b.ReportMetric(saved, "$/h-saved")
			b.ReportMetric(float64(ms.TotalAlloc-before)/float64(b.N)/(1<<20), "MiB-alloc/op")
			b.ReportMetric(top, "MiB-peak")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// quarterUsed is n m5.2xlarge nodes of the package's pool, 4 small pods each.
func quarterUsed(b testing.TB, n int) *View {
	f := newFixture(b, fixOpt{budgets: []apistest.Budget{{Nodes: "100%"}}})
	for i := range n {
		name := fmt.Sprintf("n%04d", i)
		f.node(name, "m5.2xlarge")
		for j := range 4 {
			f.pod(fmt.Sprintf("%s-p%d", name, j), name, "500m", "512Mi")
		}
	}
	return f.view()
}

// scaleTypes are the scale harness's pools' instance types, one a pool.
var scaleTypes = []string{"m5.xlarge", "c5.xlarge", "c6g.xlarge", "m5.2xlarge"}

const scalePoolLabel = "nodewright.io/scale-pool"

// harnessShaped is n nodes spread over four pools (all consolidating
// underutilized nodes, budgets 100 %), 20 pods a node, each pod 1/slots
// of its node's allocatable CPU and memory.
func harnessShaped(b testing.TB, n, slots int) *View {
	var docs []string
	for i, typ := range scaleTypes {
		name := "scale-" + strconv.Itoa(i)
		docs = append(docs, apistest.Pool{
			Name: name, Labels: map[string]string{scalePoolLabel: name},
			Requirements: []apistest.Req{
				apistest.In(catalog.LabelInstanceType, typ),
				apistest.In(catalog.LabelCapacityType, "on-demand"),
				apistest.In(catalog.LabelTopologyZone, "us-west-2a"),
			},
			ConsolidationPolicy: "WhenEmptyOrUnderutilized", ConsolidateAfter: "30s",
			Budgets: []apistest.Budget{{Nodes: "100%"}},
		}.YAML())
	}
	f := newFixture(b, fixOpt{})
	f.cfg = apistest.Load(b, apistest.Doc(append(docs, apistest.NodeClass{}.YAML())...))
	for i := range n {
		pool := i % len(scaleTypes)
		name := fmt.Sprintf("n%04d", i)
		kn, _ := f.nodeIn(name, scaleTypes[pool], "scale-"+strconv.Itoa(pool))
		cpu := resource.NewMilliQuantity(kn.Status.Allocatable.Cpu().MilliValue()/int64(slots), resource.DecimalSI)
		mem := resource.NewQuantity(kn.Status.Allocatable.Memory().Value()/int64(slots)*9/10/(1<<20)*(1<<20), resource.BinarySI)
		for j := range 20 {
			p := f.pod(fmt.Sprintf("%s-p%02d", name, j), name, cpu.String(), mem.String())
			p.Spec.NodeSelector = map[string]string{scalePoolLabel: "scale-" + strconv.Itoa(pool)}
		}
	}
	return f.view()
}

// watchPeak samples the heap's live and unswept objects every millisecond
// (runtime/metrics: no stop-the-world) from now until the returned func is
// called, which gives the peak above the heap at the start in MiB.
func watchPeak() func() float64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var top uint64
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for t := time.NewTicker(time.Millisecond); ; {
			top = max(top, read())
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return func() float64 {
		close(done)
		wg.Wait()
		top = max(top, read())
		if top < base {
			return 0
		}
		return float64(top-base) / (1 << 20)
	}
}

// processCPU is the process's user+system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
