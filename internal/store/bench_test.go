package store_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/store"
)

// Benchmarks run against dynalite (in memory, one Node.js process), so they
// measure the store's request pattern, not DynamoDB's latency.

func BenchmarkCreateNodeClaim(b *testing.B) {
	e := newBenchEnv(b)
	s := e.store(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.CreateNodeClaim(e.ctx, claim(fmt.Sprintf("nc-%06d", i), "default", fmt.Sprintf("i-%06d", i))); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
}

func BenchmarkListNodeClaims1000(b *testing.B) {
	e := newBenchEnv(b)
	s := e.store(b)
	for i := range 1000 {
		nc := claim(fmt.Sprintf("nc-%04d", i), "default", fmt.Sprintf("i-%04d", i))
		if err := s.CreateNodeClaim(e.ctx, nc); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		all, err := s.ListNodeClaims(e.ctx)
		if err != nil || len(all) != 1000 {
			b.Fatalf("%d claims, %v", len(all), err)
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/list")
	b.ReportMetric(1000, "claims")
}

func BenchmarkLeaseAcquireRelease(b *testing.B) {
	e := newBenchEnv(b)
	s, err := store.New(e.api, e.table)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := s.AcquireLease(e.ctx, "provisioner", "bench", time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.ReleaseLease(e.ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}
