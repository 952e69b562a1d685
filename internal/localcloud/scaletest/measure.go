package scaletest

import (
	"bytes"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cost is what one function pass cost.
type Cost struct {
	Wall time.Duration
	// CPU is the process's user+system CPU time over the pass: the
	// function's, plus the in-process EC2/SQS simulator answering it.
	CPU time.Duration
	// PeakHeap is the most heap (live and not yet swept objects) the pass
	// held above the heap before it, after a collection: what it needs on
	// top of a function's idle heap.
	PeakHeap uint64
	// BaseHeap is the heap before the pass (the whole test process: the
	// harness and simulator included), for context.
	BaseHeap uint64
	// API is the API server's requests and response bytes over the pass.
	API apiTraffic
	// Calls are the DynamoDB and SQS calls over the pass.
	Calls wireCounts
	// CloudCPU is the CPU time of the local cloud's processes over the
	// pass (API server, etcd, controllers, KWOK, dynalite), and by
	// process name: work that shares the machine's cores with the pass
	// here and runs elsewhere on AWS. With CPU, what the pass cost
	// whatever else loaded the machine.
	CloudCPU          time.Duration
	CloudCPUByProcess map[string]time.Duration
	// DynamoDBBusy and SimBusy are the time the calls to DynamoDB and to the
	// EC2/SQS simulator were in flight, summed over concurrent calls.
	DynamoDBBusy, SimBusy time.Duration
}

// MiB converts bytes to MiB.
func MiB(b uint64) float64 { return float64(b) / (1 << 20) }

// peakHeap samples the heap every millisecond until stopped; reading
// runtime/metrics does not stop the world, so it does not slow the pass.
type peakHeap struct {
	done chan struct{}
	out  chan uint64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func heapNow() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func watchHeap() *peakHeap {
	p := &peakHeap{done: make(chan struct{}), out: make(chan uint64, 1)}
	go func() {
		top := heapNow()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				p.out <- max(top, heapNow())
				return
			case <-tick.C:
				top = max(top, heapNow())
			}
		}
	}()
	return p
}

func (p *peakHeap) stop() uint64 {
	close(p.done)
	return <-p.out
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the user+system CPU time of the processes pids so far, by
// command name (those gone or unreadable count nothing), in the kernel's
// clock ticks of 10 ms.
func procCPU(pids ...int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ...": utime and stime are the 12th and 13th
		// fields after the command's closing parenthesis.
		head, rest, ok := bytes.Cut(b, []byte(") "))
		_, comm, _ := bytes.Cut(head, []byte(" ("))
		if f := strings.Fields(string(rest)); ok && len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			st, _ := strconv.ParseInt(f[12], 10, 64)
			out[string(comm)] += time.Duration(u+st) * 10 * time.Millisecond
		}
	}
	return out
}

// cloudCPU is the CPU time of the local cloud's processes so far, by
// command name (kube-apiserver, etcd, kwok, node for dynalite, ...).
func (c *Cluster) cloudCPU() map[string]time.Duration { return procCPU(c.Env.Cloud.PIDs()...) }

// cpuSince is what each process used between before and after, and the sum.
func cpuSince(before, after map[string]time.Duration) (time.Duration, map[string]time.Duration) {
	var sum time.Duration
	out := make(map[string]time.Duration, len(after))
	for name, d := range after {
		out[name] = d - before[name]
		sum += out[name]
	}
	return sum, out
}

// Before a measured pass the benchmarks wait (TestClusterScale does not), at
// most quietWait, for a half second in which the local cloud used less than
// quietCPU: KWOK renews the seeded nodes' leases in bursts (they were
// created together), and a pass measured during one paid for it on the two
// cores it shares with the local cloud, where on AWS that work is EKS's, on
// other machines.
const (
	quietWait = 20 * time.Second
	quietCPU  = 100 * time.Millisecond
)

// WaitQuiet waits for the local cloud to go quiet (see quietWait); the
// benchmarks call it with their timer stopped before each pass.
func (c *Cluster) WaitQuiet() {
	start := time.Now()
	for {
		before := c.cloudCPU()
		time.Sleep(500 * time.Millisecond)
		used, _ := cpuSince(before, c.cloudCPU())
		if used < quietCPU {
			return
		}
		if time.Since(start) >= quietWait {
			c.t.Logf("the local cloud was still busy after %s (%s of CPU in the last half second); measuring anyway", quietWait, used)
			return
		}
	}
}

// measure runs pass and returns what it cost.
func (c *Cluster) measure(pass func() error) (Cost, error) {
	runtime.GC()
	base := heapNow()
	api0, err := readAPITraffic(c.ctx, c.admin)
	if err != nil {
		return Cost{}, err
	}
	db0, sim0 := c.db.counts(), c.sim.counts()
	cpu0 := cpuTime()
	cloud0 := c.cloudCPU()
	heap := watchHeap()
	start := time.Now()
	passErr := pass()
	cost := Cost{Wall: time.Since(start), CPU: cpuTime() - cpu0, BaseHeap: base}
	cost.CloudCPU, cost.CloudCPUByProcess = cpuSince(cloud0, c.cloudCPU())
	if peak := heap.stop(); peak > base {
		cost.PeakHeap = peak - base
	}
	db, sim := c.db.counts().minus(db0), c.sim.counts().minus(sim0)
	cost.Calls, cost.DynamoDBBusy, cost.SimBusy = db.plus(sim), db.Busy, sim.Busy
	api1, err := readAPITraffic(c.ctx, c.admin)
	if err != nil {
		return cost, err
	}
	cost.API = api1.minus(api0)
	return cost, passErr
}
