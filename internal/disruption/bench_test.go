package disruption

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/nodewright/nodewright/internal/apis/apistest"
)

// BenchmarkDecide measures one disruption decision over a cluster of
// underutilized nodes (every node a consolidation candidate, so the
// multi-node binary search runs at full length).
func BenchmarkDecide(b *testing.B) {
	for _, nodes := range []int{50, 200} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			f := newFixture(b, fixOpt{budgets: []apistest.Budget{{Nodes: "100%"}}})
			for i := range nodes {
				n := fmt.Sprintf("n%04d", i)
				f.node(n, "m5.2xlarge")
				for j := range 4 {
					f.pod(fmt.Sprintf("%s-p%d", n, j), n, "500m", "512Mi")
				}
			}
			v := f.view()
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			b.ResetTimer()
			var d *Decision
			for b.Loop() {
				var err error
				if d, err = Decide(ctx, v); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms)
			if d.Command == nil {
				b.Fatal("no decision")
			}
			b.ReportMetric(float64(nodes), "nodes")
			b.ReportMetric(float64(len(d.Command.Candidates)), "nodes-disrupted")
			b.ReportMetric(d.Command.Savings(), "$/h-saved")
			b.ReportMetric(float64(ms.TotalAlloc-before)/float64(b.N)/(1<<20), "MiB-alloc/op")
		})
	}
}
