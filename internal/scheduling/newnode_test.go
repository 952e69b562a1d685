package scheduling_test

import (
	"context"
	"math"
	"math/rand"
	"testing"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// NewNodePrices is a floor: every claim a solve plans costs at least the
// price it gives each of the claim's pods, at the claim's expected price.
func TestNewNodePricesFloorEveryClaim(t *testing.T) {
	floored := 0
	for seed := range 300 {
		in := randomInput(rand.New(rand.NewSource(int64(seed))))
		prices, err := scheduling.NewNodePrices(in)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(prices) != len(in.Pods) {
			t.Fatalf("seed %d: %d prices for %d pods", seed, len(prices), len(in.Pods))
		}
		plan, err := scheduling.Solve(context.Background(), in)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		for _, c := range plan.NodeClaims {
			for _, p := range c.Pods {
				floor := prices[p]
				if math.IsInf(floor, 1) || c.PricePerHour < floor-1e-9 || c.ExpectedPricePerHour < floor-1e-9 {
					t.Fatalf("seed %d: claim %s ($%.4f/h, expected $%.4f/h) holds %s, priced at least $%.4f/h",
						seed, c.Name, c.PricePerHour, c.ExpectedPricePerHour, p, floor)
				}
				if c.PricePerHour < floor+1e-9 {
					floored++
				}
			}
		}
	}
	if floored == 0 {
		t.Error("no claim costs its pods' floor: the floors are too low to be of use")
	}
}

// Bound pods (a disruption candidate's) are priced as if pending.
func TestNewNodePricesOfBoundPods(t *testing.T) {
	for seed := range 40 {
		in := randomInput(rand.New(rand.NewSource(int64(seed))))
		pending, err := scheduling.NewNodePrices(in)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range in.Pods {
			cp := *p
			cp.Spec.NodeName = "node-x"
			in.Pods[i] = &cp
		}
		bound, err := scheduling.NewNodePrices(in)
		if err != nil {
			t.Fatal(err)
		}
		if len(bound) != len(pending) {
			t.Fatalf("seed %d: %d bound pods priced, %d pending", seed, len(bound), len(pending))
		}
		for k, v := range pending {
			if bound[k] != v && !(math.IsInf(v, 1) && math.IsInf(bound[k], 1)) {
				t.Fatalf("seed %d: %s priced %v bound, %v pending", seed, k, bound[k], v)
			}
		}
	}
}
