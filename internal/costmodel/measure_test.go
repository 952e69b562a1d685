package costmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/settings"
)

// phaseStats sums the invocations of one function in one phase.
type phaseStats struct {
	n               int
	seconds         float64
	rru, wru, sqs   float64
	logBytes        float64
	alloc, peakHeap uint64
	workSends       int // SendMessage calls (lifecycle requeues, nudges)
}

func (p *phaseStats) add(inv invocation) {
	p.n++
	p.seconds += inv.took.Seconds()
	p.rru += inv.d.rru
	p.wru += inv.d.wru
	p.sqs += float64(inv.d.sqsTotal())
	p.logBytes += float64(inv.logBytes)
	p.alloc += inv.alloc
	p.peakHeap = max(p.peakHeap, inv.heap)
	p.workSends += inv.d.sqs["SendMessage"] + inv.d.sqs["SendMessageBatch"]
}

func (p phaseStats) mean() (sec, rru, wru, sqs, logb float64) {
	if p.n == 0 {
		return
	}
	n := float64(p.n)
	return p.seconds / n, p.rru / n, p.wru / n, p.sqs / n, p.logBytes / n
}

// measurement is one cluster size's run.
type measurement struct {
	nodes int
	// by phase ("launch", "steady", "terminate") and function.
	phases  map[string]map[string]*phaseStats
	metrics int // distinct EMF metric series seen
	webhook phaseStats
	wall    time.Duration
}

func (m *measurement) stats(phase, fn string) *phaseStats {
	if m.phases[phase] == nil {
		m.phases[phase] = map[string]*phaseStats{}
	}
	if m.phases[phase][fn] == nil {
		m.phases[phase][fn] = &phaseStats{}
	}
	return m.phases[phase][fn]
}

