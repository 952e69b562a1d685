package lifecycle_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// One local cloud for the package. Nodes of terminated instances are kept
// (no cloud-controller deletion) so the lifecycle's own node GC is what
// removes them.
var shared = localcloud.NewShared(localcloud.Options{
	Sim: awssim.Options{
		KeepTerminatedNodes: true,
		Delays: awssim.Delays{
			Pending: 200 * time.Millisecond, NodeRegistration: 200 * time.Millisecond,
			ShuttingDown: 300 * time.Millisecond, SpotInterruption: 2 * time.Minute,
		},
	},
})

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

const poolYAML = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %[1]s
spec:
  template:
    metadata:
      labels:
        team: payments
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
      - key: karpenter.sh/capacity-type
        operator: In
        values: ["on-demand"]
      taints:
      - key: dedicated
        value: payments
        effect: NoSchedule
      startupTaints:
      - key: example.com/agent
        effect: NoSchedule
      expireAfter: 720h
      terminationGracePeriod: 1h
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5s
    budgets:
    - nodes: "%[2]s"
`

type env struct {
	t      testing.TB
	ctx    context.Context
	cloud  *localcloud.Cloud
	cs     kubernetes.Interface
	kc     *kube.Client
	st     *store.Store
	p      *nwaws.Provider
	ec2    *ec2.Client
	sqs    *sqs.Client
	work   string // work queue URL
	cfg    *apis.Config
	clock  *cloudtest.Clock
	cat    *catalog.Catalog
	ns     string
	budget string
	// owner is the env's stack owner value (its table's ARN).
	owner string
	// stack holds the env's function roles (the controller's policy is
	// the synthesized template's).
	stack *localcloud.Stack

	configYAML string
	// id makes claim names unique across tests and -count runs: a claim
	// name determines its CreateFleet ClientToken, and a reused token
	// returns the earlier (terminated) instance.
	id int64
}

var seq atomic.Int64

type envOpt func(*env)

func withBudget(nodes string) envOpt { return func(e *env) { e.budget = nodes } }

// withConfig replaces the NodePool YAML (the EC2NodeClass "default" is
// added).
func withConfig(yaml string) envOpt { return func(e *env) { e.configYAML = yaml } }

func newEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	cloud := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	cloudtest.SetEnv(t, cloud)
	e := &env{t: t, ctx: ctx, cloud: cloud, cs: cloud.KubeClient, clock: &cloudtest.Clock{}, budget: "10", id: seq.Add(1)}
	for _, o := range opts {
		o(e)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := seq.Add(1)
	table := fmt.Sprintf("lifecycle-%d-%d", time.Now().UnixNano()%1e6, n)
	db := store.NewDynamoDBClient(awsCfg)
	cloudtest.NewTable(ctx, t, db, table)
	e.owner = cloudtest.Owner(cloud, table)
	workName := fmt.Sprintf("work-%d-%d", time.Now().UnixNano()%1e6, n)
	e.work = cloudtest.CreateQueue(ctx, t, sqs.NewFromConfig(awsCfg), workName, nil)
	// Everything the lifecycle does runs as the stack's controller role.
	e.stack = cloudtest.Deploy(t, cloud, localcloud.StackResources{Table: table, WorkQueue: workName})
	ctrl := cloudtest.RoleConfig(ctx, t, e.stack.Controller)
	if e.st, err = store.New(store.NewDynamoDBClient(ctrl), table, store.WithClock(e.clock.Now)); err != nil {
		t.Fatal(err)
	}
	clients, _, err := nwaws.NewClients(ctx, cloud.Region, config.WithCredentialsProvider(e.stack.Controller))
	if err != nil {
		t.Fatal(err)
	}
	if e.p, err = nwaws.New(nwaws.Options{ClusterName: cloud.ClusterName, Region: cloud.Region, Owner: e.owner, Now: e.clock.Now}, clients, nil); err != nil {
		t.Fatal(err)
	}
	e.ec2 = ec2.NewFromConfig(awsCfg)
	e.sqs = sqs.NewFromConfig(ctrl)
	if e.kc, err = kube.NewClient(rest.CopyConfig(cloud.ControllerREST), nil); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(poolYAML, "default", e.budget)
	if e.configYAML != "" {
		doc = e.configYAML
	}
	e.cfg = cloudtest.LoadConfig(t, doc+cloudtest.NodeClassYAML("default", cloud.ClusterName))
	if e.cat, err = e.p.Catalog(ctx, nil); err != nil {
		t.Fatalf("catalog: %v", err)
	}
	e.ns = cloud.NewNamespace(t)
	return e
}

// deps are the lifecycle's adapters over the real servers; requeues go to
// the real (simulated) SQS work queue.
func (e *env) deps() lifecycle.Deps {
	wq := queue.New(e.sqs, e.work)
	return lifecycle.Deps{
		Store: e.st, Cluster: e.kc, Cloud: e.p, Config: e.cfg, Now: e.clock.Now,
		Requeue: func(ctx context.Context, msg queue.Message, d time.Duration) error { return wq.Send(ctx, msg, d) },
	}
}

func (e *env) handler(d lifecycle.Deps) *lifecycle.Handler {
	h, err := lifecycle.NewHandler(d)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

// launchClaim creates a claim the way the provisioner does and launches
// it; the name gets the env's unique suffix.
func (e *env) launchClaim(name string) *apis.NodeClaim {
	e.t.Helper()
	name = fmt.Sprintf("%s-%d", name, e.id)
	np := e.cfg.NodePool("default")
	tmpl := np.Spec.Template
	cl := &apis.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(e.clock.Now()), Labels: map[string]string{
			apis.NodePoolLabelKey: np.Name, apis.NodeClassLabelKey: "default", "team": "payments",
		}},
		Spec: apis.NodeClaimSpec{
			Requirements: []apis.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
				{Key: apis.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
			},
			Taints: tmpl.Spec.Taints, StartupTaints: tmpl.Spec.StartupTaints, NodeClassRef: tmpl.Spec.NodeClassRef,
			ExpireAfter: tmpl.Spec.ExpireAfter, TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
		},
	}
	if err := e.st.CreateNodeClaim(e.ctx, cl); err != nil {
		e.t.Fatalf("create claim: %v", err)
	}
	it, ok := e.cat.Get("m5.large")
	if !ok {
		e.t.Fatal("m5.large not in the catalog")
	}
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: cl, NodeClass: e.cfg.NodeClass("default"), InstanceTypes: []*catalog.InstanceType{it}})
	if err != nil {
		e.t.Fatalf("launch: %v", err)
	}
	e.t.Cleanup(func() { _ = e.p.Terminate(context.Background(), inst.ID) })
	out, err := e.st.MutateNodeClaim(e.ctx, name, func(c *apis.NodeClaim) error {
		inst.Record(c, metav1.NewTime(e.clock.Now()))
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// reconcileUntil reconciles a claim until cond holds.
func (e *env) reconcileUntil(c *lifecycle.Controller, name, what string, cond func(lifecycle.Outcome, *apis.NodeClaim) bool) *apis.NodeClaim {
	e.t.Helper()
	var last lifecycle.Outcome
	var lastErr error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		last, lastErr = c.Reconcile(e.ctx, name)
		cl, err := e.st.GetNodeClaim(e.ctx, name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			e.t.Fatal(err)
		}
		if lastErr == nil && cond(last, cl) {
			return cl
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("nodeclaim %s never %s (last outcome %+v, error %v)", name, what, last, lastErr)
	return nil
}

// initialized drives a launched claim through registration (removing the
// startup taint as a node agent would) to initialization.
func (e *env) initialized(c *lifecycle.Controller, name string) (*apis.NodeClaim, *corev1.Node) {
	e.t.Helper()
	cl := e.reconcileUntil(c, name, "registered", func(_ lifecycle.Outcome, cl *apis.NodeClaim) bool {
		return cl != nil && cl.IsTrue(apis.ConditionRegistered)
	})
	if _, err := e.kc.RemoveTaints(e.ctx, cl.Status.NodeName, "example.com/agent", ""); err != nil {
		e.t.Fatal(err)
	}
	cl = e.reconcileUntil(c, name, "initialized", func(_ lifecycle.Outcome, cl *apis.NodeClaim) bool {
		return cl != nil && cl.IsTrue(apis.ConditionInitialized)
	})
	n, err := e.cs.CoreV1().Nodes().Get(e.ctx, cl.Status.NodeName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cl, n
}

func (e *env) runningPod(name, node string, mutate func(*corev1.Pod)) *corev1.Pod {
	e.t.Helper()
	grace := int64(0)
	no := false
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: &grace, AutomountServiceAccountToken: &no,
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	p, err := e.cs.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err = e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		e.t.Fatalf("pod %s not Running: %v", name, err)
	}
	return p
}

// pump consumes the work queue into the handler (as Lambda's SQS event
// source does) until done reports true.
func (e *env) pump(h *lifecycle.Handler, what string, done func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			e.t.Fatalf("work queue never got %s", what)
		}
		e.pumpOnce(h)
	}
}

// pumpOnce receives one batch (waiting up to a second) and hands it to the
// handler; it reports how many messages it handled.
func (e *env) pumpOnce(h *lifecycle.Handler) int {
	e.t.Helper()
	out, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: &e.work, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(out.Messages) == 0 {
		return 0
	}
	ev := events.SQSEvent{}
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, Body: *m.Body, ReceiptHandle: *m.ReceiptHandle})
	}
	raw, _ := json.Marshal(ev)
	res, err := h.Handle(e.ctx, raw)
	if err != nil {
		e.t.Fatalf("handler: %v", err)
	}
	failed := map[string]bool{}
	for _, f := range res.(events.SQSEventResponse).BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range out.Messages {
		if failed[*m.MessageId] {
			e.t.Errorf("work item %s failed: %s", *m.MessageId, *m.Body)
			continue
		}
		if _, err := e.sqs.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &e.work, ReceiptHandle: m.ReceiptHandle}); err != nil {
			e.t.Fatal(err)
		}
	}
	return len(out.Messages)
}

// tick delivers an EventBridge schedule event to the handler.
func (e *env) tick(h *lifecycle.Handler) lifecycle.PassResult {
	e.t.Helper()
	res, err := h.Handle(e.ctx, json.RawMessage(`{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`))
	if err != nil {
		e.t.Fatalf("scheduled pass: %v", err)
	}
	return res.(lifecycle.PassResult)
}

func (e *env) send(claim string) {
	e.t.Helper()
	if err := queue.New(e.sqs, e.work).Send(e.ctx, queue.Message{Kind: queue.KindLifecycle, Subject: claim, Reason: "test"}, 0); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) mark(name, reason string) {
	e.t.Helper()
	if _, newly, err := termination.Mark(e.ctx, e.st, name, reason, "test", e.clock.Now()); err != nil || !newly {
		e.t.Fatalf("mark %s: newly=%v %v", name, newly, err)
	}
	// A second decision keeps the first mark.
	if cl, newly, err := termination.Mark(e.ctx, e.st, name, apis.DeletionReasonEmpty, "again", e.clock.Now().Add(time.Hour)); err != nil || newly || cl.DeletionReason() != reason {
		e.t.Fatalf("second mark of %s: newly=%v reason=%q %v", name, newly, cl.DeletionReason(), err)
	}
}

func (e *env) gone(name string) bool {
	_, err := e.st.GetNodeClaim(e.ctx, name)
	return errors.Is(err, store.ErrNotFound)
}

func (e *env) terminateCalls(id string) int {
	n := 0
	for _, c := range e.cloud.AWS.Calls("ec2", "TerminateInstances") {
		for k, v := range c.Params {
			if strings.HasPrefix(k, "InstanceId.") && v == id && c.ErrorCode == "" {
				n++
			}
		}
	}
	return n
}

func (e *env) nodeExists(name string) bool {
	_, err := e.cs.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	return err == nil
}

func (e *env) instanceState(id string) string {
	inst, _, ok := e.cloud.AWS.EC2().Instance(id)
	if !ok || inst.State == nil {
		return "unknown"
	}
	return string(inst.State.Name)
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// A launched claim registers (labels and taints synced, the unregistered
// taint removed) and initializes only once its startup taint is gone; the
// node's allocatable is learned for the instance type.
func TestRegistrationAndInitialization(t *testing.T) {
	e := newEnv(t)
	c, err := lifecycle.New(e.deps())
	if err != nil {
		t.Fatal(err)
	}
	cl := e.launchClaim("reg-a")
	cl = e.reconcileUntil(c, cl.Name, "registered", func(o lifecycle.Outcome, cl *apis.NodeClaim) bool {
		return cl.IsTrue(apis.ConditionRegistered)
	})
	n, err := e.cs.CoreV1().Nodes().Get(e.ctx, cl.Status.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.ProviderID != cl.Status.ProviderID {
		t.Errorf("node providerID %s, claim %s", n.Spec.ProviderID, cl.Status.ProviderID)
	}
	for k, v := range map[string]string{
		apis.NodePoolLabelKey: "default", "team": "payments", apis.NodeRegisteredLabel: "true",
		corev1.LabelInstanceTypeStable: "m5.large", apis.CapacityTypeLabelKey: "on-demand", apis.NodeClassLabelKey: "default",
	} {
		if n.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if hasTaint(n, apis.UnregisteredTaintKey) {
		t.Error("unregistered taint still on the node")
	}
	if !hasTaint(n, "dedicated") || !hasTaint(n, "example.com/agent") {
		t.Errorf("pool taint or startup taint missing: %v", n.Spec.Taints)
	}
	// Ready, but the startup taint holds initialization back.
	for range 5 {
		if _, err := c.Reconcile(e.ctx, cl.Name); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if cl, _ = e.st.GetNodeClaim(e.ctx, cl.Name); cl.IsTrue(apis.ConditionInitialized) {
		t.Fatal("initialized while the startup taint is present")
	}
	if _, err := e.kc.RemoveTaints(e.ctx, n.Name, "example.com/agent", ""); err != nil {
		t.Fatal(err)
	}
	cl = e.reconcileUntil(c, cl.Name, "initialized", func(o lifecycle.Outcome, cl *apis.NodeClaim) bool {
		return cl.IsTrue(apis.ConditionInitialized)
	})
	n, _ = e.cs.CoreV1().Nodes().Get(e.ctx, cl.Status.NodeName, metav1.GetOptions{})
	if n.Labels[apis.NodeInitializedLabel] != "true" {
		t.Error("node not labelled initialized")
	}
	if !cl.Status.Allocatable.Cpu().Equal(*n.Status.Allocatable.Cpu()) {
		t.Errorf("claim allocatable %v, node %v", cl.Status.Allocatable, n.Status.Allocatable)
	}
	obs, err := e.st.ObservedCapacities(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range obs {
		found = found || (o.InstanceType == "m5.large" && o.NodeName == n.Name && o.Allocatable.Memory().Equal(*n.Status.Allocatable.Memory()))
	}
	if !found {
		t.Errorf("no observed capacity for m5.large from node %s: %+v", n.Name, obs)
	}
}

// A claim marked for deletion drains its node through the Eviction API in
// priority order, is held by a PodDisruptionBudget until the budget
// allows, then terminates the instance, deletes the Node and is tombstoned;
// the work queue carries the drain (no blocking waits).
func TestTerminationDrainHonoursPDB(t *testing.T) {
	e := newEnv(t)
	d := e.deps()
	c, err := lifecycle.New(d)
	if err != nil {
		t.Fatal(err)
	}
	cl := e.launchClaim("drain-a")
	cl, node := e.initialized(c, cl.Name)
	id := cl.Status.InstanceID

	e.runningPod("web-1", node.Name, nil)
	e.runningPod("web-2", node.Name, nil)
	// A critical pod is evicted only after the non-critical ones.
	e.runningPod("critical", node.Name, func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "critical"}
		p.Spec.PriorityClassName = "system-cluster-critical"
	})
	// A pod tolerating the disrupted taint is neither evicted nor waited for.
	e.runningPod("tolerant", node.Name, func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "tolerant"}
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: apis.DisruptedTaintKey, Operator: corev1.TolerationOpExists})
	})
	two := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	if _, err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Create(e.ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPDB(t, e, "web", 2, 0)

	e.mark(cl.Name, apis.DeletionReasonManual)
	for range 3 {
		out, err := c.Reconcile(e.ctx, cl.Name)
		if err != nil {
			t.Fatal(err)
		}
		if out.Action != lifecycle.ActionTerminating || out.RequeueAfter < termination.MinRequeue || out.RequeueAfter > termination.MaxRequeue {
			t.Fatalf("blocked drain: outcome %+v", out)
		}
	}
	n, _ := e.cs.CoreV1().Nodes().Get(e.ctx, node.Name, metav1.GetOptions{})
	if !hasTaint(n, apis.DisruptedTaintKey) {
		t.Error("node not tainted karpenter.sh/disrupted")
	}
	for _, name := range []string{"web-1", "web-2", "critical"} {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil || p.DeletionTimestamp != nil {
			t.Errorf("pod %s evicted while the PDB forbids it / before its group (err %v)", name, err)
		}
	}
	if e.terminateCalls(id) != 0 {
		t.Fatal("instance terminated while pods were still waiting")
	}
	cur, _ := e.st.GetNodeClaim(e.ctx, cl.Name)
	if c := cur.Condition(termination.ConditionDrained); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "blocked by PodDisruptionBudgets") {
		t.Errorf("Drained condition %+v", c)
	}
	if !hasEvent(e, node.Name, termination.ReasonFailedDraining) {
		t.Error("no FailedDraining event on the node")
	}

	// The budget allows it now: the work queue finishes the job.
	zero := intstr.FromInt32(0)
	got, err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Get(e.ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.MinAvailable = &zero
	if _, err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPDB(t, e, "web", 2, 2)
	start := time.Now()
	e.send(cl.Name)
	e.pump(e.handler(d), "the claim terminated", func() bool { return e.gone(cl.Name) })
	t.Logf("drain after the PDB allowed it: %v", time.Since(start).Round(time.Millisecond))

	for _, name := range []string{"web-1", "web-2", "critical"} {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		if err == nil && p.DeletionTimestamp == nil {
			t.Errorf("pod %s not evicted", name)
		}
	}
	if n := e.terminateCalls(id); n != 1 {
		t.Errorf("TerminateInstances for %s called %d times, want 1", id, n)
	}
	if s := e.instanceState(id); s != "shutting-down" && s != "terminated" {
		t.Errorf("instance %s is %s", id, s)
	}
	if e.nodeExists(node.Name) {
		t.Error("node still exists")
	}
	ts, err := e.st.GetTombstone(e.ctx, cl.Name)
	if err != nil {
		t.Fatalf("no tombstone: %v", err)
	}
	for _, typ := range []string{termination.ConditionDrained, termination.ConditionVolumesDetached, termination.ConditionInstanceTerminating} {
		if !ts.Claim.IsTrue(typ) {
			t.Errorf("tombstone condition %s not True: %+v", typ, ts.Claim.Condition(typ))
		}
	}
	if ts.Claim.DeletionReason() != apis.DeletionReasonManual {
		t.Errorf("tombstone reason %q", ts.Claim.DeletionReason())
	}
}

func waitPDB(t *testing.T, e *env, name string, expected, allowed int32) {
	t.Helper()
	var p *policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods == expected && p.Status.DisruptionsAllowed == allowed, nil
	})
	if err != nil {
		t.Fatalf("PDB %s never reached disruptionsAllowed=%d: %v (status %+v)", name, allowed, err, p.Status)
	}
}

func hasEvent(e *env, node, reason string) bool {
	evs, err := e.cs.CoreV1().Events("").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
	if err != nil {
		return false
	}
	for _, ev := range evs.Items {
		if ev.Reason == reason {
			return true
		}
	}
	return false
}

// faultyCloud fails Terminate while failTerminate is set; faultyCluster
// fails DeleteNode while failDelete is set: a function dying at that line.
type faultyCloud struct {
	*nwaws.Provider
	failTerminate atomic.Bool
}

func (f *faultyCloud) Terminate(ctx context.Context, ids ...string) error {
	if f.failTerminate.Load() {
		return errors.New("injected crash before TerminateInstances")
	}
	return f.Provider.Terminate(ctx, ids...)
}

type faultyCluster struct {
	*kube.Client
	failDelete atomic.Bool
}

func (f *faultyCluster) DeleteNode(ctx context.Context, name string, uid types.UID) error {
	if f.failDelete.Load() {
		return errors.New("injected crash before DeleteNode")
	}
	return f.Client.DeleteNode(ctx, name, uid)
}

// Killed before terminating the instance, then before deleting the Node:
// each re-run resumes from what the world shows, the instance is terminated
// exactly once and the claim ends tombstoned.
func TestTerminationResumesAfterCrashes(t *testing.T) {
	e := newEnv(t)
	cloud := &faultyCloud{Provider: e.p}
	cluster := &faultyCluster{Client: e.kc}
	d := e.deps()
	d.Cloud, d.Cluster = cloud, cluster
	c, err := lifecycle.New(d)
	if err != nil {
		t.Fatal(err)
	}
	cl := e.launchClaim("crash-a")
	cl, node := e.initialized(c, cl.Name)
	e.runningPod("web-1", node.Name, nil)
	e.mark(cl.Name, apis.DeletionReasonDrifted)

	cloud.failTerminate.Store(true)
	var lastErr error
	for range 50 {
		if _, lastErr = c.Reconcile(e.ctx, cl.Name); lastErr != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lastErr == nil || !strings.Contains(lastErr.Error(), "injected crash before TerminateInstances") {
		t.Fatalf("drain never reached the terminate step: %v", lastErr)
	}
	if _, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "web-1", metav1.GetOptions{}); err == nil {
		if p, _ := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "web-1", metav1.GetOptions{}); p.DeletionTimestamp == nil {
			t.Fatal("terminate step reached before the pod was evicted")
		}
	}
	cloud.failTerminate.Store(false)
	cluster.failDelete.Store(true)
	// A fresh controller: nothing carried over in memory.
	c2, err := lifecycle.New(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Reconcile(e.ctx, cl.Name); err == nil || !strings.Contains(err.Error(), "injected crash before DeleteNode") {
		t.Fatalf("expected the DeleteNode crash, got %v", err)
	}
	if e.terminateCalls(cl.Status.InstanceID) != 1 {
		t.Fatalf("TerminateInstances calls = %d, want 1", e.terminateCalls(cl.Status.InstanceID))
	}
	cluster.failDelete.Store(false)
	c3, err := lifecycle.New(d)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c3.Reconcile(e.ctx, cl.Name)
	if err != nil || !out.Done {
		t.Fatalf("re-run after crashes: %+v %v", out, err)
	}
	if n := e.terminateCalls(cl.Status.InstanceID); n != 1 {
		t.Errorf("TerminateInstances calls = %d after the re-run, want exactly 1", n)
	}
	if e.nodeExists(node.Name) || !e.gone(cl.Name) {
		t.Error("node or claim left behind")
	}
	// A further run (a duplicate message) is a no-op.
	if out, err := c3.Reconcile(e.ctx, cl.Name); err != nil || out.Action != lifecycle.ActionNotFound {
		t.Errorf("duplicate work item: %+v %v", out, err)
	}
}

// rawInstance launches an instance this cluster owns (ownership tag, a
// claim tag) whose kubelet never registers: its launch template has no
// user data.
func (e *env) rawInstance(claimTag string) string {
	e.t.Helper()
	param, err := ssm.NewFromConfig(mustCfg(e)).GetParameter(e.ctx, &ssm.GetParameterInput{
		Name: sdkaws.String("/aws/service/eks/optimized-ami/" + e.k8sMinor() + "/amazon-linux-2023/x86_64/standard/recommended/image_id"),
	})
	if err != nil {
		e.t.Fatalf("AMI parameter: %v", err)
	}
	lt := fmt.Sprintf("raw-%d", time.Now().UnixNano())
	if _, err := e.ec2.CreateLaunchTemplate(e.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: &lt,
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: param.Parameter.Value,
			UserData: sdkaws.String(base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\n/etc/eks/bootstrap.sh " + e.cloud.ClusterName + " --kubelet-extra-args '--node-labels=broken'\n")))},
	}); err != nil {
		e.t.Fatal(err)
	}
	tags := []ec2types.Tag{
		{Key: sdkaws.String(nwaws.ClusterTagKey(e.cloud.ClusterName)), Value: sdkaws.String("owned")},
		{Key: sdkaws.String(nwaws.TagManagedBy), Value: sdkaws.String(nwaws.ManagedBy)},
		{Key: sdkaws.String(nwaws.TagOwner), Value: sdkaws.String(e.owner)},
		{Key: sdkaws.String(nwaws.TagNodePool), Value: sdkaws.String("default")},
		{Key: sdkaws.String(nwaws.TagNodeClaim), Value: sdkaws.String(claimTag)},
	}
	out, err := e.ec2.CreateFleet(e.ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: &lt, Version: sdkaws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, AvailabilityZone: sdkaws.String(e.cloud.Region + "a")}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: sdkaws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications:           []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags}},
	})
	if err != nil || len(out.Instances) == 0 || len(out.Instances[0].InstanceIds) == 0 {
		e.t.Fatalf("raw CreateFleet: %v %+v", err, out)
	}
	id := out.Instances[0].InstanceIds[0]
	e.t.Cleanup(func() { _ = e.p.Terminate(context.Background(), id) })
	// Its kubelet fails on the broken bootstrap: no Node ever appears.
	err = wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		for _, ev := range e.cloud.AWS.KubeletEvents() {
			if ev.InstanceID == id && ev.Action == "failed" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("kubelet of %s did not fail to register: %v", id, err)
	}
	return id
}

func mustCfg(e *env) sdkaws.Config {
	cfg, err := config.LoadDefaultConfig(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return cfg
}

func (e *env) k8sMinor() string {
	info, err := e.p.Cluster(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return info.Version
}

// Liveness: a claim never launched is deleted after 5 minutes; a launched
// claim whose node never registers is deleted after 15 minutes and its
// instance terminated.
func TestLiveness(t *testing.T) {
	e := newEnv(t)
	c, err := lifecycle.New(e.deps())
	if err != nil {
		t.Fatal(err)
	}
	// Never launched.
	never := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "live-unlaunched", CreationTimestamp: metav1.NewTime(e.clock.Now()),
		Labels: map[string]string{apis.NodePoolLabelKey: "default"}}}
	if err := e.st.CreateNodeClaim(e.ctx, never); err != nil {
		t.Fatal(err)
	}
	// Launched, but its kubelet never registers.
	id := e.rawInstance(fmt.Sprintf("live-unregistered-%d", e.id))
	inst, err := e.p.GetInstance(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	unreg := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("live-unregistered-%d", e.id), CreationTimestamp: metav1.NewTime(e.clock.Now()),
		Labels: map[string]string{apis.NodePoolLabelKey: "default"}}}
	inst.Record(unreg, metav1.NewTime(e.clock.Now()))
	if err := e.st.CreateNodeClaim(e.ctx, unreg); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{never.Name, unreg.Name} {
		out, err := c.Reconcile(e.ctx, name)
		if err != nil || out.Action != lifecycle.ActionWaiting || out.RequeueAfter <= 0 {
			t.Fatalf("%s before its timeout: %+v %v", name, out, err)
		}
	}
	e.clock.Advance(5*time.Minute + time.Second)
	out, err := c.Reconcile(e.ctx, never.Name)
	if err != nil || !out.Done || out.Action != lifecycle.ActionLiveness {
		t.Fatalf("unlaunched claim after 5 min: %+v %v", out, err)
	}
	if out, err := c.Reconcile(e.ctx, unreg.Name); err != nil || out.Done {
		t.Fatalf("unregistered claim deleted before 15 min: %+v %v", out, err)
	}
	if e.terminateCalls(id) != 0 {
		t.Fatal("instance terminated before the registration TTL")
	}
	e.clock.Advance(10 * time.Minute)
	out, err = c.Reconcile(e.ctx, unreg.Name)
	if err != nil || !out.Done || out.Action != lifecycle.ActionLiveness {
		t.Fatalf("unregistered claim after 15 min: %+v %v", out, err)
	}
	if e.terminateCalls(id) != 1 {
		t.Errorf("instance %s not terminated", id)
	}
	ts, err := e.st.GetTombstone(e.ctx, unreg.Name)
	if err != nil || ts.Claim.DeletionReason() != lifecycle.ReasonRegistrationTimeout {
		t.Errorf("tombstone: %+v %v", ts, err)
	}
}

// Garbage collection both ways: an instance without a claim is terminated
// after the grace period; a claim whose instance vanished is removed with
// its Node; the Node of a terminated instance without a claim is deleted.
func TestGarbageCollection(t *testing.T) {
	// Budget 0: the healthy empty node must not go for emptiness either.
	e := newEnv(t, withBudget("0"))
	d := e.deps()
	c, err := lifecycle.New(d)
	if err != nil {
		t.Fatal(err)
	}
	h := e.handler(d)
	schedule := func() lifecycle.PassResult { return e.tick(h) }

	orphan := e.rawInstance(fmt.Sprintf("gc-orphan-%d", e.id))
	vanish := e.launchClaim("gc-vanish")
	vanish, vanishNode := e.initialized(c, vanish.Name)
	stray := e.launchClaim("gc-stray")
	stray, strayNode := e.initialized(c, stray.Name)
	keep := e.launchClaim("gc-keep")
	keep, keepNode := e.initialized(c, keep.Name)

	// Young orphans are left alone (a launch may not have recorded yet).
	res := schedule()
	if contains(res.TerminatedInstances, orphan) {
		t.Fatal("orphan terminated inside the grace period")
	}

	// The vanished claim's instance dies outside nodewright; the stray
	// node's claim record is lost and its instance dies too.
	if err := e.cloud.AWS.EC2().Terminate(vanish.Status.InstanceID, "test"); err != nil {
		t.Fatal(err)
	}
	if err := e.st.DeleteNodeClaim(e.ctx, stray); err != nil {
		t.Fatal(err)
	}
	if err := e.cloud.AWS.EC2().Terminate(stray.Status.InstanceID, "test"); err != nil {
		t.Fatal(err)
	}
	waitState(t, e, vanish.Status.InstanceID, "terminated")
	waitState(t, e, stray.Status.InstanceID, "terminated")

	e.clock.Advance(31 * time.Second)
	res = schedule()
	t.Logf("pass: %+v", res)
	if !contains(res.TerminatedInstances, orphan) {
		t.Errorf("orphan %s not terminated: %v", orphan, res.TerminatedInstances)
	}
	if contains(res.TerminatedInstances, keep.Status.InstanceID) {
		t.Error("a claimed instance was garbage collected")
	}
	if !e.gone(vanish.Name) || e.nodeExists(vanishNode.Name) {
		t.Error("claim of the vanished instance or its node left behind")
	}
	if !contains(res.DeletedNodes, strayNode.Name) || e.nodeExists(strayNode.Name) {
		t.Errorf("node %s of a terminated instance not deleted: %v", strayNode.Name, res.DeletedNodes)
	}
	if e.gone(keep.Name) || !e.nodeExists(keepNode.Name) {
		t.Error("a healthy claim or node was collected")
	}
	if len(res.Errors) > 0 {
		t.Errorf("pass errors: %v", res.Errors)
	}
}

func waitState(t *testing.T, e *env, id, state string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return e.instanceState(id) == state, nil
	})
	if err != nil {
		t.Fatalf("instance %s never %s (is %s)", id, state, e.instanceState(id))
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// An empty node of a WhenEmpty pool is deleted once consolidateAfter has
// passed since its last pod left; daemon-only nodes count as empty;
// do-not-disrupt and a zero budget keep it.
func TestEmptinessScaleDown(t *testing.T) {
	e := newEnv(t)
	d := e.deps()
	c, err := lifecycle.New(d)
	if err != nil {
		t.Fatal(err)
	}
	cl := e.launchClaim("empty-a")
	cl, node := e.initialized(c, cl.Name)
	e.runningPod("web-1", node.Name, nil)
	if out, err := c.Reconcile(e.ctx, cl.Name); err != nil || out.Action != "" {
		t.Fatalf("busy node: %+v %v", out, err)
	}
	e.clock.Advance(time.Minute)
	if out, err := c.Reconcile(e.ctx, cl.Name); err != nil || out.Done {
		t.Fatalf("busy node deleted: %+v %v", out, err)
	}

	if err := e.cs.CoreV1().Pods(e.ns).Delete(e.ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPodGone(t, e, "web-1")
	out, err := c.Reconcile(e.ctx, cl.Name)
	if err != nil || out.Done || out.RequeueAfter <= 0 || out.RequeueAfter > 6*time.Second { // 5s + rounding up to the second
		t.Fatalf("just emptied: %+v %v (want a requeue within consolidateAfter)", out, err)
	}
	cur, _ := e.st.GetNodeClaim(e.ctx, cl.Name)
	if cur.Status.LastPodEventTime.IsZero() {
		t.Fatal("last pod event not recorded")
	}

	// do-not-disrupt on the node keeps it.
	if _, err := e.kc.PatchNodeAnnotations(e.ctx, node.Name, map[string]string{apis.DoNotDisruptAnnotKey: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(6 * time.Second)
	if out, err := c.Reconcile(e.ctx, cl.Name); err != nil || out.Done {
		t.Fatalf("do-not-disrupt node deleted: %+v %v", out, err)
	}
	if _, err := e.kc.PatchNodeAnnotations(e.ctx, node.Name, nil, []string{apis.DoNotDisruptAnnotKey}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.send(cl.Name)
	e.pump(e.handler(d), "the empty node deleted", func() bool { return e.gone(cl.Name) })
	t.Logf("empty node removed %v after its work item", time.Since(start).Round(time.Millisecond))
	ts, err := e.st.GetTombstone(e.ctx, cl.Name)
	if err != nil || ts.Claim.DeletionReason() != apis.DeletionReasonEmpty {
		t.Fatalf("tombstone %+v %v", ts, err)
	}
	if e.nodeExists(node.Name) || e.terminateCalls(cl.Status.InstanceID) != 1 {
		t.Error("node left behind or instance not terminated once")
	}
}

func TestEmptinessRespectsBudget(t *testing.T) {
	e := newEnv(t, withBudget("0"))
	c, err := lifecycle.New(e.deps())
	if err != nil {
		t.Fatal(err)
	}
	cl := e.launchClaim("budget-a")
	cl, node := e.initialized(c, cl.Name)
	e.clock.Advance(time.Minute)
	out, err := c.Reconcile(e.ctx, cl.Name)
	if err != nil || out.Done || out.Action != lifecycle.ActionBudgetBlocks {
		t.Fatalf("budget 0: %+v %v", out, err)
	}
	if !hasEvent(e, node.Name, "DisruptionBlocked") {
		t.Error("no DisruptionBlocked event")
	}
}

// Expiration is forceful: past expireAfter the claim is replaced whatever
// its budget says.
func TestExpiration(t *testing.T) {
	e := newEnv(t, withBudget("0"))
	c, err := lifecycle.New(e.deps())
	if err != nil {
		t.Fatal(err)
	}
	cl := e.launchClaim("expire-a")
	cl, _ = e.initialized(c, cl.Name)
	e.clock.Advance(720*time.Hour + time.Second)
	out, err := c.Reconcile(e.ctx, cl.Name)
	if err != nil || out.Action != lifecycle.ActionExpired {
		t.Fatalf("expired claim: %+v %v", out, err)
	}
	e.reconcileUntil(c, cl.Name, "terminated", func(o lifecycle.Outcome, cl *apis.NodeClaim) bool { return cl == nil })
	ts, err := e.st.GetTombstone(e.ctx, cl.Name)
	if err != nil || ts.Claim.DeletionReason() != apis.DeletionReasonExpired {
		t.Fatalf("tombstone %+v %v", ts, err)
	}
}

func waitPodGone(t *testing.T, e *env, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("pod %s never went away", name)
	}
}

// Malformed work items are reported as batch item failures (so SQS parks
// them in the DLQ), never dropped; unknown events are errors.
func TestHandlerRejectsBadInput(t *testing.T) {
	e := newEnv(t)
	h := e.handler(e.deps())
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "bad-json", Body: "{"},
		{MessageId: "wrong-kind", Body: `{"kind":"provision","sentAt":"2026-11-22T00:00:00Z"}`},
		{MessageId: "no-subject", Body: `{"kind":"lifecycle","sentAt":"2026-11-22T00:00:00Z"}`},
		{MessageId: "gone-claim", Body: `{"kind":"lifecycle","subject":"never-existed","sentAt":"2026-11-22T00:00:00Z"}`},
	}}
	raw, _ := json.Marshal(ev)
	res, err := h.Handle(e.ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, f := range res.(events.SQSEventResponse).BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, id := range []string{"bad-json", "wrong-kind", "no-subject"} {
		if !failed[id] {
			t.Errorf("%s not reported as a failure", id)
		}
	}
	if failed["gone-claim"] {
		t.Error("a message about a deleted claim is done, not a failure")
	}
	if _, err := h.Handle(e.ctx, json.RawMessage(`{"detail-type":"Something Else","source":"x"}`)); err == nil {
		t.Error("unknown event accepted")
	}
}

// A do-not-disrupt pod holds the drain until the claim's
// terminationGracePeriod runs out, then it is deleted; a VolumeAttachment
// holds the instance's termination until it is gone.
func TestDoNotDisruptAndVolumesHoldTermination(t *testing.T) {
	e := newEnv(t)
	c, err := lifecycle.New(e.deps())
	if err != nil {
		t.Fatal(err)
	}
	a := e.launchClaim("hold-dnd")
	b := e.launchClaim("hold-volume")
	a, nodeA := e.initialized(c, a.Name)
	b, nodeB := e.initialized(c, b.Name)

	e.runningPod("web-1", nodeA.Name, nil)
	e.runningPod("guarded", nodeA.Name, func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "guarded"}
		p.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "true"}
	})
	pvName := "pv-" + e.ns
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0123"}},
		},
	}
	if _, err := e.cs.CoreV1().PersistentVolumes().Create(e.ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.cs.CoreV1().PersistentVolumes().Delete(context.Background(), pvName, metav1.DeleteOptions{})
	})
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "va-" + e.ns},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: nodeB.Name,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}},
	}
	if _, err := e.cs.StorageV1().VolumeAttachments().Create(e.ctx, va, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	e.mark(a.Name, apis.DeletionReasonDrifted)
	e.mark(b.Name, apis.DeletionReasonDrifted)
	e.reconcileUntil(c, a.Name, "drained of its ordinary pod", func(o lifecycle.Outcome, _ *apis.NodeClaim) bool {
		_, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "web-1", metav1.GetOptions{})
		return err != nil && o.Action == lifecycle.ActionTerminating
	})
	if p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "guarded", metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
		t.Fatalf("do-not-disrupt pod evicted before the grace period (err %v)", err)
	}
	for range 3 {
		if out, err := c.Reconcile(e.ctx, b.Name); err != nil || out.Done {
			t.Fatalf("claim with an attached volume: %+v %v", out, err)
		}
	}
	cur, _ := e.st.GetNodeClaim(e.ctx, b.Name)
	if cond := cur.Condition(termination.ConditionVolumesDetached); cond == nil || cond.Status != metav1.ConditionFalse || !cur.IsTrue(termination.ConditionDrained) {
		t.Errorf("volume-held claim conditions: %+v", cur.Status.Conditions)
	}
	if e.terminateCalls(b.Status.InstanceID) != 0 || e.terminateCalls(a.Status.InstanceID) != 0 {
		t.Fatal("an instance was terminated while its drain was held")
	}

	// The volume detaches: b finishes.
	if err := e.cs.StorageV1().VolumeAttachments().Delete(e.ctx, va.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.reconcileUntil(c, b.Name, "terminated", func(_ lifecycle.Outcome, cl *apis.NodeClaim) bool { return cl == nil })
	if e.terminateCalls(b.Status.InstanceID) != 1 || e.nodeExists(nodeB.Name) {
		t.Error("volume-held claim did not finish")
	}

	// The grace period (1h) runs out: the guarded pod is deleted and a goes.
	e.clock.Advance(time.Hour + time.Second)
	e.reconcileUntil(c, a.Name, "terminated", func(_ lifecycle.Outcome, cl *apis.NodeClaim) bool { return cl == nil })
	if p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "guarded", metav1.GetOptions{}); err == nil && p.DeletionTimestamp == nil {
		t.Error("do-not-disrupt pod survived the grace period")
	}
	if e.terminateCalls(a.Status.InstanceID) != 1 || e.nodeExists(nodeA.Name) {
		t.Error("grace-period claim did not finish")
	}
}

// Deleting the Node of a registered claim (kubectl delete node) ends the
// claim and terminates its instance, as Karpenter's finalizer does.
func TestDeletedNodeTerminatesItsInstance(t *testing.T) {
	e := newEnv(t, withBudget("0"))
	c, err := lifecycle.New(e.deps())
	if err != nil {
		t.Fatal(err)
	}
	cl := e.launchClaim("nodedel-a")
	cl, node := e.initialized(c, cl.Name)
	if err := e.cs.CoreV1().Nodes().Delete(e.ctx, node.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := c.Reconcile(e.ctx, cl.Name)
	if err != nil || out.Done || out.RequeueAfter <= 0 {
		t.Fatalf("inside the grace period: %+v %v", out, err)
	}
	e.clock.Advance(31 * time.Second)
	out, err = c.Reconcile(e.ctx, cl.Name)
	if err != nil || !out.Done || out.Action != lifecycle.ActionNodeDeleted {
		t.Fatalf("after the grace period: %+v %v", out, err)
	}
	if e.terminateCalls(cl.Status.InstanceID) != 1 {
		t.Error("instance not terminated")
	}
	ts, err := e.st.GetTombstone(e.ctx, cl.Name)
	if err != nil || ts.Claim.DeletionReason() != lifecycle.ReasonNodeDeleted {
		t.Fatalf("tombstone %+v %v", ts, err)
	}
}

// One scheduled pass deletes no more empty nodes of a pool than its budget
// allows, even though each empty node terminates within one step.
func TestEmptinessBudgetAcrossAPass(t *testing.T) {
	e := newEnv(t, withBudget("1"))
	d := e.deps()
	c, err := lifecycle.New(d)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range []string{"pass-a", "pass-b", "pass-c"} {
		names = append(names, e.launchClaim(n).Name)
	}
	for _, n := range names {
		e.initialized(c, n)
	}
	e.clock.Advance(time.Minute)
	res := e.tick(e.handler(d))
	left, err := e.st.ListNodeClaims(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Actions[lifecycle.ActionEmpty] != 1 || len(left) != 2 {
		t.Fatalf("budget 1: pass %+v left %d claims, want exactly one deleted", res, len(left))
	}
	// The next pass may take the next one.
	res = e.tick(e.handler(d))
	if left, _ = e.st.ListNodeClaims(e.ctx); res.Actions[lifecycle.ActionEmpty] != 1 || len(left) != 1 {
		t.Fatalf("second pass %+v left %d claims", res, len(left))
	}
}
