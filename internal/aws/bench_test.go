package aws_test

import (
	"fmt"
	"testing"
	"time"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// BenchmarkLaunchOverTheWire measures one NodeClaim launch end to end through
// the SDK and the simulator (ICE sync, adoption check, discovery from cache,
// launch template from cache, CreateFleet) with 3 instance type options.
func BenchmarkLaunchOverTheWire(b *testing.B) {
	e := newEnv(b, false)
	nc := nodeClass("al2023@latest")
	types := e.types("m5.large", "m5.xlarge", "c5.large")
	// Warm the discovery and launch template caches, as a warm function has them.
	if _, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("warm"), NodeClass: nc, InstanceTypes: types}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim(fmt.Sprintf("bench-%d", i)), NodeClass: nc, InstanceTypes: types}); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.ReportMetric(float64(b.N)/el.Seconds(), "launches/s")
	b.ReportMetric(float64(el.Milliseconds())/float64(b.N), "ms/launch")
}

// BenchmarkCatalogOverTheWire measures a cold function building its instance
// type catalog: DescribeInstanceTypes, offerings, zones, Pricing GetProducts
// and spot price history, all paginated, for the real 1,373-type data set
// when ../shared is present.
func BenchmarkCatalogOverTheWire(b *testing.B) {
	e := newEnv(b, true)
	var types int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := nwaws.New(nwaws.Options{ClusterName: testCluster, Region: testRegion, Owner: testOwner, Logger: quiet}, e.clients, nil)
		if err != nil {
			b.Fatal(err)
		}
		cat, err := p.Catalog(e.ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		types = len(cat.Types)
	}
	b.ReportMetric(float64(types), "types")
}
