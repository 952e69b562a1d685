package shadow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/browsertest"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/decision"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
	"github.com/nodewright/nodewright/internal/settings"
)

var shared = cloudtest.NewShared("shadow")

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// ec2Writes are every EC2 call nodewright makes that changes something.
var ec2Writes = []string{"CreateFleet", "RunInstances", "CreateLaunchTemplate", "TerminateInstances", "CreateTags", "DeleteLaunchTemplate"}

// mutatingVerbs are the API server's verbs that change something.
var mutatingVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// TestShadowModeBesideKarpenter deploys nodewright in shadow mode (the
// stack's shadow-mode IAM, enforced) beside a fleet it did not create:
// two nodes labelled as Karpenter labels them, running two small pods of a
// Deployment, and pods pending for the NodePool nodewright shares with
// it, too big for those nodes. Every function runs its passes, as the
// shadow stack's view-only Kubernetes identity; then no EC2 write was made
// or refused, that identity made no mutating request to the API server
// (and RBAC refuses it a taint and an eviction), and the report shows the
// NodeClaims nodewright would have launched and the consolidation it would
// do of Karpenter's nodes, with its savings; the HTML report renders in
// Chromium.
func TestShadowModeBesideKarpenter(t *testing.T) {
	e := cloudtest.NewEnv(t, shared, cloudtest.Timeout(10*time.Minute), cloudtest.PoolLabel("shadow-pool"),
		cloudtest.InstanceTypes("m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge"), cloudtest.CapacityTypes("on-demand"),
		cloudtest.PoolSpec(func(p *apistest.Pool) { p.ConsolidationPolicy, p.ConsolidateAfter = "WhenEmptyOrUnderutilized", "0s" }),
		cloudtest.Resources(func(*cloudtest.Env) localcloud.StackResources { return localcloud.StackResources{Shadow: true} }))
	cs := e.Cloud.Plane.Client()
	zone := e.Cloud.Region + "a"
	for _, name := range []string{"karp-a", "karp-b"} {
		karpenterNode(e.Ctx, t, cs, e.Pool, name, zone)
	}
	selector := map[string]string{"shadow-pool": e.Pool}
	cloudtest.Workload{Name: "fleet-app", Replicas: 2, CPU: "500m", Memory: "512Mi", NodeSelector: selector}.Deploy(e.Ctx, t, cs, e.Namespace)
	waitRunning(e, t)
	// Too big for a Karpenter node (8 CPUs).
	cloudtest.Workload{Name: "pending", Replicas: 3, CPU: "9", Memory: "1Gi", NodeSelector: selector}.Deploy(e.Ctx, t, cs, e.Namespace)
	cloudtest.WaitUnschedulable(e.Ctx, t, cs, e.Namespace, "app=pending", 3, 3*time.Minute)

	ec2Before, audited := ec2WriteCount(e), auditMark(t, e.Cloud)
	started := time.Now()
	for _, fn := range []string{"provisioner", "disruption", "lifecycle"} {
		start := time.Now()
		invoke(e, t, fn)
		t.Logf("%s pass in shadow mode: %s", fn, time.Since(start).Round(time.Millisecond))
	}
	spotWarning(e, t, "i-karpa")

	if n := ec2WriteCount(e) - ec2Before; n != 0 {
		t.Errorf("%d EC2 writes in shadow mode", n)
	}
	if d := e.Cloud.IAMDenials(); len(d) != 0 {
		t.Errorf("the shadow stack's IAM refused %d calls: %v", len(d), d)
	}
	assertNoKubeWrites(t, e.Cloud, audited)
	assertShadowCannotWrite(e, t)
	pods, err := cs.CoreV1().Pods(e.Namespace).List(e.Ctx, metav1.ListOptions{LabelSelector: "app=pending"})
	if err != nil || len(pods.Items) != 3 || slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool { return p.Spec.NodeName != "" }) {
		t.Errorf("the pending pods got a node (%v)", err)
	}
	checkReport(e, t, started)
}

// karpenterNode registers a KWOK node as Karpenter would have launched it
// for pool: its labels (the pool's template label shadow-pool included),
// an m5.2xlarge on-demand in zone.
func karpenterNode(ctx context.Context, t *testing.T, cs kubernetes.Interface, pool, name, zone string) {
	t.Helper()
	n := kubeplane.FakeNode(name, map[string]string{
		apis.NodePoolLabelKey: pool, apis.NodeClassLabelKey: pool, apis.CapacityTypeLabelKey: "on-demand",
		catalog.LabelInstanceType: "m5.2xlarge", catalog.LabelTopologyZone: zone, "karpenter.sh/registered": "true",
		"karpenter.sh/initialized": "true", "shadow-pool": pool,
	}, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("58")})
	n.Spec.ProviderID = fmt.Sprintf("aws:///%s/i-%s", zone, strings.ReplaceAll(name, "-", ""))
	if _, err := cs.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// waitRunning waits for the fleet's two pods to run: on one node each
