package interruption_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/app"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/interruption"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// One local cloud for the package. Spot instances get Karpenter's two
// minutes between the warning and the reclaim, in real time.
var shared = localcloud.NewShared(localcloud.Options{
	ClusterName: "intr",
	Sim: awssim.Options{Delays: awssim.Delays{
		Pending: 200 * time.Millisecond, NodeRegistration: 200 * time.Millisecond,
		ShuttingDown: 300 * time.Millisecond, SpotInterruption: 2 * time.Minute,
	}},
})

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// poolTemplate is the test's NodePool (%[1]s, also its EC2NodeClass).
const poolTemplate = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %[1]s
spec:
  template:
    metadata:
      labels:
        nodewright.io/test: %[1]s
    spec:
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["m5.large", "m5.xlarge"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: %[1]s
`

// batch is one invocation of the handler by the test's event source mapping.
type batch struct {
	received time.Time // ReceiveMessage returned
	returned time.Time // the handler returned
	records  []events.SQSMessage
	resp     events.SQSEventResponse
	err      error
}

// harness is one test's slice of the shared cloud: its own table, NodePool,
// namespace, interruption queue + DLQ and EventBridge rules, the
// interruption handler fed by an SQS poller (Lambda's event source mapping)
// and the lifecycle controller ticking (registration, the drain after the
// handler's first step, termination).
type harness struct {
	t       testing.TB
	ctx     context.Context
	cloud   *localcloud.Cloud
	sim     *awssim.Server
	table   string
	store   *store.Store
	ns      string
	pool    string
	cfg     *apis.Config
	logs    *cloudtest.SyncBuffer
	sqs     *sqs.Client
	qURL    string
	qName   string
	dlqName string
	stack   *localcloud.Stack

	app     *app.App
	handler atomic.Pointer[interruption.Handler]
	// dead, when its process has crashed, keeps the poller from deleting
	// the batch: a killed Lambda acknowledges nothing.
	dead atomic.Pointer[cloudtest.Crasher]

	mu      sync.Mutex
	batches []batch
}

const maxReceiveCount = 3

var harnesses atomic.Int64

func newHarness(t testing.TB) *harness {
	t.Helper()
	cloud := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	cloudtest.SetEnv(t, cloud)
	h := &harness{t: t, ctx: ctx, cloud: cloud, sim: cloud.AWS, logs: &cloudtest.SyncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", h.logs.String())
		}
	})
	// Unique per harness: a benchmark builds one per run under one name.
	h.pool = fmt.Sprintf("%s-%d", cloudtest.DNSName(t.Name(), 30), harnesses.Add(1))
	awsCfg, err := settings.AWSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := store.NewDynamoDBClient(awsCfg)
	h.table = fmt.Sprintf("intr-%s-%d", h.pool, time.Now().UnixNano()%1e9)
	h.store = cloudtest.NewTable(ctx, t, db, h.table)
	t.Cleanup(h.terminateAll)
	h.ns = cloud.NewNamespace(t)
	h.cfg = cloudtest.LoadConfig(t, fmt.Sprintf(poolTemplate, h.pool)+cloudtest.NodeClassYAML(h.pool, cloud.ClusterName))
	h.sqs = sqs.NewFromConfig(awsCfg)
	h.createQueues(awsCfg.Region)
	// The function and its SQS event source run as the stack's controller
	// role, as Lambda's event source mapping uses the execution role.
	h.stack = cloudtest.Deploy(t, cloud, localcloud.StackResources{Table: h.table, InterruptionQueue: h.qName})
	h.sqs = sqs.NewFromConfig(cloudtest.RoleConfig(ctx, t, h.stack.Controller))
	h.app = h.newApp(interruption.RebalanceIgnore)
	h.setHandler(h.app)
	h.startLoops()
	return h
}

// createQueues creates the interruption queue with its DLQ (as the CDK stack
// does, with a short visibility timeout and maxReceiveCount so redrive
// happens within the test) and the stack's four EventBridge rules.
func (h *harness) createQueues(region string) {
	h.t.Helper()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	h.qName, h.dlqName = "intr-"+h.pool+"-"+suffix, "intr-"+h.pool+"-"+suffix+"-dlq"
	cloudtest.CreateQueue(h.ctx, h.t, h.sqs, h.dlqName, nil)
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": h.sim.SQS().QueueARN(h.dlqName), "maxReceiveCount": maxReceiveCount})
	h.qURL = cloudtest.CreateQueue(h.ctx, h.t, h.sqs, h.qName, map[string]string{
		"VisibilityTimeout": "1", "RedrivePolicy": string(redrive),
	})
	cloudtest.RouteInterruptionEvents(h.t, h.sim, h.qName, h.qName)
	_ = region
}

// newApp builds the function's App as app.Run would, with the test's
// table, configuration and admin kube config.
func (h *harness) newApp(rebalance string) *app.App {
	h.t.Helper()
	s := settings.Settings{ClusterName: h.cloud.ClusterName, TableName: h.table, Owner: cloudtest.Owner(h.cloud, h.table), Rebalance: rebalance,
		BatchIdle: 100 * time.Millisecond, BatchMax: 2 * time.Second, LogLevel: slog.LevelDebug}
	a, err := app.New(h.ctx, s, app.Options{Function: "interruption", Out: h.logs, KubeREST: h.cloud.ControllerREST, Config: h.cfg, AWSCredentials: h.stack.Controller})
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

func (h *harness) setHandler(a *app.App) {
	h.t.Helper()
	hd, err := a.InterruptionHandler()
	if err != nil {
		h.t.Fatal(err)
	}
	h.handler.Store(hd)
}

// startLoops runs the SQS event source mapping for the interruption
// function and the lifecycle controller's schedule (every 300 ms here).
func (h *harness) startLoops() {
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	h.t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { h.poll(ctx) })
	lc, err := lifecycle.New(lifecycle.Deps{Store: h.app.Store, Cluster: h.app.Kube, Cloud: h.app.EC2, Config: h.cfg,
		Log: h.app.Log.With("function", "lifecycle"), Holder: "lifecycle-" + h.pool})
	if err != nil {
		h.t.Fatal(err)
	}
	wg.Go(func() {
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// h.ctx, not ctx: stopping the loop must not abort requests in
				// flight (dynalite dies on an aborted request).
				if _, err := lc.ReconcileAll(h.ctx); err != nil && ctx.Err() == nil {
					h.app.Log.Warn("lifecycle pass", "error", err.Error())
				}
			}
		}
	})
}

// poll is Lambda's SQS event source mapping: batches of up to 10, deleting
// everything but the reported batch item failures.
func (h *harness) poll(ctx context.Context) {
	for ctx.Err() == nil {
		out, err := h.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: sdkaws.String(h.qURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil || len(out.Messages) == 0 {
			continue
		}
		b := batch{received: time.Now()}
		ev := events.SQSEvent{}
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId: sdkaws.ToString(m.MessageId), ReceiptHandle: sdkaws.ToString(m.ReceiptHandle),
				Body: sdkaws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs",
				EventSourceARN: h.sim.SQS().QueueARN(h.qName),
			})
		}
		b.records = ev.Records
		raw, _ := json.Marshal(ev)
		res, err := h.handler.Load().Handle(h.ctx, raw)
		b.returned, b.err = time.Now(), err
		if err == nil {
			b.resp = res.(events.SQSEventResponse)
		}
		failed := map[string]bool{}
		for _, f := range b.resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		killed := h.dead.Load() != nil && h.dead.Load().Crashed()
		for _, r := range ev.Records {
			if err == nil && !failed[r.MessageId] && !killed {
				_, _ = h.sqs.DeleteMessage(h.ctx, &sqs.DeleteMessageInput{QueueUrl: sdkaws.String(h.qURL), ReceiptHandle: sdkaws.String(r.ReceiptHandle)})
			}
		}
		h.mu.Lock()
		h.batches = append(h.batches, b)
		h.mu.Unlock()
	}
}

// handled returns the batches that carried a record whose body contains s.
func (h *harness) handled(s string) []batch {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []batch
	for _, b := range h.batches {
		for _, r := range b.records {
			if strings.Contains(r.Body, s) {
				out = append(out, b)
				break
			}
		}
	}
	return out
}

func (h *harness) eventually(what string, d time.Duration, f func() (bool, string)) {
	h.t.Helper()
	cloudtest.Eventually(h.t, what, d, f)
}

func (h *harness) terminateAll() {
	for _, inst := range h.sim.EC2().Instances() {
		for _, tg := range inst.Tags {
			if sdkaws.ToString(tg.Key) == nwaws.TagNodePool && sdkaws.ToString(tg.Value) == h.pool {
				_ = h.sim.EC2().Terminate(sdkaws.ToString(inst.InstanceId), "test cleanup")
			}
		}
	}
}

// deploy creates a Deployment of n pods only this test's pool takes, and a
// PDB with minAvailable, and provisions capacity for them; it returns once
// every pod runs on one node and that node's claim.
func (h *harness) deploy(n int, minAvailable int) (*apis.NodeClaim, *corev1.Node) {
	h.t.Helper()
	labels := map[string]string{"app": "web"}
	replicas := int32(n)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: h.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"nodewright.io/test": h.pool},
					Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
					}}},
				},
			},
		},
	}
	if _, err := h.cloud.KubeClient.AppsV1().Deployments(h.ns).Create(h.ctx, d, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	ma := intstr.FromInt32(int32(minAvailable))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: h.ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &ma, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := h.cloud.KubeClient.PolicyV1().PodDisruptionBudgets(h.ns).Create(h.ctx, pdb, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	h.eventually("pods unschedulable", 30*time.Second, func() (bool, string) {
		pods := h.pods()
		for _, p := range pods {
			unschedulable := false
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					unschedulable = true
				}
			}
			if !unschedulable {
				return false, p.Name + " not yet unschedulable"
			}
		}
		return len(pods) == n, fmt.Sprintf("%d/%d pods", len(pods), n)
	})
	pd, err := h.app.ProvisionerDeps()
	if err != nil {
		h.t.Fatal(err)
	}
	p, err := provisioning.New(pd)
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := p.Run(h.ctx, provisioning.Trigger{Source: provisioning.TriggerManual})
	if err != nil || len(res.Launched) != 1 {
		h.t.Fatalf("initial provisioning: %+v %v", res, err)
	}
	cl, err := h.store.GetNodeClaim(h.ctx, res.Launched[0])
	if err != nil {
		h.t.Fatal(err)
	}
	node := h.waitRunningOn(n, "")
	if node.Spec.ProviderID != cl.Status.ProviderID {
		h.t.Fatalf("pods run on %s (%s), claim %s has %s", node.Name, node.Spec.ProviderID, cl.Name, cl.Status.ProviderID)
	}
	cl, err = h.store.GetNodeClaim(h.ctx, cl.Name)
	if err != nil {
		h.t.Fatal(err)
	}
	return cl, node
}

// pods lists the deployment's pods that are not terminating.
func (h *harness) pods() []corev1.Pod {
	list, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).List(h.ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return nil
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitRunningOn waits for n ready pods, all on one node other than
// notOn, and returns that node.
func (h *harness) waitRunningOn(n int, notOn string) *corev1.Node {
	h.t.Helper()
	var nodeName string
	h.eventually(fmt.Sprintf("%d pods ready on one node", n), 90*time.Second, func() (bool, string) {
		pods := h.pods()
		nodes := map[string]int{}
		readyN := 0
		for i := range pods {
			if ready(&pods[i]) {
				readyN++
				nodes[pods[i].Spec.NodeName]++
			}
		}
		if readyN != n || len(nodes) != 1 {
			return false, fmt.Sprintf("%d/%d ready on %v", readyN, n, nodes)
		}
		for name := range nodes {
			nodeName = name
		}
		return nodeName != notOn, "still on " + notOn
	})
	node, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return node
}

// watchPDB samples the deployment's healthy pods (ready, not terminating)
// until stop is called and returns the minimum seen.
func (h *harness) watchPDB() (stop func() int) {
	ctx, cancel := context.WithCancel(h.ctx)
	minSeen := int(^uint(0) >> 1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			healthy := 0
			pods := h.pods()
			for i := range pods {
				if ready(&pods[i]) {
					healthy++
				}
			}
			if pods != nil {
				mu.Lock()
				minSeen = min(minSeen, healthy)
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return func() int {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return minSeen
	}
}

func (h *harness) fleetCallsSince(since time.Time) []awssim.Call {
	var out []awssim.Call
	for _, c := range h.sim.Calls("ec2", "CreateFleet") {
		if c.ErrorCode != "" || c.Time.Before(since) {
			continue
		}
		for k, v := range c.Params {
			if strings.HasPrefix(k, "TagSpecification.") && v == h.pool {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

func (h *harness) nodeEvents(node, reason string) int {
	list, err := h.cloud.KubeClient.CoreV1().Events("").List(h.ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += int(max(e.Count, 1))
	}
	return n
}

func (h *harness) queueEmpty() (bool, string) {
	v, inflight, delayed := h.sim.SQS().Depth(h.qName)
	return v+inflight+delayed == 0, fmt.Sprintf("queue: %d visible, %d in flight, %d delayed", v, inflight, delayed)
}

func (h *harness) dlqDepth() int {
	v, inflight, delayed := h.sim.SQS().Depth(h.dlqName)
	return v + inflight + delayed
}

// waitGone waits for the claim to be tombstoned and its node deleted.
func (h *harness) waitGone(cl *apis.NodeClaim, node string) {
	h.t.Helper()
	h.eventually("interrupted claim terminated and node deleted", 90*time.Second, func() (bool, string) {
		if _, err := h.store.GetNodeClaim(h.ctx, cl.Name); !errors.Is(err, store.ErrNotFound) {
			return false, fmt.Sprintf("claim %s still there (%v)", cl.Name, err)
		}
		if _, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, node, metav1.GetOptions{}); err == nil {
			return false, "node " + node + " still there"
		}
		return true, ""
	})
}

// watchTaint reports when the node first carries the disrupted taint (the
// API server's view, from a watch started now).
func (h *harness) watchTaint(node string) (wait func() time.Time) {
	h.t.Helper()
	return cloudtest.WatchTaint(h.ctx, h.t, h.cloud.KubeClient, node, apis.DisruptedTaintKey, 30*time.Second)
}

// spotWarning is the envelope EC2 sends through EventBridge.
func spotWarning(id, instanceID, region string) string {
	return fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":%q,"region":%q,"resources":["arn:aws:ec2:%s:123456789012:instance/%s"],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		id, time.Now().UTC().Format(time.RFC3339), region, region, instanceID, instanceID)
}

// Scenario 3: a spot interruption of a node with 8 pods. The simulator's
// spot reclaim emits the warning to EventBridge, the rule delivers it to
// the interruption queue, the handler marks the offering unavailable,
// launches the replacement at once, taints and starts the drain; the
// lifecycle finishes the drain within the PDB; the pods end up on the
// replacement long before the two-minute reclaim.
func TestSpotInterruptionReplacesBeforeDeadline(t *testing.T) {
	h := newHarness(t)
	cl, node := h.deploy(8, 6)
	if cl.Labels[apis.CapacityTypeLabelKey] != apis.CapacityTypeSpot {
		t.Fatalf("initial node is %s, want spot", cl.Labels[apis.CapacityTypeLabelKey])
	}
	stopPDB := h.watchPDB()

	tainted := h.watchTaint(node.Name)
	reclaimed := time.Now()
	if err := h.sim.ReclaimSpot(cl.Status.InstanceID); err != nil {
		t.Fatal(err)
	}
	var b batch
	h.eventually("spot warning handled", 30*time.Second, func() (bool, string) {
		bs := h.handled("EC2 Spot Instance Interruption Warning")
		if len(bs) == 0 {
			return false, "not yet"
		}
		b = bs[0]
		return true, ""
	})
	if b.err != nil || len(b.resp.BatchItemFailures) != 0 {
		t.Fatalf("handler: %v %+v", b.err, b.resp)
	}
	fleets := h.fleetCallsSince(reclaimed)
	if len(fleets) != 1 {
		t.Fatalf("want 1 replacement CreateFleet, got %d", len(fleets))
	}
	n, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == apis.DisruptedTaintKey }) || !n.Spec.Unschedulable {
		t.Fatalf("node %s not cordoned and tainted after the handler returned: unschedulable=%v taints=%v", n.Name, n.Spec.Unschedulable, n.Spec.Taints)
	}
	// The speed target (< 2 s) is BenchmarkInterruptionResponse's; this
	// test only reports the figure of its run.
	toFleet := fleets[0].Time.Sub(b.received)
	toTaint := tainted().Sub(b.received)
	t.Logf("FIGURE interruption: SQS message received -> replacement CreateFleet sent %s; -> node tainted (watch) %s; -> handler returned (first evictions sent) %s; reclaim -> CreateFleet %s (deadline 2m)",
		toFleet.Round(time.Millisecond), toTaint.Round(time.Millisecond), b.returned.Sub(b.received).Round(time.Millisecond),
		fleets[0].Time.Sub(reclaimed).Round(time.Millisecond))
	for _, line := range strings.Split(h.logs.String(), "\n") {
		if strings.Contains(line, `"interruption handled"`) || strings.Contains(line, `"provisioner run"`) {
			t.Log(line)
		}
	}

	// The interrupted spot offering is in the shared ICE set.
	off, err := h.store.UnavailableOfferings(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for k := range off {
		if k.InstanceType == cl.Labels[catalog.LabelInstanceType] && k.Zone == cl.Labels[catalog.LabelTopologyZone] && k.CapacityType == apis.CapacityTypeSpot {
			found = true
		}
	}
	if !found {
		t.Errorf("ICE set %v lacks the interrupted offering", off)
	}

	// The pods move to the replacement, within the PDB, before the deadline.
	repl := h.waitRunningOn(8, node.Name)
	h.waitGone(cl, node.Name)
	took := time.Since(reclaimed)
	if took >= 2*time.Minute {
		t.Errorf("pods rescheduled %s after the warning, past the 2-minute deadline", took)
	}
	if got := stopPDB(); got < 6 {
		t.Errorf("PDB violated: only %d healthy pods at one point (minAvailable 6)", got)
	}
	claims, err := h.store.ListNodeClaims(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 || claims[0].Status.ProviderID != repl.Spec.ProviderID {
		t.Fatalf("want exactly the replacement claim, got %d claims", len(claims))
	}
	r := claims[0]
	if r.Labels[catalog.LabelInstanceType] == cl.Labels[catalog.LabelInstanceType] && r.Labels[catalog.LabelTopologyZone] == cl.Labels[catalog.LabelTopologyZone] &&
		r.Labels[apis.CapacityTypeLabelKey] == apis.CapacityTypeSpot {
		t.Errorf("replacement launched into the interrupted spot offering %s/%s", r.Labels[catalog.LabelInstanceType], r.Labels[catalog.LabelTopologyZone])
	}
	if got := h.nodeEvents(node.Name, interruption.ReasonSpotInterrupted); got != 1 {
		t.Errorf("%d SpotInterrupted events on the node, want 1", got)
	}
	if h.dlqDepth() != 0 {
		t.Errorf("DLQ has %d messages", h.dlqDepth())
	}
	t.Logf("pods rescheduled on %s (%s %s %s) %s after the reclaim", repl.Name, r.Labels[catalog.LabelInstanceType],
		r.Labels[catalog.LabelTopologyZone], r.Labels[apis.CapacityTypeLabelKey], took.Round(time.Millisecond))
	if !strings.Contains(h.logs.String(), `"karpenter_interruption_received_messages_total"`) {
		t.Errorf("no interruption message metric in the logs")
	}
}

// Scenario 6: the same interruption message delivered three times (twice
// together, once after the first was handled) is one drain and one
// replacement.
func TestDuplicateMessagesOneDrainOneReplacement(t *testing.T) {
	h := newHarness(t)
	cl, node := h.deploy(4, 3)
	stopPDB := h.watchPDB()
	body := spotWarning("dup-1", cl.Status.InstanceID, h.cloud.Region)
	start := time.Now()
	for range 2 {
		if _, err := h.sim.SQS().Send(h.qName, body, 0); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually("both deliveries handled", 30*time.Second, func() (bool, string) {
		n := 0
		for _, b := range h.handled(`"dup-1"`) {
			for _, r := range b.records {
				if strings.Contains(r.Body, `"dup-1"`) && b.err == nil && len(b.resp.BatchItemFailures) == 0 {
					n++
				}
			}
		}
		return n == 2, fmt.Sprintf("%d/2 handled", n)
	})
	cur, err := h.store.GetNodeClaim(h.ctx, cl.Name)
	if err != nil {
		t.Fatal(err)
	}
	mark := cur.DeletionTimestamp
	if _, err := h.sim.SQS().Send(h.qName, body, 0); err != nil {
		t.Fatal(err)
	}
	h.eventually("third delivery handled", 30*time.Second, func() (bool, string) {
		n := 0
		for _, b := range h.handled(`"dup-1"`) {
			for _, r := range b.records {
				if strings.Contains(r.Body, `"dup-1"`) {
					n++
				}
			}
		}
		return n == 3, fmt.Sprintf("%d/3 handled", n)
	})
	if cur, err := h.store.GetNodeClaim(h.ctx, cl.Name); err == nil && !cur.DeletionTimestamp.Equal(mark) {
		t.Errorf("deletion mark moved from %v to %v", mark, cur.DeletionTimestamp)
	}
	repl := h.waitRunningOn(4, node.Name)
	h.waitGone(cl, node.Name)
	if got := stopPDB(); got < 3 {
		t.Errorf("PDB violated: only %d healthy pods at one point (minAvailable 3)", got)
	}
	if n := len(h.fleetCallsSince(start)); n != 1 {
		t.Errorf("%d replacement CreateFleet calls, want 1", n)
	}
	claims, err := h.store.ListNodeClaims(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != 1 || claims[0].Status.ProviderID != repl.Spec.ProviderID {
		t.Errorf("want exactly one replacement claim, got %d", len(claims))
	}
	for reason, want := range map[string]int{interruption.ReasonSpotInterrupted: 1, "Disrupting": 1} {
		if got := h.nodeEvents(node.Name, reason); got != want {
			t.Errorf("%d %s events on the interrupted node, want %d", got, reason, want)
		}
	}
	if h.dlqDepth() != 0 {
		t.Errorf("DLQ has %d messages", h.dlqDepth())
	}
}

// Malformed messages reach the DLQ after maxReceiveCount receives, each
// reported with its message ID; messages for instances nodewright does not
// own are acknowledged and touch nothing.
func TestMalformedToDLQAndUnownedUntouched(t *testing.T) {
	h := newHarness(t)
	// A node nodewright does not own (no claim in this table).
	foreign := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign-" + h.pool, Labels: map[string]string{"nodewright.io/test": h.pool}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///" + h.cloud.Region + "a/i-0f0f0f0f0f0f0f0f0"},
	}
	if _, err := h.cloud.KubeClient.CoreV1().Nodes().Create(h.ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.cloud.KubeClient.CoreV1().Nodes().Delete(context.Background(), foreign.Name, metav1.DeleteOptions{})
	})
	start := time.Now()
	malformedID, err := h.sim.SQS().Send(h.qName, `{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{}}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	notJSONID, err := h.sim.SQS().Send(h.qName, `not json at all`, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		spotWarning("foreign-1", "i-0f0f0f0f0f0f0f0f0", h.cloud.Region),
		`{"version":"0","id":"foreign-2","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0f0f0f0f0f0f0f0f0","state":"terminated"}}`,
		`{"version":"0","id":"foreign-3","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-0f0f0f0f0f0f0f0f0"}]}}`,
	} {
		if _, err := h.sim.SQS().Send(h.qName, body, 0); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually("malformed messages in the DLQ, queue drained", 60*time.Second, func() (bool, string) {
		if ok, why := h.queueEmpty(); !ok {
			return false, why
		}
		return h.dlqDepth() == 2, fmt.Sprintf("DLQ depth %d", h.dlqDepth())
	})
	// Each malformed message was tried maxReceiveCount times, not more.
	for _, id := range []string{malformedID, notJSONID} {
		tries := 0
		h.mu.Lock()
		for _, b := range h.batches {
			for _, r := range b.records {
				if r.MessageId == id {
					tries++
					if !slices.ContainsFunc(b.resp.BatchItemFailures, func(f events.SQSBatchItemFailure) bool { return f.ItemIdentifier == id }) {
						t.Errorf("malformed message %s not reported as a batch item failure", id)
					}
				}
			}
		}
		h.mu.Unlock()
		if tries != maxReceiveCount {
			t.Errorf("malformed message %s handled %d times, want %d", id, tries, maxReceiveCount)
		}
		if !strings.Contains(h.logs.String(), `"message-id":"`+id+`"`) {
			t.Errorf("no log line names malformed message %s", id)
		}
	}
	// Unowned: acknowledged at once, nothing touched.
	n, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, foreign.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("foreign node: %v", err)
	}
	if n.Spec.Unschedulable || len(n.Spec.Taints) != 0 {
		t.Errorf("foreign node touched: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if c := h.fleetCallsSince(start); len(c) != 0 {
		t.Errorf("%d CreateFleet calls for unowned instances", len(c))
	}
	if c := h.sim.Calls("ec2", "TerminateInstances"); slices.ContainsFunc(c, func(c awssim.Call) bool { return !c.Time.Before(start) }) {
		t.Errorf("TerminateInstances called for an unowned instance")
	}
	if off, err := h.store.UnavailableOfferings(h.ctx); err != nil || len(off) != 0 {
		t.Errorf("ICE set changed for an unowned instance: %v %v", off, err)
	}
	for _, id := range []string{"foreign-1", "foreign-2", "foreign-3"} {
		for _, b := range h.handled(`"` + id + `"`) {
			for _, r := range b.records {
				if strings.Contains(r.Body, id) && slices.ContainsFunc(b.resp.BatchItemFailures, func(f events.SQSBatchItemFailure) bool { return f.ItemIdentifier == r.MessageId }) {
					t.Errorf("unowned message %s reported as a failure", id)
				}
			}
		}
	}
}

// Rebalance recommendations: under ignore (the default) acknowledged with
// an event only; under replace the replacement is launched first, then the
// node drained.
func TestRebalanceIgnoreThenReplace(t *testing.T) {
	h := newHarness(t)
	cl, node := h.deploy(3, 2)
	start := time.Now()
	if err := h.sim.RecommendRebalance(cl.Status.InstanceID); err != nil {
		t.Fatal(err)
	}
	h.eventually("rebalance handled (ignore)", 30*time.Second, func() (bool, string) {
		return len(h.handled("EC2 Instance Rebalance Recommendation")) == 1, "not yet"
	})
	if ok, why := h.queueEmpty(); !ok {
		t.Errorf("ignored rebalance not acknowledged: %s", why)
	}
	n, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable || slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == apis.DisruptedTaintKey }) {
		t.Errorf("rebalance (ignore) touched the node: %v %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	cur, err := h.store.GetNodeClaim(h.ctx, cl.Name)
	if err != nil || cur.Deleting() || cur.IsTrue(apis.ConditionDisrupting) {
		t.Errorf("rebalance (ignore) changed the claim: %v deleting=%v", err, cur != nil && cur.Deleting())
	}
	if c := h.fleetCallsSince(start); len(c) != 0 {
		t.Errorf("rebalance (ignore) launched %d instances", len(c))
	}
	if got := h.nodeEvents(node.Name, interruption.ReasonRebalance); got != 1 {
		t.Errorf("%d rebalance events on the node, want 1", got)
	}

	// Switch the function to replace.
	h.setHandler(h.newApp(interruption.RebalanceReplace))
	start = time.Now()
	if err := h.sim.RecommendRebalance(cl.Status.InstanceID); err != nil {
		t.Fatal(err)
	}
	h.eventually("rebalance handled (replace)", 30*time.Second, func() (bool, string) {
		return len(h.handled("EC2 Instance Rebalance Recommendation")) == 2, "not yet"
	})
	fleets := h.fleetCallsSince(start)
	if len(fleets) != 1 {
		t.Fatalf("rebalance (replace): %d CreateFleet calls, want 1", len(fleets))
	}
	cur, err = h.store.GetNodeClaim(h.ctx, cl.Name)
	if err == nil {
		if !cur.Deleting() || cur.DeletionReason() != apis.DeletionReasonInterrupted {
			t.Errorf("rebalance (replace): claim not marked for deletion: %v", cur.DeletionTimestamp)
		}
		if cur.DeletionTimestamp.Time.Before(fleets[0].Time.Truncate(time.Second)) {
			t.Errorf("drain decided (%v) before the replacement was launched (%v)", cur.DeletionTimestamp, fleets[0].Time)
		}
	}
	h.waitRunningOn(3, node.Name)
	h.waitGone(cl, node.Name)
}

// An AWS Health scheduled change drains the instance onto a replacement
// (within the PDB); a "stopped" state change then removes the
// replacement's claim and Node at once (nothing left to drain), terminates
// the stopped instance and launches capacity for its pods.
func TestScheduledChangeDrainsThenStoppedCleansUp(t *testing.T) {
	h := newHarness(t)
	cl, node := h.deploy(2, 1)
	stopPDB := h.watchPDB()
	start := time.Now()
	if err := h.sim.ScheduleMaintenance(cl.Status.InstanceID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	h.eventually("scheduled change handled", 30*time.Second, func() (bool, string) {
		return len(h.handled("AWS Health Event")) == 1, "not yet"
	})
	if n := len(h.fleetCallsSince(start)); n != 1 {
		t.Fatalf("%d replacement CreateFleet calls, want 1", n)
	}
	repl := h.waitRunningOn(2, node.Name)
	h.waitGone(cl, node.Name)
	if got := stopPDB(); got < 1 {
		t.Errorf("PDB violated: %d healthy pods at one point (minAvailable 1)", got)
	}
	if got := h.nodeEvents(node.Name, interruption.ReasonInstanceUnhealthy); got != 1 {
		t.Errorf("%d InstanceUnhealthy events, want 1", got)
	}

	claims, err := h.store.ListNodeClaims(h.ctx)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claims %d %v", len(claims), err)
	}
	rc := claims[0]
	start = time.Now()
	body := fmt.Sprintf(`{"version":"0","id":"stop-1","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","region":%q,"detail":{"instance-id":%q,"state":"stopped"}}`,
		h.cloud.Region, rc.Status.InstanceID)
	if _, err := h.sim.SQS().Send(h.qName, body, 0); err != nil {
		t.Fatal(err)
	}
	var b batch
	h.eventually("stopped handled", 30*time.Second, func() (bool, string) {
		bs := h.handled(`"stop-1"`)
		if len(bs) == 0 {
			return false, "not yet"
		}
		b = bs[0]
		return true, ""
	})
	if b.err != nil || len(b.resp.BatchItemFailures) != 0 {
		t.Fatalf("handler: %v %+v", b.err, b.resp)
	}
	// At once: when the handler returned, the claim and node were gone.
	if _, err := h.store.GetNodeClaim(h.ctx, rc.Name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("claim of the stopped instance kept: %v", err)
	}
	if _, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, repl.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("node of the stopped instance kept")
	}
	terminated := false
	for _, c := range h.sim.Calls("ec2", "TerminateInstances") {
		if !c.Time.Before(start) && c.ErrorCode == "" {
			for _, v := range c.Params {
				if v == rc.Status.InstanceID {
					terminated = true
				}
			}
		}
	}
	if !terminated {
		t.Errorf("stopped instance %s not terminated", rc.Status.InstanceID)
	}
	if n := len(h.fleetCallsSince(start)); n != 1 {
		t.Errorf("%d CreateFleet calls for the stopped node's pods, want 1", n)
	}
	h.waitRunningOn(2, repl.Name)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("pods of the stopped node took %s to run again", took)
	} else {
		t.Logf("pods of the stopped node running again after %s", took.Round(time.Millisecond))
	}
	if h.dlqDepth() != 0 {
		t.Errorf("DLQ has %d messages", h.dlqDepth())
	}
}

