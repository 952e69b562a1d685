package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/localcloud"
)

// lineWriter sends whole lines to t.Log so the timeline shows with -v.
type lineWriter struct {
	t   testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
	all bytes.Buffer
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			break
		}
		w.t.Log(strings.TrimRight(line, "\n"))
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// demoLine is the final line; the Lambda counts must show no timeout (a
// function stopped at its timeout during the demo is a defect).
var demoLine = regexp.MustCompile(`^DEMO OK pods=10 running=10 nodes=([1-9][0-9]*) cost_per_hour=([0-9]+\.[0-9]{4}) time_to_running_s=([0-9.]+) scale_down_s=([0-9.]+) ` +
	`faults=cold_start:[0-9.]+,duplicate:[0-9.]+,event_delay_s:[0-9.]+,shuffle:(on|off) ` +
	`lambda=throttles:[0-9]+,retries:[0-9]+,expired:[0-9]+,timeouts:0,cold_starts:[0-9]+,duplicates:[0-9]+,delayed:[0-9]+ iam=enforced denied=0$`)

// The demo end to end on its own local cloud, as `make demo` runs it.
func TestDemo(t *testing.T) {
	localcloud.SkipIfShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute) // a cold control-plane build
	defer cancel()
	out := &lineWriter{t: t}
	logs, err := os.Create(filepath.Join(t.TempDir(), "functions.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	res, err := Run(ctx, Options{Out: out, Logs: logs, Timeout: 3 * time.Minute})
	if err != nil {
		dumpLogs(t, logs.Name())
		t.Fatalf("demo failed: %v", err)
	}
	line := res.Line()
	t.Log(line)
	if !demoLine.MatchString(line) {
		t.Fatalf("final line %q does not match %s", line, demoLine)
	}
	if res.WebhookCalls == 0 || res.WebhookToFleet <= 0 {
		t.Errorf("the API server's webhook calls did not drive provisioning: %d calls, webhook->CreateFleet %s", res.WebhookCalls, res.WebhookToFleet)
	}
	if res.CostPerHour <= 0 || res.NodeClaims < res.Nodes {
		t.Errorf("cost %v, %d claims for %d nodes", res.CostPerHour, res.NodeClaims, res.Nodes)
	}
	timeline := out.String()
	for _, want := range []string{"NodeClaim ", "planned:", "CreateFleet launched", "initialized (Ready)", "empty for consolidateAfter 5s", "TerminateInstances", "terminated"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
}

func dumpLogs(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) > 200 {
		lines = lines[len(lines)-200:]
	}
	t.Logf("last function log lines:\n%s", strings.Join(lines, "\n"))
}

// BenchmarkBurst measures, for a burst of pods created at once on a shared
// local cloud, the latency from the API server's first Unschedulable
// webhook call to the provisioner's first CreateFleet request (target
// <= 1.5 s with the default 1 s idle window) and from the pods' creation to
// every pod Running. BenchmarkDeployment does the same through the
// Deployment's scale subresource, whose pods the ReplicaSet controller
// creates at its own pace.
// `go test -run '^$' -bench . -benchtime 1x ./internal/demo`; PODS sets the
// number of pods (default 100).
func BenchmarkBurst(b *testing.B)      { benchScaleUp(b, true) }
func BenchmarkDeployment(b *testing.B) { benchScaleUp(b, false) }

func benchScaleUp(b *testing.B, burst bool) {
	localcloud.SkipIfShort(b)
	pods := 100
	if v := os.Getenv("PODS"); v != "" {
		if _, err := fmt.Sscan(v, &pods); err != nil {
			b.Fatalf("PODS=%q: %v", v, err)
		}
	}
	cloud := localcloud.ForTest(b, CloudOptions(nil))
	var fleet, lastVerdict, running, down, spread time.Duration
	var nodes int
	var cost float64
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		ns := fmt.Sprintf("burst-%d-%d", time.Now().Unix(), i)
		if err := createNamespace(ctx, cloud, ns); err != nil {
			b.Fatal(err)
		}
		out := io.Writer(io.Discard)
		if testing.Verbose() {
			out = &lineWriter{t: b}
		}
		var logs io.Writer
		if path := os.Getenv("DEMO_LOGS"); path != "" {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			logs = f
		}
		res, err := Run(ctx, Options{Replicas: pods, Burst: burst, Cloud: cloud, Namespace: ns, Out: out, Logs: logs, Timeout: 5 * time.Minute})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		fleet += res.WebhookToFleet
		spread += res.CreateSpread
		lastVerdict += res.LastVerdictToFleet
		running += res.TimeToRunning
		down += res.ScaleDown
		nodes += res.Nodes
		cost += res.CostPerHour
	}
	n := float64(b.N)
	b.ReportMetric(fleet.Seconds()/n, "webhook-to-fleet-s")
	b.ReportMetric(lastVerdict.Seconds()/n, "last-verdict-to-fleet-s")
	b.ReportMetric(running.Seconds()/n, "pending-to-running-s")
	if burst {
		b.ReportMetric(spread.Seconds()/n, "pod-creation-s")
	}
	b.ReportMetric(down.Seconds()/n, "scale-down-s")
	b.ReportMetric(float64(nodes)/n, "nodes")
	b.ReportMetric(cost/n, "$/h")
	b.ReportMetric(0, "ns/op")
}

func createNamespace(ctx context.Context, cloud *localcloud.Cloud, name string) error {
	_, err := cloud.KubeClient.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

// The seed's own policy, WhenEmptyOrUnderutilized: the scale-down comes
// from the disruption function's consolidation (after its validation
// delay) instead of the emptiness checks. On a cloud the test starts, to
// cover Options.Cloud.
func TestDemoSeedPolicy(t *testing.T) {
	localcloud.SkipIfShort(t)
	cloud := localcloud.ForTest(t, CloudOptions(nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out := &lineWriter{t: t}
	res, err := Run(ctx, Options{Out: out, Cloud: cloud, ConsolidationPolicy: "WhenEmptyOrUnderutilized", Timeout: 3 * time.Minute})
	if err != nil {
		t.Fatalf("demo failed: %v", err)
	}
	if line := res.Line(); !demoLine.MatchString(line) {
		t.Fatalf("final line %q does not match %s", line, demoLine)
	}
	if !strings.Contains(out.String(), "disruption   NodeClaim") || !strings.Contains(out.String(), "(Empty, emptiness)") {
		t.Errorf("the disruption function did not mark the empty node")
	}
	// Everything the run registered in the cluster is gone.
	if _, err := cloud.KubeClient.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "nodewright-demo", metav1.GetOptions{}); err == nil {
		t.Errorf("webhook configuration nodewright-demo left behind")
	}
	if _, err := cloud.KubeClient.AppsV1().Deployments("default").Get(ctx, "inflate", metav1.GetOptions{}); err == nil {
		t.Errorf("deployment inflate left behind")
	}
}
