package disruption_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
)

// One local cloud for the package, with a fast simulated cloud.
var shared = localcloud.NewShared(localcloud.Options{
	Sim: awssim.Options{
		Delays: awssim.Delays{
			Pending: 200 * time.Millisecond, NodeRegistration: 300 * time.Millisecond,
			ShuttingDown: 300 * time.Millisecond, SpotInterruption: 2 * time.Minute,
		},
	},
})

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// poolYAML: %[1]s pool name, %[2]s instance types, %[3]s disruption
// block; the EC2NodeClass "default" is cloudtest.NodeClassYAML.
const poolYAML = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %[1]s
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
      - key: karpenter.sh/capacity-type
        operator: In
        values: ["on-demand"]
      - key: node.kubernetes.io/instance-type
        operator: In
        values: [%[2]s]
  disruption:
%[3]s
`

var seq atomic.Int64

type env struct {
	t     *testing.T
	ctx   context.Context
	cloud *localcloud.Cloud
	cs    kubernetes.Interface
	kc    *kube.Client
	st    *store.Store
	p     *nwaws.Provider
	sqs   *sqs.Client
	// admin creates queues (the stack's deployment, not a function).
	admin *sqs.Client
	// stack holds the env's function roles.
	stack *localcloud.Stack
	work  string
	cfg   *apis.Config
	cat   *catalog.Catalog
	ns    string
	pool  string

	prov *provisioning.Provisioner
	life *lifecycle.Handler
	dis  *disruption.Controller

	lastTick time.Time
	lastDis  time.Time
	// results of every disruption pass, in order
	results []*disruption.Result
}

func newEnv(t *testing.T, types, disruptionBlock string) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end disruption scenarios need the local cloud (skipped in -short)")
	}
	cloud := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	cloudtest.SetEnv(t, cloud)
	n := seq.Add(1)
	e := &env{t: t, ctx: ctx, cloud: cloud, cs: cloud.KubeClient, pool: fmt.Sprintf("dis%d-%d", time.Now().UnixNano()%1e5, n)}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("disruption-%d-%d", time.Now().UnixNano()%1e6, n)
	db := store.NewDynamoDBClient(awsCfg)
	cloudtest.NewTable(ctx, t, db, table)
	e.admin = sqs.NewFromConfig(awsCfg)
	e.work = cloudtest.CreateQueue(ctx, t, e.admin, fmt.Sprintf("dwork-%d-%d", time.Now().UnixNano()%1e6, n), nil)
	// Every controller runs as the stack's controller role.
	e.stack = cloudtest.Deploy(t, cloud, localcloud.StackResources{Table: table, WorkQueue: e.work})
	ctrl := cloudtest.RoleConfig(ctx, t, e.stack.Controller)
	if e.st, err = store.New(store.NewDynamoDBClient(ctrl), table); err != nil {
		t.Fatal(err)
	}
	clients, _, err := nwaws.NewClients(ctx, cloud.Region, config.WithCredentialsProvider(e.stack.Controller))
	if err != nil {
		t.Fatal(err)
	}
	if e.p, err = nwaws.New(nwaws.Options{ClusterName: cloud.ClusterName, Region: cloud.Region, Owner: cloudtest.Owner(cloud, table), DiscoveryTTL: time.Second}, clients, nil); err != nil {
		t.Fatal(err)
	}
	e.sqs = sqs.NewFromConfig(ctrl)
	if e.kc, err = kube.NewClient(rest.CopyConfig(cloud.ControllerREST), nil); err != nil {
		t.Fatal(err)
	}
	e.cfg = cloudtest.LoadConfig(t, fmt.Sprintf(poolYAML, e.pool, types, disruptionBlock)+cloudtest.NodeClassYAML("default", cloud.ClusterName))
	if e.cat, err = e.p.Catalog(ctx, nil); err != nil {
		t.Fatalf("catalog: %v", err)
	}
	e.ns = cloud.NewNamespace(t)

	wq := queue.New(e.sqs, e.work)
	requeue := func(ctx context.Context, m queue.Message, d time.Duration) error { return wq.Send(ctx, m, d) }
	e.prov, err = provisioning.New(provisioning.Deps{
		Store: e.st, Cluster: e.kc, Launcher: e.p, Config: e.cfg,
		Catalog:     provisioning.ProviderCatalog(e.p, nil, cloud.Region, nil),
		Unavailable: provisioning.ProviderICE(e.p),
		Requeue:     requeue,
		Settings:    provisioning.Settings{BatchIdle: 200 * time.Millisecond, BatchMax: 2 * time.Second, RegistrationCheck: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e.life, err = lifecycle.NewHandler(lifecycle.Deps{Store: e.st, Cluster: e.kc, Cloud: e.p, Config: e.cfg, Requeue: requeue,
		Settings: lifecycle.Settings{Poll: 500 * time.Millisecond}}); err != nil {
		t.Fatal(err)
	}
	e.dis, err = disruption.New(disruption.Deps{
		Store: e.st, Cluster: e.kc, Cloud: e.p, Config: e.cfg,
		Catalog:     provisioning.ProviderCatalog(e.p, nil, cloud.Region, nil),
		Unavailable: provisioning.ProviderICE(e.p),
		Provision:   e.prov.Pass(),
		Requeue:     requeue,
		Settings:    disruption.Settings{ValidationDelay: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		insts, err := e.p.ListClusterInstances(context.Background())
		if err != nil {
			return
		}
		for _, i := range insts {
			if i.NodePool == e.pool {
				_ = e.p.Terminate(context.Background(), i.ID)
			}
		}
	})
	return e
}

func (e *env) deployment(name string, replicas int32, cpu string, pdbMaxUnavailable *int32) {
	e.t.Helper()
	no := false
	grace := int64(0)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{apis.NodePoolLabelKey: e.pool},
					AutomountServiceAccountToken:  &no,
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
				},
			},
		},
	}
	if _, err := e.cs.AppsV1().Deployments(e.ns).Create(e.ctx, dep, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	if pdbMaxUnavailable != nil {
		mu := intstr.FromInt32(*pdbMaxUnavailable)
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &mu, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
		}
		if _, err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Create(e.ctx, pdb, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) scale(name string, replicas int) {
	e.t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if _, err := e.cs.AppsV1().Deployments(e.ns).Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// pods counts a deployment's pods: all, Running (not terminating) and
// unschedulable.
func (e *env) pods(app string) (total, running, pending int) {
	e.t.Helper()
	list, err := e.cs.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range list.Items {
		total++
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running++
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				pending++
			}
		}
	}
	return
}

// watchRunning follows a deployment's pods through a watch and reports the
// fewest Running (not terminating) pods seen at any event since it started:
// every transition is observed, not only those between test steps.
func (e *env) watchRunning(app string) (fewest func() int, stop func()) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.ctx)
	var mu sync.Mutex
	low := -1
	running := map[string]bool{}
	count := func() int {
		n := 0
		for _, r := range running {
			if r {
				n++
			}
		}
		return n
	}
	list, err := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, p := range list.Items {
		running[p.Name] = p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
	}
	low = count()
	rv := list.ResourceVersion
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			w, err := e.cs.CoreV1().Pods(e.ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=" + app, ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				mu.Lock()
				switch ev.Type {
				case watch.Deleted:
					delete(running, p.Name)
				case watch.Added, watch.Modified:
					running[p.Name] = p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil
				}
				if ev.Type != watch.Bookmark {
					low = min(low, count())
				}
				mu.Unlock()
			}
		}
	}()
	return func() int { mu.Lock(); defer mu.Unlock(); return low }, func() { cancel(); <-done }
}

// step advances the world once, as AWS would: the lifecycle consumes its
// work queue and ticks every 5 s, the provisioner runs when pods are
// unschedulable, and (when disrupt) the disruption function runs every 2 s.
func (e *env) step(disrupt bool, apps ...string) {
	e.t.Helper()
	e.pumpOnce()
	if time.Since(e.lastTick) > 5*time.Second {
		if _, err := e.life.Handle(e.ctx, json.RawMessage(`{"detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)); err != nil {
			e.t.Logf("lifecycle pass: %v", err)
		}
		e.lastTick = time.Now()
	}
	for _, a := range apps {
		if _, _, pending := e.pods(a); pending > 0 {
			if _, err := e.prov.Run(e.ctx, provisioning.Trigger{Source: provisioning.TriggerManual}); err != nil {
				e.t.Logf("provisioner run: %v", err)
			}
			break
		}
	}
	if disrupt && time.Since(e.lastDis) > 2*time.Second {
		res, err := e.dis.Run(e.ctx)
		if err != nil {
			e.t.Fatalf("disruption pass: %v", err)
		}
		e.lastDis = time.Now()
		e.results = append(e.results, res)
		if res.Decided || res.Executed || res.Done || res.Dropped != "" {
			e.t.Logf("disruption: phase=%s decided=%v executed=%v done=%v dropped=%q waiting=%q: %s", res.Phase, res.Decided, res.Executed, res.Done, res.Dropped, res.Waiting, res.Message)
		}
	}
}

