package scheduling_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// heapSampler records the peak of live+unswept heap objects
// (runtime/metrics /memory/classes/heap/objects:bytes) every 500µs while a
// solve runs. That metric is read without stopping the world, so sampling
// does not distort the timing; it includes the input the solve reads, so
// the figure is the process heap a solve needs, not only what it adds.
type heapSampler struct {
	stop chan struct{}
	wg   sync.WaitGroup
	peak uint64
}

const heapMetric = "/memory/classes/heap/objects:bytes"

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{})}
	s := []metrics.Sample{{Name: heapMetric}}
	read := func() {
		metrics.Read(s)
		if v := s[0].Value.Uint64(); v > h.peak {
			h.peak = v
		}
	}
	read()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(500 * time.Microsecond)
		defer t.Stop()
		for {
			select {
			case <-h.stop:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return h
}

func (h *heapSampler) finish() float64 {
	close(h.stop)
	h.wg.Wait()
	return float64(h.peak) / (1 << 20)
}

// runSolveBench runs one solve per iteration on freshly built input and
// reports throughput, node count, cost and peak heap.
func runSolveBench(b *testing.B, mk func() *scheduling.Input) {
	var total, cpu time.Duration
	var pods int
	var last *scheduling.Plan
	var peak float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		in := mk()
		pods = len(in.Pods)
		runtime.GC()
		h := startHeapSampler()
		b.StartTimer()
		start, cpu0 := time.Now(), processCPU()
		plan, err := scheduling.Solve(context.Background(), in)
		total += time.Since(start)
		cpu += processCPU() - cpu0
		b.StopTimer()
		peak = max(peak, h.finish())
		if err != nil {
			b.Fatal(err)
		}
		last = plan
		b.StartTimer()
	}
	b.ReportMetric(float64(pods)*float64(b.N)/total.Seconds(), "pods/s")
	// Pods per second of process CPU time (all threads, GC included): the
	// throughput a quiet machine would see, whatever else shares this one.
	b.ReportMetric(float64(pods)*float64(b.N)/cpu.Seconds(), "pods/cpu-s")
	b.ReportMetric(float64(len(last.NodeClaims)), "nodes")
	b.ReportMetric(last.CostPerHour, "$/h")
	b.ReportMetric(peak, "MiB")
	b.ReportMetric(float64(len(last.Unschedulable)), "unschedulable")
}

func processCPU() time.Duration {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

func BenchmarkSolve(b *testing.B) {
	for _, n := range []int{1000, 5000, 20000} {
		b.Run(fmt.Sprintf("diverse-%d", n), func(b *testing.B) {
			runSolveBench(b, func() *scheduling.Input { return diverseInput(n) })
		})
	}
	b.Run("realistic-10000", func(b *testing.B) {
		cat := sharedCatalog(b)
		runSolveBench(b, func() *scheduling.Input { return realisticInput(b, cat, 10000) })
	})
	b.Run("ffd-diverse-5000", func(b *testing.B) {
		var ffd, solver float64
		var nodes int
		for i := 0; i < b.N; i++ {
			in := diverseInput(5000)
			ffd, nodes = ffdCost(in)
			b.StopTimer()
			plan, err := scheduling.Solve(context.Background(), diverseInput(5000))
			if err != nil {
				b.Fatal(err)
			}
			solver = plan.CostPerHour
			b.StartTimer()
		}
		b.ReportMetric(ffd, "$/h")
		b.ReportMetric(float64(nodes), "nodes")
		b.ReportMetric(solver, "solver-$/h")
		b.ReportMetric(solver/ffd, "solver/ffd")
	})
}

// repoRoot walks up to go.mod.
func repoRoot(tb testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("go.mod not found")
		}
		dir = parent
	}
}

var (
	catOnce sync.Once
	catVal  *catalog.Catalog
	catErr  error
)

func sharedCatalog(tb testing.TB) *catalog.Catalog {
	dir := filepath.Join(repoRoot(tb), "..", "shared", "aws-data")
	if _, err := os.Stat(filepath.Join(dir, "instance-types.json.gz")); err != nil {
		tb.Skipf("shared aws-data not present at %s", dir)
	}
	catOnce.Do(func() { catVal, catErr = catalog.LoadDir(dir, "us-east-1") })
	if catErr != nil {
		tb.Fatal(catErr)
	}
	return catVal
}