// (one node underutilized) or both on one (the other empty), nodewright
// would remove a node either way.
func waitRunning(e *cloudtest.Env, t *testing.T) {
	cloudtest.Eventually(t, "fleet-app running on the Karpenter nodes", 2*time.Minute, func() (bool, string) {
		pods, err := e.Cloud.Plane.Client().CoreV1().Pods(e.Namespace).List(e.Ctx, metav1.ListOptions{LabelSelector: "app=fleet-app"})
		if err != nil {
			return false, err.Error()
		}
		var on []string
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				on = append(on, p.Spec.NodeName)
			}
		}
		return len(on) == 2, fmt.Sprintf("running on %v", on)
	})
}

func ec2WriteCount(e *cloudtest.Env) int {
	n := 0
	for _, op := range ec2Writes {
		n += len(e.Cloud.AWS.Calls("ec2", op))
	}
	return n
}

// invoke builds function fn as Run does (shadow-mode settings, the
// stack's controller role, the controllers' Kubernetes identity) and runs
// one schedule tick of it.
func invoke(e *cloudtest.Env, t *testing.T, fn string) {
	t.Helper()
	tick(e, t, fn, function(e, t, settings.ModeShadow, e.Config, e.Stack.Controller, fn))
}

// function is fn's Lambda handler as Run builds it: settings of mode,
// configuration cfg, AWS calls signed as creds (a deployed stack's
// controller role) and the Kubernetes identity of a stack of that mode
// (the controllers', or the shadow stack's view-only one).
func function(e *cloudtest.Env, t *testing.T, mode string, cfg *apis.Config, creds aws.CredentialsProvider, fn string) app.Handler {
	t.Helper()
	s := settings.Settings{ClusterName: e.Cloud.ClusterName, TableName: e.Table, Owner: e.Owner(), Mode: mode,
		BatchIdle: 200 * time.Millisecond, BatchMax: time.Second, LogLevel: slog.LevelInfo}
	kubeREST := e.KubeConfig()
	if mode == settings.ModeShadow {
		// The shadow stack's view-only access entry.
		kubeREST = rest.CopyConfig(e.Cloud.ShadowREST)
	}
	a, err := app.New(e.Ctx, s, app.Options{Function: fn, Out: e.Logs, KubeREST: kubeREST, Config: cfg, AWSCredentials: creds})
	if err != nil {
		t.Fatalf("%s: %v", fn, err)
	}
	h, err := a.FunctionHandler(fn)
	if err != nil {
		t.Fatal(err)
	}
	return a.Wrap(h)
}

// spotWarning hands the shadow interruption function a spot interruption
// warning for instance (a Karpenter node's): it must take the message (no
// batch item failure) and change nothing, which the caller's checks of
// EC2 and API server writes cover.
func spotWarning(e *cloudtest.Env, t *testing.T, instance string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"version": "0", "id": "spot-" + instance, "detail-type": "EC2 Spot Instance Interruption Warning",
		"source": "aws.ec2", "time": time.Now().UTC().Format(time.RFC3339), "region": e.Cloud.Region,
		"resources": []string{"arn:aws:ec2:" + e.Cloud.Region + ":instance/" + instance},
		"detail":    map[string]any{"instance-id": instance, "instance-action": "terminate"}})
	raw, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-" + instance, Body: string(body),
		Attributes: map[string]string{"SentTimestamp": fmt.Sprint(time.Now().UnixMilli())}}}})
	h := function(e, t, settings.ModeShadow, e.Config, e.Stack.Controller, "interruption")
	out, err := h(e.Ctx, raw)
	if err != nil {
		t.Fatalf("interruption in shadow mode: %v", err)
	}
	if r, ok := out.(events.SQSEventResponse); !ok || len(r.BatchItemFailures) != 0 {
		t.Errorf("interruption in shadow mode answered %#v, want the message taken", out)
	}
}

// tick runs one schedule tick of fn's handler h.
func tick(e *cloudtest.Env, t *testing.T, fn string, h app.Handler) {
	t.Helper()
	if _, err := h(e.Ctx, scheduled(e, fn)); err != nil {
		t.Fatalf("%s pass: %v", fn, err)
	}
}