func (e *env) pumpOnce() {
	e.t.Helper()
	out, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: &e.work, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(out.Messages) == 0 {
		return
	}
	ev := events.SQSEvent{}
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, Body: *m.Body, ReceiptHandle: *m.ReceiptHandle})
	}
	raw, _ := json.Marshal(ev)
	res, err := e.life.Handle(e.ctx, raw)
	if err != nil {
		e.t.Logf("lifecycle batch: %v", err)
		return
	}
	failed := map[string]bool{}
	for _, f := range res.(events.SQSEventResponse).BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range out.Messages {
		if failed[*m.MessageId] {
			continue
		}
		if _, err := e.sqs.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &e.work, ReceiptHandle: m.ReceiptHandle}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// until steps the world until done holds (checking inv after every step).
func (e *env) until(what string, timeout time.Duration, disrupt bool, apps []string, done func() bool, inv func()) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not reached within %v", what, timeout)
		}
		e.step(disrupt, apps...)
		if inv != nil {
			inv()
		}
	}
}

func (e *env) claims() []*apis.NodeClaim {
	e.t.Helper()
	cls, err := e.st.ListNodeClaims(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return cls
}

// cost is what the live claims cost per hour.
func (e *env) cost() (float64, int) {
	sum := 0.0
	cls := e.claims()
	for _, cl := range cls {
		it, ok := e.cat.Get(cl.Labels[catalog.LabelInstanceType])
		if !ok {
			continue
		}
		if o, ok := it.Offering(cl.Labels[catalog.LabelTopologyZone], cl.Labels[apis.CapacityTypeLabelKey]); ok {
			sum += o.Price
		}
	}
	return sum, len(cls)
}

func (e *env) busy() (deleting, disrupting int) {
	for _, cl := range e.claims() {
		switch {
		case cl.Deleting():
			deleting++
		case cl.IsTrue(apis.ConditionDisrupting):
			disrupting++
		}
	}
	return
}

func (e *env) settled() bool {
	del, dis := e.busy()
	if del+dis > 0 {
		return false
	}
	if _, err := e.st.GetKV(e.ctx, disruption.CommandKey); !errors.Is(err, store.ErrNotFound) {
		return false
	}
	return true
}

// nodeEvents returns the messages of events with reason on nodes.
func (e *env) nodeEvents(reason string) map[string][]string {
	e.t.Helper()
	list, err := e.cs.CoreV1().Events("").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,reason=" + reason})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, ev := range list.Items {
		out[ev.InvolvedObject.Name] = append(out[ev.InvolvedObject.Name], ev.Message)
	}
	return out
}