// measure runs the real handlers on the local cloud through a cluster's
// life at n nodes: n pods of 1.5 vCPU (one m5.large each) appear, the
// provisioner launches and the lifecycle registers and initializes the
// nodes; then schedule ticks at steady state; then the pods go and the
// lifecycle empties, drains and terminates every node, and the interruption
// function takes the instances' state-change notifications.
func measure(t testing.TB, n int, level slog.Level) (*measurement, *env) {
	e := newEnv(t, fmt.Sprintf("n%d", n), level)
	m := &measurement{nodes: n, phases: map[string]map[string]*phaseStats{}}
	start := time.Now()
	rec := func(phase, fn string) invocation {
		inv := e.invoke(fn, "schedule", tick)
		if inv.err != nil {
			t.Fatalf("%s %s: %v", phase, fn, inv.err)
		}
		m.stats(phase, fn).add(inv)
		return inv
	}

	e.createPods(n, "1500m")
	// Launch: the provisioner (nudged in AWS; a tick here does the same
	// pass) until every pod has a claim, the lifecycle until every claim's
	// node is initialized.
	for i := 0; ; i++ {
		rec("launch", "provisioner")
		if len(e.claims()) >= n {
			break
		}
		if i > 20 {
			t.Fatalf("provisioner made %d of %d claims", len(e.claims()), n)
		}
	}
	deadline := time.Now().Add(8 * time.Minute)
	for i := 0; ; i++ {
		rec("launch", "lifecycle")
		ready := 0
		cls := e.claims()
		for _, c := range cls {
			if c.IsTrue(apis.ConditionInitialized) {
				ready++
			}
		}
		if ready >= n {
			break
		}
		// Claims lost to capacity errors are re-planned by the next pass,
		// as the provisioner's schedule would.
		if len(cls) < n || i%10 == 9 {
			rec("launch", "provisioner")
		}
		if time.Now().After(deadline) {
			for _, c := range cls {
				if !c.IsTrue(apis.ConditionInitialized) {
					t.Logf("not initialized: %s instance %s node %q conditions %+v", c.Name, c.Status.InstanceID, c.Status.NodeName, c.Status.Conditions)
				}
			}
			t.Fatalf("%d of %d nodes initialized (%d claims) after 8 minutes", ready, n, len(cls))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Steady state starts once every pod runs on its node (the lifecycle
	// lifts the unregistered taint; the scheduler binds).
	deadline = time.Now().Add(5 * time.Minute)
	for i, running := 0, 0; running < n; i++ {
		rec("launch", "lifecycle")
		running = 0
		pods, err := e.cloud.KubeClient.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.Status.Phase == "Running" {
				running++
			}
		}
		if running < n && (len(e.claims()) < n || i%10 == 9) {
			// A node emptied before its pod bound was reclaimed; the
			// schedule re-provisions, as in AWS.
			rec("launch", "provisioner")
		}
		if time.Now().After(deadline) {
			for _, p := range pods.Items {
				if p.Status.Phase != "Running" {
					t.Logf("pod %s: node %q phase %s conditions %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
				}
			}
			for _, c := range e.claims() {
				t.Logf("claim %s: node %q deleting %v conditions %+v", c.Name, c.Status.NodeName, c.Deleting(), c.Status.Conditions)
			}
			t.Fatalf("%d of %d pods running after 5 minutes", running, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got := len(e.claims()); got != n {
		t.Fatalf("%d claims before the steady state, want %d", got, n)
	}
	// Steady state: the one-minute schedule of each singleton pass.
	for range 5 {
		for _, fn := range []string{"provisioner", "lifecycle", "disruption"} {
			rec("steady", fn)
		}
	}
	if got := len(e.claims()); got != n {
		t.Fatalf("%d claims after the steady state, want %d (something disrupted busy nodes)", got, n)
	}
	// Scale to zero: emptiness, drain, termination.
	var instances []string
	for _, c := range e.claims() {
		instances = append(instances, c.Status.InstanceID)
	}
	if err := e.cloud.KubeClient.CoreV1().Pods(e.ns).DeleteCollection(e.ctx, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(5 * time.Minute)
	for len(e.claims()) > 0 {
		rec("terminate", "disruption")
		rec("terminate", "lifecycle")
		if time.Now().After(deadline) {
			t.Fatalf("%d claims left 5 minutes after scale-down", len(e.claims()))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The interruption queue delivers two state changes per terminated
	// instance (shutting-down, terminated), one message per invocation at
	// a steady trickle.
	for _, id := range instances[:min(len(instances), 10)] {
		for _, state := range []string{"shutting-down", "terminated"} {
			inv := e.invoke("interruption", "sqs", stateChanges(e.cloud.Region, []string{id}, state))
			if inv.err != nil {
				t.Fatalf("interruption: %v", inv.err)
			}
			m.stats("terminate", "interruption").add(inv)
		}
	}
	m.webhook = measureWebhook(t, e, 50)
	m.metrics = emfSeries(e.logs.Bytes())
	m.wall = time.Since(start)
	return m, e
}

// measureWebhook serves AdmissionReviews of unschedulable pods through the
// real handler with a real SQS nudger (one call in AWS is one invocation).
func measureWebhook(t testing.TB, e *env, calls int) phaseStats {
	h, err := admission.NewHandler(admission.Options{Secret: webhookSecret, Nudger: sqsNudger{e}, Logger: slog.New(slog.NewJSONHandler(e.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	e.fns["webhook"] = func(ctx context.Context, raw json.RawMessage) (any, error) {
		resp := h.Serve(ctx, admission.Request{Method: "POST", Path: "/validate/" + webhookSecret, Headers: map[string]string{"content-type": "application/json"}, Body: raw})
		if resp.Status != 200 {
			return nil, fmt.Errorf("webhook status %d: %s", resp.Status, resp.Body)
		}
		return nil, nil
	}
	var ps phaseStats
	for i := range calls {
		inv := e.invoke("webhook", "url", admissionReview(e.ns, fmt.Sprintf("load-%d", i)))
		if inv.err != nil {
			t.Fatal(inv.err)
		}
		ps.add(inv)
	}
	return ps
}

// emfSeries counts distinct (metric, dimension values) series in EMF lines:
// each is one CloudWatch custom metric.
func emfSeries(logs []byte) int {
	seen := map[string]bool{}
	for _, line := range strings.Split(string(logs), "\n") {
		if !strings.Contains(line, `"_aws"`) {
			continue
		}
		var doc map[string]any
		if json.Unmarshal([]byte(line), &doc) != nil {
			continue
		}
		aws, _ := doc["_aws"].(map[string]any)
		cms, _ := aws["CloudWatchMetrics"].([]any)
		for _, cm := range cms {
			cmm, _ := cm.(map[string]any)
			dimsets, _ := cmm["Dimensions"].([]any)
			mets, _ := cmm["Metrics"].([]any)
			for _, ds := range dimsets {
				keys, _ := ds.([]any)
				var parts []string
				for _, k := range keys {
					ks, _ := k.(string)
					parts = append(parts, fmt.Sprintf("%s=%v", ks, doc[ks]))
				}
				sort.Strings(parts)
				for _, mt := range mets {
					mm, _ := mt.(map[string]any)
					seen[fmt.Sprintf("%v|%s", mm["Name"], strings.Join(parts, ","))] = true
				}
			}
		}
	}
	return len(seen)
}

// Assumptions turning one run into a month (stated in infra/README.md).
const (
	// Each node is replaced about weekly (consolidation, drift, expiry,
	// spot): 4.3 launches and terminations per node-month.
	replacementsPerNodeMonth = 4.3
	// Pods per node and webhook calls per pod created (the scheduler's
	// Unschedulable status update, sometimes twice).
	podsPerNode    = 10
	webhookPerPod  = 2
	ticksPerMonth  = 60 * HoursPerMonth // rate(1 minute)
	platformLogLen = 350                // Lambda's START, END and REPORT lines
)

// memoryMB is the memory fn is configured with (settings.DefaultSize, what
// the stack deploys): Lambda bills configured memory, not what is used.
func memoryMB(fn string) int { return settings.DefaultSize(fn).MemoryMB }

// fit is a per-invocation figure as a + b·nodes.
type fit struct{ a, b float64 }

func (f fit) at(n int) float64 { return max(0, f.a+f.b*float64(n)) }

func linear(ms []*measurement, get func(*measurement) float64) fit {
	if len(ms) == 1 {
		return fit{a: get(ms[0])}
	}
	lo, hi := ms[0], ms[len(ms)-1]
	b := (get(hi) - get(lo)) / float64(hi.nodes-lo.nodes)
	return fit{a: get(lo) - b*float64(lo.nodes), b: b}
}

// loads converts measurements to a month at n nodes: steady-state ticks
// (fitted linearly in cluster size from the measured sizes), per-node event
// work (launch, requeues, drain, termination, interruption messages,
// webhook calls) times replacements.
func loads(ms []*measurement, n int) []FunctionLoad {
	sort.Slice(ms, func(i, j int) bool { return ms[i].nodes < ms[j].nodes })
	big := ms[len(ms)-1]
	var out []FunctionLoad
	replacements := replacementsPerNodeMonth * float64(n)
	for _, fn := range []string{"provisioner", "lifecycle", "disruption"} {
		get := func(f func(p phaseStats) float64) fit {
			return linear(ms, func(m *measurement) float64 { return f(*m.stats("steady", fn)) })
		}
		sec := get(func(p phaseStats) float64 { s, _, _, _, _ := p.mean(); return s })
		rru := get(func(p phaseStats) float64 { _, r, _, _, _ := p.mean(); return r })
		wru := get(func(p phaseStats) float64 { _, _, w, _, _ := p.mean(); return w })
		sqs := get(func(p phaseStats) float64 { _, _, _, q, _ := p.mean(); return q })
		lb := get(func(p phaseStats) float64 { _, _, _, _, l := p.mean(); return l })
		out = append(out, FunctionLoad{Name: fn + " (schedule)", MemoryMB: memoryMB(fn), Invocations: ticksPerMonth,
			DurationSeconds: sec.at(n), RRU: rru.at(n), WRU: wru.at(n), SQSRequests: sqs.at(n), LogBytes: lb.at(n) + platformLogLen})
	}
	// Event work per node, from the largest run: everything the launch and
	// terminate phases cost, divided by the nodes they handled. In AWS this
	// arrives as nudges and requeues instead of ticks; the work is the same.
	for _, fn := range []string{"provisioner", "lifecycle", "disruption"} {
		var tot phaseStats
		for _, ph := range []string{"launch", "terminate"} {
			p := big.stats(ph, fn)
			tot.n += p.n
			tot.seconds += p.seconds
			tot.rru += p.rru
			tot.wru += p.wru
			tot.sqs += p.sqs
			tot.logBytes += p.logBytes
		}
		if tot.n == 0 {
			continue
		}
		perNode := 1 / float64(big.nodes)
		invPerNode := float64(tot.n) * perNode
		out = append(out, FunctionLoad{Name: fn + " (events)", MemoryMB: memoryMB(fn), Invocations: replacements * invPerNode,
			DurationSeconds: tot.seconds / float64(tot.n), RRU: tot.rru / float64(tot.n), WRU: tot.wru / float64(tot.n),
			SQSRequests: tot.sqs / float64(tot.n), LogBytes: tot.logBytes/float64(tot.n) + platformLogLen})
	}
	ip := big.stats("terminate", "interruption")
	if sec, rru, wru, sqs, lb := ip.mean(); ip.n > 0 {
		out = append(out, FunctionLoad{Name: "interruption", MemoryMB: memoryMB("interruption"), Invocations: 2 * replacements,
			DurationSeconds: sec, RRU: rru, WRU: wru, SQSRequests: sqs, LogBytes: lb + platformLogLen})
	}
	if sec, rru, wru, sqs, lb := big.webhook.mean(); big.webhook.n > 0 {
		out = append(out, FunctionLoad{Name: "webhook", MemoryMB: memoryMB("webhook"), Invocations: replacements * podsPerNode * webhookPerPod,
			DurationSeconds: sec, RRU: rru, WRU: wru, SQSRequests: sqs, LogBytes: lb + platformLogLen})
	}
	return out
}

// fixed: three queues polled by event source mappings, the metric series
// seen, the stack's 13 alarms and one dashboard.
func fixedCosts(ms []*measurement) Fixed {
	series := 0
	for _, m := range ms {
		series = max(series, m.metrics)
	}
	return Fixed{SQSPolls: 3 * SQSPollsPerQueue, CustomMetrics: series, Alarms: 13, Dashboards: 1}
}

// BenchmarkRunningCost measures the functions on the local cloud at the
// cluster sizes in NODEWRIGHT_COST_SIZES (default "10,100") and prints the
// monthly cost table for 10, 100 and 1,000 nodes (sizes not measured are
// extrapolated: steady-state passes linearly in nodes, event work per node
// from the largest run). NODEWRIGHT_COST_OUT names a file for the Markdown.
//
//	go test ./internal/costmodel -run '^$' -bench RunningCost -benchtime 1x -timeout 30m
func BenchmarkRunningCost(b *testing.B) {
	sizes := []int{10, 100}
	if s := os.Getenv("NODEWRIGHT_COST_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || v < 1 {
				b.Fatalf("NODEWRIGHT_COST_SIZES: bad size %q", f)
			}
			sizes = append(sizes, v)
		}
	}
	var ms []*measurement
	for i := 0; i < b.N; i++ {
		ms = ms[:0]
		for _, n := range sizes {
			m, _ := measure(b, n, slog.LevelInfo)
			ms = append(ms, m)
		}
	}
	b.StopTimer()
	var rows []Row
	var report strings.Builder
	for _, n := range []int{10, 100, 1000} {
		bd := Monthly(loads(ms, n), fixedCosts(ms), USEast1)
		k, _ := Karpenter(USEast1, "m5.large")
		am, _ := AutoMode(USEast1, n, "m5.xlarge")
		rows = append(rows, Row{Nodes: n, Nodewright: bd, Karpenter: k, AutoMode: am})
		b.ReportMetric(bd.Total, fmt.Sprintf("$/month@%d", n))
	}
	WriteMarkdown(&report, rows, "m5.large", "m5.xlarge")
	report.WriteString("\nMeasured per invocation (local cloud, mean):\n\n")
	report.WriteString("| nodes | function | phase | invocations | mean ms | RRU | WRU | SQS req | log bytes | MiB allocated | heap in use MiB |\n|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range ms {
		for _, ph := range []string{"launch", "steady", "terminate"} {
			fns := make([]string, 0, len(m.phases[ph]))
			for fn := range m.phases[ph] {
				fns = append(fns, fn)
			}
			sort.Strings(fns)
			for _, fn := range fns {
				p := m.phases[ph][fn]
				if p.n == 0 {
					continue
				}
				sec, rru, wru, sqs, lb := p.mean()
				fmt.Fprintf(&report, "| %d | %s | %s | %d | %.1f | %.1f | %.1f | %.1f | %.0f | %.1f | %.0f |\n", m.nodes, fn, ph, p.n, sec*1000, rru, wru, sqs, lb,
					float64(p.alloc)/float64(p.n)/(1<<20), float64(p.peakHeap)/(1<<20))
			}
		}
		sec, _, _, sqs, lb := m.webhook.mean()
		fmt.Fprintf(&report, "| %d | webhook | per call | %d | %.2f | 0 | 0 | %.2f | %.0f | %.2f | %.0f |\n", m.nodes, m.webhook.n, sec*1000, sqs, lb,
			float64(m.webhook.alloc)/float64(max(1, m.webhook.n))/(1<<20), float64(m.webhook.peakHeap)/(1<<20))
		fmt.Fprintf(&report, "\n%d nodes: %d EMF metric series, run took %s\n\n", m.nodes, m.metrics, m.wall.Round(time.Second))
	}
	b.Log("\n" + report.String())
	if out := os.Getenv("NODEWRIGHT_COST_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// createPods creates n pods of cpu each that only this run's pool can take.
func (e *env) createPods(n int, cpu string) {
	e.t.Helper()
	for i := range n {
		p := cloudtest.PausePod(e.ns, fmt.Sprintf("load-%d", i), "load", map[string]string{"nodewright.io/cost": e.pool}, cpu, "256Mi")
		// What the DefaultTolerationSeconds admission plugin adds in EKS: a
		// node briefly NotReady must not evict the pod (the local control
		// plane's taint-eviction controller did).
		p.Spec.Tolerations = []corev1.Toleration{
			{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
			{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
		}
		if _, err := e.cloud.KubeClient.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	e.waitFor("pods unschedulable", time.Minute, func() bool {
		list, err := e.cloud.KubeClient.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		un := 0
		for _, p := range list.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					un++
				}
			}
		}
		return un == n
	})
}

func (e *env) waitFor(what string, d time.Duration, f func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