// BenchmarkInterruptionResponse measures the interruption target: SQS
// message received -> replacement CreateFleet sent, and -> node cordoned
// and tainted (the handler returns once the first termination step has
// tainted the node). Each iteration interrupts the node the pods run on;
// the replacement of one iteration is the victim of the next.
//
//	go test ./internal/interruption/ -run '^$' -bench Interruption -benchtime 5x
func BenchmarkInterruptionResponse(b *testing.B) {
	h := newHarness(b)
	h.deploy(4, 3)
	var fleetSum, taintSum, fleetMax, taintMax time.Duration
	b.ResetTimer()
	b.StopTimer()
	for i := range b.N {
		claims, err := h.store.ListNodeClaims(h.ctx)
		if err != nil || len(claims) != 1 {
			b.Fatalf("want one claim before iteration %d, got %d (%v)", i, len(claims), err)
		}
		cl := claims[0]
		id := fmt.Sprintf("bench-%d-%d", i, time.Now().UnixNano())
		tainted := h.watchTaint(cl.Status.NodeName)
		start := time.Now()
		b.StartTimer()
		if _, err := h.sim.SQS().Send(h.qName, spotWarning(id, cl.Status.InstanceID, h.cloud.Region), 0); err != nil {
			b.Fatal(err)
		}
		var bt batch
		h.eventually("warning handled", 30*time.Second, func() (bool, string) {
			bs := h.handled(`"` + id + `"`)
			if len(bs) == 0 {
				return false, "not yet"
			}
			bt = bs[0]
			return true, ""
		})
		b.StopTimer()
		if bt.err != nil || len(bt.resp.BatchItemFailures) != 0 {
			b.Fatalf("handler: %v %+v", bt.err, bt.resp)
		}
		fleets := h.fleetCallsSince(start)
		if len(fleets) != 1 {
			b.Fatalf("iteration %d: %d CreateFleet calls, want 1", i, len(fleets))
		}
		at := tainted()
		if at.IsZero() {
			b.Fatalf("iteration %d: node %s never tainted", i, cl.Status.NodeName)
		}
		toFleet, toTaint := fleets[0].Time.Sub(bt.received), at.Sub(bt.received)
		fleetSum += toFleet
		taintSum += toTaint
		fleetMax, taintMax = max(fleetMax, toFleet), max(taintMax, toTaint)
		h.waitRunningOn(4, cl.Status.NodeName)
		h.waitGone(cl, cl.Status.NodeName)
	}
	n := float64(b.N)
	b.ReportMetric(float64(fleetSum.Milliseconds())/n, "ms-to-createfleet")
	b.ReportMetric(float64(taintSum.Milliseconds())/n, "ms-to-taint")
	b.ReportMetric(float64(fleetMax.Milliseconds()), "max-ms-to-createfleet")
	b.ReportMetric(float64(taintMax.Milliseconds()), "max-ms-to-taint")
}