func (e *env) launchAll(apps ...string) {
	e.t.Helper()
	e.until("pods running", 3*time.Minute, false, apps, func() bool {
		for _, a := range apps {
			list, err := e.cs.AppsV1().Deployments(e.ns).Get(e.ctx, a, metav1.GetOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
			if _, running, _ := e.pods(a); int32(running) != *list.Spec.Replicas {
				return false
			}
		}
		return true
	}, nil)
}

func int32p(v int32) *int32 { return &v }

// Scenario 1: 30 pods scaled down to 5 -> nodes consolidated, the cost
// drops, and the deployment never has more pods unavailable than its PDB
// allows.
func TestScenario1ScaleDownConsolidates(t *testing.T) {
	e := newEnv(t, `"m5.large", "m5.xlarge"`, "    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 5s\n    budgets:\n    - nodes: \"50%\"")
	e.deployment("inflate", 30, "450m", int32p(1))
	start := time.Now()
	e.launchAll("inflate")
	costBefore, nodesBefore := e.cost()
	t.Logf("30 pods running on %d nodes ($%.3f/h) after %v", nodesBefore, costBefore, time.Since(start).Round(time.Second))

	e.scale("inflate", 5)
	e.until("scaled down", time.Minute, false, nil, func() bool { total, running, _ := e.pods("inflate"); return total == 5 && running == 5 }, nil)
	_, afterScale := e.cost()
	t1 := time.Now()
	fewest, stop := e.watchRunning("inflate")
	defer stop()
	quiet, seen := 0, 0
	e.until("consolidation settles", 5*time.Minute, true, []string{"inflate"}, func() bool {
		// consolidateAfter (5 s) runs from the pod events the lifecycle
		// records on its 5 s ticks; after that, three passes in a row with
		// nothing in progress and nothing decided mean consolidation is done.
		if time.Since(t1) < 15*time.Second || !e.settled() {
			quiet, seen = 0, len(e.results)
			return false
		}
		for _, r := range e.results[seen:] {
			if r.Decided {
				quiet = 0
			} else {
				quiet++
			}
		}
		seen = len(e.results)
		return quiet >= 3
	}, nil)
	minRunning := fewest()
	costAfter, nodesAfter := e.cost()
	t.Logf("scenario 1: %d nodes $%.3f/h -> %d nodes $%.3f/h in %v; fewest Running pods during consolidation %d (PDB maxUnavailable 1)",
		afterScale, costBefore, nodesAfter, costAfter, time.Since(t1).Round(time.Second), minRunning)
	if costAfter >= costBefore || nodesAfter >= nodesBefore {
		t.Errorf("no consolidation: %d nodes $%.3f/h -> %d nodes $%.3f/h", nodesBefore, costBefore, nodesAfter, costAfter)
	}
	if minRunning < 4 {
		t.Errorf("only %d of 5 pods Running at one point; the PDB allows 1 unavailable", minRunning)
	}
	if _, running, _ := e.pods("inflate"); running != 5 {
		t.Errorf("%d pods Running at the end, want 5", running)
	}
	disrupting := e.nodeEvents(disruption.ReasonDisrupting)
	explained := 0
	for node, msgs := range disrupting {
		for _, m := range msgs {
			if strings.Contains(m, "saves $") || strings.HasPrefix(m, "Emptiness") {
				explained++
				t.Logf("event on %s: %s", node, m)
			}
		}
	}
	if explained == 0 {
		t.Error("no Disrupting event explains a consolidation")
	}
	// Stable: nothing more to do.
	res, err := e.dis.Run(e.ctx)
	if err != nil || res.Decided {
		t.Errorf("consolidated cluster not stable: %+v %v", res, err)
	}
}

// Scenario 2: a new AMI release -> every node is replaced, never more than
// the budget (1 node) at a time, pods Running throughout.
func TestScenario2AMIDriftReplacesEveryNode(t *testing.T) {
	e := newEnv(t, `"m5.large"`, "    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: Never\n    budgets:\n    - nodes: \"1\"")
	e.deployment("web", 3, "1200m", int32p(1))
	e.launchAll("web")
	before := e.claims()
	oldAMI := map[string]bool{}
	for _, cl := range before {
		oldAMI[cl.Status.ImageID] = true
	}
	if len(before) != 3 {
		t.Fatalf("%d nodes for 3 pods of 1.2 CPU on m5.large", len(before))
	}
	imgs, err := e.cloud.AWS.EC2().PublishAMI("al2023")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("published %d new AMIs; nodes run %v", len(imgs), oldAMI)
	t1 := time.Now()
	fewest, stop := e.watchRunning("web")
	defer stop()
	maxBusy := 0
	e.until("every node replaced", 6*time.Minute, true, []string{"web"}, func() bool {
		cls := e.claims()
		if len(cls) != 3 || !e.settled() {
			return false
		}
		for _, cl := range cls {
			if oldAMI[cl.Status.ImageID] || !cl.IsTrue(apis.ConditionInitialized) {
				return false
			}
		}
		_, running, _ := e.pods("web")
		return running == 3
	}, func() {
		del, dis := e.busy()
		maxBusy = max(maxBusy, del+dis)
	})
	minRunning := fewest()
	t.Logf("scenario 2: 3 nodes replaced in %v; at most %d disrupted at once; fewest Running pods %d", time.Since(t1).Round(time.Second), maxBusy, minRunning)
	if maxBusy > 1 {
		t.Errorf("%d nodes disrupted at once; the budget allows 1", maxBusy)
	}
	if minRunning < 2 {
		t.Errorf("only %d of 3 pods Running at one point (PDB maxUnavailable 1)", minRunning)
	}
	for _, cl := range before {
		ts, err := e.st.GetTombstone(e.ctx, cl.Name)
		if err != nil || ts.Claim.DeletionReason() != apis.DeletionReasonDrifted {
			t.Errorf("old claim %s: tombstone %+v %v", cl.Name, ts, err)
		}
	}
}

// Scenario 4: a PDB with maxUnavailable 0 -> consolidation never drains its
// node and says why in an event; without the PDB the same node is replaced
// (so the protection, not a lack of savings, is what held it).
func TestScenario4PDBBlocksConsolidation(t *testing.T) {
	e := newEnv(t, `"m5.large", "m5.xlarge", "m5.2xlarge"`, "    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 5s\n    budgets:\n    - nodes: \"100%\"")
	e.deployment("guarded", 1, "500m", int32p(0))
	e.deployment("filler", 6, "1", nil)
	e.launchAll("guarded", "filler")
	e.scale("filler", 0)
	e.until("filler gone", time.Minute, false, nil, func() bool { total, _, _ := e.pods("filler"); return total == 0 }, nil)
	list, err := e.cs.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=guarded"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("guarded pod: %v %v", list, err)
	}
	node := list.Items[0].Spec.NodeName
	var claim string
	for _, cl := range e.claims() {
		if cl.Status.NodeName == node {
			claim = cl.Name
		}
	}
	t.Logf("guarded pod on node %s (claim %s)", node, claim)
	deadline := time.Now().Add(40 * time.Second)
	e.until("passes over the protected node", time.Minute, true, []string{"guarded"}, func() bool { return time.Now().After(deadline) }, func() {
		cl, err := e.st.GetNodeClaim(e.ctx, claim)
		if err != nil {
			t.Fatalf("claim %s: %v", claim, err)
		}
		if cl.Deleting() || cl.IsTrue(apis.ConditionDisrupting) {
			t.Fatalf("node %s protected by a PDB with maxUnavailable 0 was disrupted", node)
		}
	})
	var why string
	for _, m := range e.nodeEvents(disruption.ReasonBlocked)[node] {
		if strings.Contains(m, "PodDisruptionBudget") {
			why = m
		}
	}
	if why == "" {
		t.Fatalf("no DisruptionBlocked event naming the PDB on node %s: %v", node, e.nodeEvents(disruption.ReasonBlocked)[node])
	}
	t.Logf("event: %s", why)

	// Lift the PDB: now the same node is consolidated (unless it already is
	// the cheapest type and alone, when there is nothing to save).
	if cl, err := e.st.GetNodeClaim(e.ctx, claim); err == nil && cl.Labels[catalog.LabelInstanceType] == "m5.large" && len(e.claims()) == 1 {
		t.Logf("guarded node is a lone m5.large: nothing to consolidate without the PDB either")
		return
	}
	if err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Delete(e.ctx, "guarded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.until("node consolidated once the PDB is gone", 3*time.Minute, true, []string{"guarded"}, func() bool {
		_, err := e.st.GetNodeClaim(e.ctx, claim)
		return errors.Is(err, store.ErrNotFound)
	}, nil)
}