// realisticInput is a mixed workload on the real catalog: web deployments
// spread across zones and hosts, batch jobs without constraints, and
// memory-heavy services pinned to amd64 with one replica per host, plus two
// DaemonSets; one general-purpose NodePool over c/m/r generation > 4.
func realisticInput(tb testing.TB, cat *catalog.Catalog, n int) *scheduling.Input {
	its, err := scheduling.InstanceTypesFromCatalog(cat, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	pool := &scheduling.NodePool{Name: "general", Requirements: scheduling.NewRequirements(
		scheduling.MustRequirement("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"),
		scheduling.MustRequirement("karpenter.k8s.aws/instance-generation", corev1.NodeSelectorOpGt, "4"),
		scheduling.MustRequirement(scheduling.LabelCapacityType, corev1.NodeSelectorOpIn, "spot", "on-demand"),
	)}
	r := rand.New(rand.NewSource(7))
	var pods []*corev1.Pod
	seq := 0
	add := func(app string, o podOpts) {
		o.name = fmt.Sprintf("%s-%d", app, seq)
		o.seq = seq
		seq++
		pods = append(pods, mkPod(o))
	}
	for len(pods) < n {
		switch k := r.Intn(10); {
		case k < 5: // web: 20 deployments
			app := fmt.Sprintf("web-%d", r.Intn(20))
			l := map[string]string{"app": app}
			add(app, podOpts{labels: l, cpu: []string{"250m", "500m", "1"}[len(app)%3], mem: []string{"512Mi", "1Gi", "2Gi"}[len(app)%3],
				spread: []corev1.TopologySpreadConstraint{
					{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: l}},
					{MaxSkew: 2, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: l}},
				}})
		case k < 8: // batch
			app := fmt.Sprintf("batch-%d", r.Intn(10))
			add(app, podOpts{labels: map[string]string{"app": app}, cpu: []string{"1", "2", "4"}[r.Intn(3)], mem: []string{"2Gi", "4Gi", "8Gi"}[r.Intn(3)]})
		default: // memory-heavy
			app := fmt.Sprintf("cache-%d", r.Intn(5))
			l := map[string]string{"app": app}
			add(app, podOpts{labels: l, cpu: "2", mem: "14Gi", nodeSelector: map[string]string{corev1.LabelArchStable: "amd64"},
				affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: corev1.LabelHostname}}}}})
		}
	}
	ds := func(name, cpu, mem string) *appsv1.DaemonSet {
		p := mkPod(podOpts{name: name, cpu: cpu, mem: mem})
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: p.Spec}}}
	}
	return &scheduling.Input{
		Pods:          pods,
		NodePools:     []*scheduling.NodePool{pool},
		InstanceTypes: map[string][]*scheduling.InstanceType{"general": its},
		DaemonSets:    []*appsv1.DaemonSet{ds("aws-node", "25m", "64Mi"), ds("log-agent", "100m", "200Mi")},
	}
}

