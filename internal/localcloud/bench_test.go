package localcloud_test

import (
	"context"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud"
)

// BenchmarkStart measures how long a full local cloud (simulator, control
// plane, dynalite) takes to become usable with a warm cache; the target is
// under 10 s. Run it alone:
//
//	go test -run '^$' -bench Start -benchtime 3x ./internal/localcloud/
func BenchmarkStart(b *testing.B) {
	localcloud.SkipIfShort(b)
	ctx := context.Background()
	// Make sure binaries and npm packages are in the cache before timing.
	warm, err := localcloud.Start(ctx, localcloud.Options{})
	if err != nil {
		b.Fatal(err)
	}
	warm.Close()

	var total, plane, dyn time.Duration
	n := 0
	for b.Loop() {
		c, err := localcloud.Start(ctx, localcloud.Options{})
		if err != nil {
			b.Fatal(err)
		}
		total += c.StartupTimes["total"]
		plane += c.StartupTimes["controlplane"]
		dyn += c.StartupTimes["dynalite"]
		n++
		b.StopTimer()
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(total.Seconds()/float64(n), "s/start")
	b.ReportMetric(plane.Seconds()/float64(n), "s/controlplane")
	b.ReportMetric(dyn.Seconds()/float64(n), "s/dynalite")
}