// scheduled is the EventBridge schedule's event for fn.
func scheduled(e *cloudtest.Env, fn string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"version": "0", "id": "tick-" + fn, "detail-type": "Scheduled Event", "source": "aws.events",
		"time": time.Now().UTC().Format(time.RFC3339), "region": e.Cloud.Region, "resources": []string{}, "detail": map[string]any{}})
	return raw
}

// auditMark is where the API server's audit log ends now, for
// assertNoKubeWrites to look from.
func auditMark(t *testing.T, cloud *localcloud.Cloud) int {
	t.Helper()
	events, err := cloud.Plane.Audit()
	if err != nil {
		t.Fatal(err)
	}
	return len(events)
}

// assertNoKubeWrites reads the API server's audit log from mark on: the
// functions' identities made requests (they read the cluster) and none of
// them changed anything.
func assertNoKubeWrites(t *testing.T, cloud *localcloud.Cloud, mark int) {
	t.Helper()
	events, err := cloud.Plane.Audit()
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, ev := range events[mark:] {
		if slices.Contains(mutatingVerbs, ev.Verb) {
			t.Errorf("mutating request by the functions' identity: %s", ev)
			continue
		}
		reads++
	}
	if reads == 0 {
		t.Error("the audit log has no request of the functions' identity: is it audited?")
	}
}

// assertShadowCannotWrite shows that the shadow stack's identity can read
// the cluster and RBAC refuses it the writes the controllers make: a bug
// in shadow mode's adapters could not act either.
func assertShadowCannotWrite(e *cloudtest.Env, t *testing.T) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(rest.CopyConfig(e.Cloud.ShadowREST))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().List(e.Ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("the shadow identity cannot list nodes: %v", err)
	}
	pods, err := cs.CoreV1().Pods(e.Namespace).List(e.Ctx, metav1.ListOptions{LabelSelector: "app=fleet-app"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("the shadow identity cannot list pods: %v", err)
	}
	taint := []byte(`{"spec":{"taints":[{"key":"` + apis.DisruptedTaintKey + `","effect":"NoSchedule"}]}}`)
	_, patchErr := cs.CoreV1().Nodes().Patch(e.Ctx, "karp-a", types.StrategicMergePatchType, taint, metav1.PatchOptions{})
	evictErr := cs.PolicyV1().Evictions(e.Namespace).Evict(e.Ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pods.Items[0].Name, Namespace: e.Namespace}})
	for what, err := range map[string]error{"taint a node": patchErr, "evict a pod": evictErr} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the shadow identity tried to %s: want 403, got %v", what, err)
		}
	}
}

// checkReport is what `nodewright report` prints for the test's records.
func checkReport(e *cloudtest.Env, t *testing.T, since time.Time) {
	t.Helper()
	ds, err := e.Store.ListDecisions(e.Ctx, since.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := decision.Decode(ds)
	if err != nil {
		t.Fatal(err)
	}
	rep := decision.Summarize(recs, since.Add(-time.Minute), time.Now())
	pods := 0
	for _, c := range rep.WouldLaunch {
		if c.NodePool != e.Pool || c.InstanceType == "" || c.Zone == "" || c.CapacityType != "on-demand" || c.Price <= 0 {
			t.Errorf("would-launch claim %+v", c)
		}
		pods += len(c.Pods)
	}
	if len(rep.WouldLaunch) == 0 || pods != 3 || rep.Latency.Pods != 3 {
		t.Errorf("would launch %+v for %d pods (latency %+v), want the 3 pending pods planned", rep.WouldLaunch, pods, rep.Latency)
	}
	if len(rep.Opportunities) == 0 {
		t.Fatalf("no consolidation opportunity; report %+v", rep)
	}
	o := rep.Opportunities[0].Item
	if o.SavingsPerHr <= 0 || len(o.Nodes) == 0 || o.Nodes[0].Owner != "karpenter" || !strings.HasPrefix(o.Nodes[0].Name, "karp-") {
		t.Errorf("opportunity %+v", o)
	}
	if rep.Cost.ActualPerHour <= rep.Cost.PlanPerHour {
		t.Errorf("the fleet costs %.4f/h, nodewright's plan %.4f/h: want a saving", rep.Cost.ActualPerHour, rep.Cost.PlanPerHour)
	}
	var table, page bytes.Buffer
	if err := decision.WriteTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("nodewright report:\n%s", table.String())
	if err := decision.WriteHTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	dom := browsertest.Open(t, browsertest.Browser(t), page.Bytes()).DOM()
	if !bytes.Contains(dom, []byte(`class="opportunity"`)) || !bytes.Contains(dom, []byte(rep.WouldLaunch[0].Name)) {
		t.Errorf("the HTML report in Chromium lacks the plan or the opportunity:\n%s", dom)
	}
}
