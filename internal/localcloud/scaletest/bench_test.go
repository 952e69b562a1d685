package scaletest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkClusterScale measures each function's scheduled pass on a
// seeded cluster, one sub-benchmark per function and size:
//
//	lifecycle/200-nodes, disruption/200-nodes: a pass over the steady state;
//	steady/200-nodes: one pass of each of the three schedules (a minute of
//	  steady state at the stack's default one-minute rates: the
//	  provisioner finds nothing pending);
//	steady-fulllists/200-nodes: the same with every list whole and fresh
//	  (kube.Client.FullLists), as before cached snapshots;
//	provisioner/200-nodes: the pass that places the pending burst (its
//	  launches are undone between iterations).
//
// Each reports s/pass, cpu-s/pass, MiB-peak (the heap the pass adds),
// apiserver-requests/pass and apiserver-bytes/pass (the local
// kube-apiserver's own /metrics), dynamodb-calls/pass and sqs-calls/pass
// (counted at the wire). The seeded cluster is built once per size (about
// three minutes at 200 nodes, twenty at 2,000 on two cores). Sizes come from
// NODEWRIGHT_SCALE_NODES (comma-separated node counts, default 200);
// NODEWRIGHT_SCALE_FULL=1 means 200,2000. Run with a fixed count:
//
//	go test -run '^$' -bench ClusterScale -benchtime 3x -timeout 90m ./internal/localcloud/scaletest
//
// With -benchtime 1x a sub-benchmark's one pass is its function's first
// in the process, so the disruption pass's clients are cold (it lists
// whole pods). With Nx for N > 1, Go runs one pass first and then reports
// N more: a warm function's, which is what a function its schedule
// invokes every minute is (Lambda keeps the process between
// invocations); the first pass's cost is in the log ("1 passes"). The
// lifecycle's client is warm either way: New ends with one of its passes.
func BenchmarkClusterScale(b *testing.B) {
	for _, s := range benchShapes(b) {
		c := New(b, shared, s)
		b.Run("lifecycle/"+s.Name(), func(b *testing.B) { benchPass(b, c, Lifecycle) })
		b.Run("disruption/"+s.Name(), func(b *testing.B) { benchPass(b, c, Disruption) })
		b.Run("steady/"+s.Name(), func(b *testing.B) { benchSteady(b, c) })
		// The same minute with every snapshot listed whole and fresh, as
		// before cached snapshots: the figure the steady state is
		// measured against.
		b.Run("steady-fulllists/"+s.Name(), func(b *testing.B) {
			c.FullLists(true)
			defer c.FullLists(false)
			benchSteady(b, c)
		})
		b.Run("provisioner/"+s.Name(), func(b *testing.B) { benchBurst(b, c, c.Shape.Pending) })
		for _, n := range extraBursts(b) {
			b.Run(fmt.Sprintf("provisioner/%s-%d-pending", s.Name(), n), func(b *testing.B) { benchBurst(b, c, n) })
		}
	}
}

// extraBursts are the further burst sizes NODEWRIGHT_SCALE_PENDING asks
// the provisioner to place on each size (comma-separated pod counts; none
// by default): 5000 places the full size's burst on the smaller cluster.
func extraBursts(b *testing.B) []int {
	var out []int
	for f := range strings.SplitSeq(os.Getenv("NODEWRIGHT_SCALE_PENDING"), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			b.Fatalf("NODEWRIGHT_SCALE_PENDING: %q is not a pod count", f)
		}
		out = append(out, n)
	}
	return out
}

// benchShapes are the sizes NODEWRIGHT_SCALE_NODES and NODEWRIGHT_SCALE_FULL
// ask for: 4 pools, 20 pods a node, a burst of 2.5 pods per node.
func benchShapes(b *testing.B) []Shape {
	spec := os.Getenv("NODEWRIGHT_SCALE_NODES")
	if os.Getenv("NODEWRIGHT_SCALE_FULL") == "1" {
		spec = "200,2000"
	}
	if spec == "" {
		spec = "200"
	}
	var out []Shape
	for f := range strings.SplitSeq(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 4 {
			b.Fatalf("NODEWRIGHT_SCALE_NODES: %q is not a node count of at least 4", f)
		}
		out = append(out, Shape{Pools: 4, Nodes: n, PodsPerNode: 20, Pending: n * 5 / 2})
	}
	return out
}

// benchPass runs fn's scheduled pass b.N times.
func benchPass(b *testing.B, c *Cluster, fn string) {
	var total Cost
	for i := range b.N {
		b.StopTimer()
		c.WaitQuiet()
		b.StartTimer()
		stop := profilePass(b, c, fmt.Sprintf("%s-%d", fn, i))
		cost, _, err := c.Pass(fn)
		stop()
		if err != nil {
			b.Fatalf("%s pass: %v", fn, err)
		}
		total = total.Add(cost)
	}
	b.Logf("%s, %d passes: %s", fn, b.N, total)
	if n := len(c.Claims()); n != c.Shape.Nodes {
		b.Fatalf("after %s passes: %d claims, want %d", fn, n, c.Shape.Nodes)
	}
	total.Report(b, b.N)
}

// benchSteady runs a minute of steady state b.N times: one pass of each
// scheduled function. Its per-pass figures are per minute.
func benchSteady(b *testing.B, c *Cluster) {
	var total Cost
	byFn := map[string]Cost{}
	for range b.N {
		for _, fn := range []string{Provisioner, Lifecycle, Disruption} {
			b.StopTimer()
			c.WaitQuiet()
			b.StartTimer()
			cost, _, err := c.Pass(fn)
			if err != nil {
				b.Fatalf("%s pass: %v", fn, err)
			}
			total, byFn[fn] = total.Add(cost), byFn[fn].Add(cost)
		}
	}
	for fn, cost := range byFn {
		b.Logf("steady state, %s's share over %d minutes: %s", fn, b.N, cost)
	}
	b.Logf("steady state, %d minutes: %s", b.N, total)
	total.Report(b, b.N)
	b.ReportMetric(total.API.Bytes/float64(b.N), "apiserver-bytes/min")
}

// benchBurst places a burst of n pending pods b.N times, undoing the
// launches between passes.
func benchBurst(b *testing.B, c *Cluster, n int) {
	b.StopTimer()
	c.Burst(n)
	defer c.DeleteBurst()
	var total Cost
	for range b.N {
		c.WaitQuiet()
		stop := profilePass(b, c, fmt.Sprintf("provisioner-%d", n))
		b.StartTimer()
		cost, res, err := c.Pass(Provisioner)
		b.StopTimer()
		stop()
		if err != nil {
			b.Fatalf("provisioner pass: %v", err)
		}
		r := provisioned(b, res)
		if r.Pending != n || r.Unschedulable != 0 {
			b.Fatalf("provisioner saw %d pending and left %d unplaced, want %d and 0", r.Pending, r.Unschedulable, n)
		}
		b.Logf("pass: batch %s, solve %s, %d rounds, %d launched, %d nominated", r.Batch, r.SolveTime, r.Rounds, len(r.Launched), r.Nominated)
		total = total.Add(cost)
		c.Unlaunch(append(r.Created, r.Launched...))
	}
	b.Logf("provisioner, %d passes over %d pending pods: %s", b.N, n, total)
	total.Report(b, b.N)
}