// ffdCost is the baseline the solver must never lose to: plain first-fit
// decreasing (CPU, then memory, then creation) into bins as large as the
// largest instance type, honouring the diverse workload's constraints
// (single-key matchLabels selectors; zone and hostname topology), and then
// each bin launched as the cheapest type that fits it in its zone.
func ffdCost(in *scheduling.Input) (float64, int) {
	types := append([]*scheduling.InstanceType(nil), in.DefaultInstanceTypes...)
	type caps struct{ cpu, mem, pods int64 }
	capOf := func(it *scheduling.InstanceType) caps {
		return caps{it.Allocatable.Cpu().MilliValue(), it.Allocatable.Memory().Value(), it.Allocatable.Pods().Value()}
	}
	price := func(it *scheduling.InstanceType, zone string) (float64, bool) {
		best, ok := 0.0, false
		for _, o := range it.Offerings {
			if o.Zone == zone && o.Available && (!ok || o.Price < best) {
				best, ok = o.Price, true
			}
		}
		return best, ok
	}
	var maxCap caps
	zonesSet := map[string]bool{}
	for _, it := range types {
		c := capOf(it)
		maxCap.cpu, maxCap.mem, maxCap.pods = max(maxCap.cpu, c.cpu), max(maxCap.mem, c.mem), max(maxCap.pods, c.pods)
		for _, o := range it.Offerings {
			zonesSet[o.Zone] = true
		}
	}
	var zones []string
	for z := range zonesSet {
		zones = append(zones, z)
	}
	sort.Strings(zones)
	pods := append([]*corev1.Pod(nil), in.Pods...)
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := scheduling.PodRequests(pods[i]), scheduling.PodRequests(pods[j])
		if c := a.Cpu().Cmp(*b.Cpu()); c != 0 {
			return c > 0
		}
		if c := a.Memory().Cmp(*b.Memory()); c != 0 {
			return c > 0
		}
		return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp)
	})
	type bin struct {
		zone        string
		cpu, mem, n int64
		labels      map[string]int // "k=v" of pods inside
		antiOwners  map[string]int // "k=v" selectors of anti-affinity owners inside
	}
	kvs := func(m map[string]string) []string {
		var out []string
		for k, v := range m {
			out = append(out, k+"="+v)
		}
		return out
	}
	one := func(s *metav1.LabelSelector) string {
		for k, v := range s.MatchLabels {
			return k + "=" + v
		}
		return ""
	}
	zoneCounts := map[string]map[string]int{}
	var bins []*bin
	for _, p := range pods {
		req := scheduling.PodRequests(p)
		cpu, mem := req.Cpu().MilliValue(), req.Memory().Value()
		own := map[string]bool{}
		for _, kv := range kvs(p.Labels) {
			own[kv] = true
		}
		zoneOK := func(z string) bool {
			for _, c := range p.Spec.TopologySpreadConstraints {
				if c.TopologyKey != corev1.LabelTopologyZone {
					continue
				}
				sel := one(c.LabelSelector)
				minC := -1
				for _, zz := range zones {
					if v := zoneCounts[sel][zz]; minC < 0 || v < minC {
						minC = v
					}
				}
				inc := 0
				if own[sel] {
					inc = 1
				}
				if zoneCounts[sel][z]+inc-minC > int(c.MaxSkew) {
					return false
				}
			}
			if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil {
				for _, t := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					if t.TopologyKey != corev1.LabelTopologyZone {
						continue
					}
					sel := one(t.LabelSelector)
					any := false
					for _, zz := range zones {
						if zoneCounts[sel][zz] > 0 {
							any = true
						}
					}
					if any && zoneCounts[sel][z] == 0 {
						return false
					}
				}
			}
			return true
		}
		hostOK := func(b *bin) bool {
			for kv := range own {
				if b.antiOwners[kv] > 0 {
					return false
				}
			}
			for _, c := range p.Spec.TopologySpreadConstraints {
				if c.TopologyKey == corev1.LabelHostname {
					inc := 0
					if own[one(c.LabelSelector)] {
						inc = 1
					}
					if b.labels[one(c.LabelSelector)]+inc > int(c.MaxSkew) {
						return false
					}
				}
			}
			if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
				for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					if b.labels[one(t.LabelSelector)] > 0 {
						return false
					}
				}
			}
			return true
		}
		var target *bin
		for _, b := range bins {
			if b.cpu+cpu <= maxCap.cpu && b.mem+mem <= maxCap.mem && b.n+1 <= maxCap.pods && zoneOK(b.zone) && hostOK(b) {
				target = b
				break
			}
		}
		if target == nil {
			target = &bin{labels: map[string]int{}, antiOwners: map[string]int{}}
			for _, z := range zones {
				if zoneOK(z) {
					target.zone = z
					break
				}
			}
			bins = append(bins, target)
		}
		target.cpu += cpu
		target.mem += mem
		target.n++
		for kv := range own {
			target.labels[kv]++
			if zoneCounts[kv] == nil {
				zoneCounts[kv] = map[string]int{}
			}
			zoneCounts[kv][target.zone]++
		}
		if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				target.antiOwners[one(t.LabelSelector)]++
			}
		}
	}
	total := 0.0
	for _, b := range bins {
		best := -1.0
		for _, it := range types {
			c := capOf(it)
			if c.cpu < b.cpu || c.mem < b.mem || c.pods < b.n {
				continue
			}
			if pr, ok := price(it, b.zone); ok && (best < 0 || pr < best) {
				best = pr
			}
		}
		total += best
	}
	return total, len(bins)
}

func TestSolverNotWorseThanFFD(t *testing.T) {
	for _, n := range []int{1000, 5000} {
		in := diverseInput(n)
		ffd, ffdNodes := ffdCost(in)
		plan, err := scheduling.Solve(context.Background(), diverseInput(n))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("diverse-%d: solver $%.2f/h on %d nodes, FFD $%.2f/h on %d bins (ratio %.3f)", n, plan.CostPerHour, len(plan.NodeClaims), ffd, ffdNodes, plan.CostPerHour/ffd)
		if plan.CostPerHour > ffd+1e-6 {
			t.Errorf("diverse-%d: solver $%.2f/h is worse than first-fit-decreasing $%.2f/h", n, plan.CostPerHour, ffd)
		}
	}
}