// Scenario 5: a budget of 0 nodes with a schedule covering now -> no
// voluntary disruption at all, and the budget is named in events.
func TestScenario5ZeroBudgetBlocksEverything(t *testing.T) {
	e := newEnv(t, `"m5.large", "m5.xlarge", "m5.2xlarge"`, "    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: 5s\n    budgets:\n    - nodes: \"100%\"\n    - nodes: \"0\"\n      schedule: \"* * * * *\"\n      duration: 1h")
	e.deployment("filler", 8, "1", nil)
	e.launchAll("filler")
	before := e.claims()
	e.scale("filler", 1)
	e.until("scaled down", time.Minute, false, nil, func() bool { total, _, _ := e.pods("filler"); return total == 1 }, nil)
	deadline := time.Now().Add(30 * time.Second)
	e.until("passes under a zero budget", time.Minute, true, []string{"filler"}, func() bool { return time.Now().After(deadline) }, func() {
		if del, dis := e.busy(); del+dis > 0 {
			t.Fatalf("%d nodes deleting, %d disrupting under a zero budget", del, dis)
		}
	})
	if len(e.claims()) != len(before) {
		t.Fatalf("%d claims before, %d after", len(before), len(e.claims()))
	}
	blocked := 0
	for _, msgs := range e.nodeEvents(disruption.ReasonBlocked) {
		for _, m := range msgs {
			if strings.Contains(m, "no disruption budget") && strings.Contains(m, e.pool) {
				blocked++
			}
		}
	}
	if blocked == 0 {
		t.Fatal("no DisruptionBlocked event names the budget")
	}
	decided := 0
	for _, r := range e.results {
		if r.Decided {
			decided++
		}
	}
	if decided > 0 {
		t.Fatalf("%d commands decided under a zero budget", decided)
	}
	t.Logf("scenario 5: %d nodes kept over %d passes; %d budget events", len(before), len(e.results), blocked)
}
