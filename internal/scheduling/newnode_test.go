package scheduling_test

import (
	"context"
	"math"
	"math/rand"
	"testing"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// NewNodePrices is a floor: every claim a solve plans costs at least the
// price it gives each of the claim's pods, at the claim's expected price,
// and at least each pod's price per unit times what the claim's pods
// request.
func TestNewNodePricesFloorEveryClaim(t *testing.T) {
	floored := 0
	for seed := range 300 {
		in := randomInput(rand.New(rand.NewSource(int64(seed))))
		floors, err := scheduling.NewNodePrices(in)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(floors) != len(in.Pods) {
			t.Fatalf("seed %d: %d floors for %d pods", seed, len(floors), len(in.Pods))
		}
		plan, err := scheduling.Solve(context.Background(), in)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		byName := map[string]int{}
		for i, p := range in.Pods {
			byName[p.Namespace+"/"+p.Name] = i
		}
		for _, c := range plan.NodeClaims {
			var requested [3]float64
			for _, name := range c.Pods {
				req := scheduling.PodRequests(in.Pods[byName[name]])
				requested[0] += float64(req.Cpu().MilliValue())
				requested[1] += float64(req.Memory().Value())
				requested[2]++
			}
			for _, name := range c.Pods {
				f := floors[name]
				if math.IsInf(f.Price, 1) || c.PricePerHour < f.Price-1e-9 || c.ExpectedPricePerHour < f.Price-1e-9 {
					t.Fatalf("seed %d: claim %s ($%.4f/h, expected $%.4f/h) holds %s, priced at least $%.4f/h",
						seed, c.Name, c.PricePerHour, c.ExpectedPricePerHour, name, f.Price)
				}
				for r, x := range requested {
					if c.PricePerHour < f.PerUnit[r]*x-1e-9 {
						t.Fatalf("seed %d: claim %s ($%.4f/h) holds %s and %v of %s, at least $%g each",
							seed, c.Name, c.PricePerHour, name, x, scheduling.FloorResources[r], f.PerUnit[r])
					}
				}
				if c.PricePerHour < f.Price+1e-9 {
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
			if *bound[k] != *v {
				t.Fatalf("seed %d: %s priced %v bound, %v pending", seed, k, *bound[k], *v)
			}
		}
	}
}
