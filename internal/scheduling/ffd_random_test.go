package scheduling_test

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// genericFFD is first-fit decreasing for workloads without topology: a pod
// joins the first bin some instance type can still hold it in, and each bin
// then launches as the cheapest type (any offering) that fits it.
func genericFFD(in *scheduling.Input) float64 {
	type caps struct{ cpu, mem, pods int64 }
	capOf := func(it *scheduling.InstanceType) caps {
		return caps{it.Allocatable.Cpu().MilliValue(), it.Allocatable.Memory().Value(), it.Allocatable.Pods().Value()}
	}
	cheapest := func(it *scheduling.InstanceType) float64 {
		best := -1.0
		for _, o := range it.Offerings {
			if o.Available && (best < 0 || o.Price < best) {
				best = o.Price
			}
		}
		return best
	}
	pods := append([]*corev1.Pod(nil), in.Pods...)
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := scheduling.PodRequests(pods[i]), scheduling.PodRequests(pods[j])
		if c := a.Cpu().Cmp(*b.Cpu()); c != 0 {
			return c > 0
		}
		return a.Memory().Cmp(*b.Memory()) > 0
	})
	var bins []caps
	fits := func(b caps) bool {
		for _, it := range in.DefaultInstanceTypes {
			c := capOf(it)
			if b.cpu <= c.cpu && b.mem <= c.mem && b.pods <= c.pods {
				return true
			}
		}
		return false
	}
	for _, p := range pods {
		r := scheduling.PodRequests(p)
		add := caps{r.Cpu().MilliValue(), r.Memory().Value(), 1}
		placed := false
		for i := range bins {
			nb := caps{bins[i].cpu + add.cpu, bins[i].mem + add.mem, bins[i].pods + 1}
			if fits(nb) {
				bins[i], placed = nb, true
				break
			}
		}
		if !placed {
			bins = append(bins, add)
		}
	}
	total := 0.0
	for _, b := range bins {
		best := -1.0
		for _, it := range in.DefaultInstanceTypes {
			c := capOf(it)
			if b.cpu <= c.cpu && b.mem <= c.mem && b.pods <= c.pods {
				if p := cheapest(it); p >= 0 && (best < 0 || p < best) {
					best = p
				}
			}
		}
		total += best
	}
	return total
}

// On random plain workloads over catalogs with mixed CPU:memory ratios and
// uneven prices, the solver must never cost more than FFD.
func TestNotWorseThanFFDOnRandomCatalogs(t *testing.T) {
	worse := 0
	var sumRatio float64
	runs := 2000 // infra/README.md's figure
	if testing.Short() {
		runs = 200
	}
	for seed := 0; seed < runs; seed++ {
		r := rand.New(rand.NewSource(int64(seed)))
		var types []*scheduling.InstanceType
		for i, n := 0, 4+r.Intn(12); i < n; i++ {
			cpu := []int{2, 4, 8, 16, 32, 48}[r.Intn(6)]
			mem := cpu * []int{2, 4, 8}[r.Intn(3)]
			price := (float64(cpu)*0.035 + float64(mem)*0.0045) * (0.8 + 0.4*r.Float64())
			types = append(types, mkType(fmt.Sprintf("t%d", i), cpu, mem, 110, "amd64", price, od("zone-a", price)))
		}
		in := &scheduling.Input{NodePools: []*scheduling.NodePool{{Name: "default"}}, DefaultInstanceTypes: types}
		for i, n := 0, 20+r.Intn(300); i < n; i++ {
			in.Pods = append(in.Pods, mkPod(podOpts{name: fmt.Sprintf("p%d", i), seq: i,
				cpu: []string{"100m", "250m", "500m", "1", "2", "3"}[r.Intn(6)], mem: []string{"128Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi"}[r.Intn(6)]}))
		}
		plan, err := scheduling.Solve(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Unschedulable) > 0 {
			continue // a pod too big for every type; FFD would not price it either
		}
		if plan.CostPerHour < plan.LowerBoundPerHour-1e-9 {
			t.Errorf("seed %d: plan $%.4f/h below its lower bound $%.4f/h", seed, plan.CostPerHour, plan.LowerBoundPerHour)
		}
		ffd := genericFFD(in)
		sumRatio += plan.CostPerHour / ffd
		if plan.CostPerHour > ffd+1e-9 {
			worse++
			t.Errorf("seed %d: solver $%.4f/h > FFD $%.4f/h", seed, plan.CostPerHour, ffd)
		}
	}
	t.Logf("mean solver/FFD cost ratio %.3f over %d catalogs, %d worse", sumRatio/float64(runs), runs, worse)
}