// failOnce fails the first termination step, as a function killed between
// the replacement launch and the drain would leave things.
type failOnce struct {
	interruption.Terminator
	mu     sync.Mutex
	failed bool
}

func (f *failOnce) Step(ctx context.Context, cl *apis.NodeClaim) (termination.Result, error) {
	f.mu.Lock()
	first := !f.failed
	f.failed = true
	f.mu.Unlock()
	if first {
		return termination.Result{}, errors.New("injected: function killed before the drain")
	}
	return f.Terminator.Step(ctx, cl)
}

// A handling that dies after the replacement was launched but before the
// drain started is completed by the redelivery: still one replacement, one
// drain, the message acknowledged in the end (not in the DLQ).
func TestRedeliveryAfterFailureCompletesWithoutSecondLaunch(t *testing.T) {
	h := newHarness(t)
	cl, node := h.deploy(3, 2)
	d, err := h.app.InterruptionDeps()
	if err != nil {
		t.Fatal(err)
	}
	d.Terminator = &failOnce{Terminator: d.Terminator}
	hd, err := interruption.NewHandler(d)
	if err != nil {
		t.Fatal(err)
	}
	h.handler.Store(hd)
	start := time.Now()
	if err := h.sim.ReclaimSpot(cl.Status.InstanceID); err != nil {
		t.Fatal(err)
	}
	h.eventually("warning delivered twice (failure, then success)", 30*time.Second, func() (bool, string) {
		bs := h.handled("EC2 Spot Instance Interruption Warning")
		if len(bs) < 2 {
			return false, fmt.Sprintf("%d deliveries", len(bs))
		}
		if len(bs[0].resp.BatchItemFailures) != 1 || len(bs[1].resp.BatchItemFailures) != 0 {
			t.Fatalf("want a failure then a success, got %+v then %+v", bs[0].resp, bs[1].resp)
		}
		return true, ""
	})
	if n := len(h.fleetCallsSince(start)); n != 1 {
		t.Errorf("%d replacement CreateFleet calls after the redelivery, want 1", n)
	}
	h.waitRunningOn(3, node.Name)
	h.waitGone(cl, node.Name)
	if n := len(h.fleetCallsSince(start)); n != 1 {
		t.Errorf("%d CreateFleet calls in all, want 1", n)
	}
	if got := h.nodeEvents(node.Name, "Disrupting"); got != 1 {
		t.Errorf("%d Disrupting events, want 1 drain", got)
	}
	h.eventually("queue drained", 10*time.Second, h.queueEmpty)
	if h.dlqDepth() != 0 {
		t.Errorf("DLQ has %d messages", h.dlqDepth())
	}
}
