package provisioning_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/app"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// One local cloud for the package, started by the first integration test;
// short simulated delays so instances become Nodes within a second.
var shared = localcloud.NewShared(localcloud.Options{
	ClusterName: "prov",
	Sim: awssim.Options{Delays: awssim.Delays{
		Pending: 200 * time.Millisecond, NodeRegistration: 200 * time.Millisecond,
		ShuttingDown: 500 * time.Millisecond, SpotInterruption: 2 * time.Minute,
	}},
})

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// harness is one test's slice of the shared cloud: its own table, namespace,
// NodePool (named after the test, with a label only its pods select).
type harness struct {
	t      testing.TB
	ctx    context.Context
	cloud  *localcloud.Cloud
	sim    *awssim.Server
	table  string
	store  *store.Store
	kube   *kube.Client
	ns     string
	pool   string
	cfg    *apis.Config
	logs   *cloudtest.SyncBuffer
	region string
	// stack holds the harness's function roles for its current table.
	stack *localcloud.Stack
}

// noAbort sends requests detached from their context's cancellation.
type noAbort struct{ rt http.RoundTripper }

func (n noAbort) RoundTrip(r *http.Request) (*http.Response, error) {
	return n.rt.RoundTrip(r.WithContext(context.WithoutCancel(r.Context())))
}

type poolSpec struct {
	types  string // YAML flow list of instance types
	ct     string // YAML flow list of capacity types
	limits string // YAML block under spec, e.g. "limits:\n    cpu: \"4\""
}

func newHarness(t testing.TB, ps poolSpec) *harness {
	t.Helper()
	cloud := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cloudtest.SetEnv(t, cloud)
	h := &harness{t: t, ctx: ctx, cloud: cloud, sim: cloud.AWS, region: cloud.Region, logs: &cloudtest.SyncBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("provisioner logs:\n%s", h.logs.String())
		}
	})
	h.pool = cloudtest.DNSName(t.Name(), 40)
	h.newTable()
	t.Cleanup(h.terminateAll)
	var err error
	h.kube, err = kube.NewClient(cloud.ControllerREST, slog.New(slog.NewJSONHandler(h.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	h.ns = cloud.NewNamespace(t)
	h.cfg = h.config(ps)
	return h
}

// newTable gives the harness a fresh table (fresh claims, lease, ICE set).
func (h *harness) newTable() {
	h.t.Helper()
	cfg, err := settings.AWSConfig(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	// dynalite dies when a client aborts a request mid-flight (its request
	// error handler throws), and the crash test aborts requests on purpose;
	// so requests to it finish even when their context ends.
	db := store.NewDynamoDBClient(cfg, func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: noAbort{http.DefaultTransport}}
	})
	h.table = fmt.Sprintf("nw-%s-%d", h.pool, time.Now().UnixNano()%1e9)
	cloudtest.NewTable(h.ctx, h.t, db, h.table)
	// The provisioner runs as the stack's controller role.
	h.stack = cloudtest.Deploy(h.t, h.cloud, localcloud.StackResources{Table: h.table})
	ctrl := cloudtest.RoleConfig(h.ctx, h.t, h.stack.Controller)
	ctrlDB := store.NewDynamoDBClient(ctrl, func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: noAbort{http.DefaultTransport}}
	})
	if h.store, err = store.New(ctrlDB, h.table); err != nil {
		h.t.Fatal(err)
	}
}

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
          values: %[2]s
        - key: karpenter.sh/capacity-type
          operator: In
          values: %[3]s
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: %[1]s
  %[4]s
`

func (h *harness) config(ps poolSpec) *apis.Config {
	h.t.Helper()
	if ps.types == "" {
		ps.types = `["m5.large", "m5.xlarge"]`
	}
	if ps.ct == "" {
		ps.ct = `["on-demand"]`
	}
	return cloudtest.LoadConfig(h.t, fmt.Sprintf(poolTemplate, h.pool, ps.types, ps.ct, ps.limits)+cloudtest.NodeClassYAML(h.pool, h.cloud.ClusterName))
}

// createPods creates pods only this test's NodePool can take and waits for
// the scheduler to find them unschedulable.
func (h *harness) createPods(prefix string, n int, cpu string) []*corev1.Pod {
	h.t.Helper()
	var out []*corev1.Pod
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: h.ns, Labels: map[string]string{"app": prefix}},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{"nodewright.io/test": h.pool},
				Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")},
				}}},
			},
		}
		created, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).Create(h.ctx, p, metav1.CreateOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, created)
	}
	h.eventually("pods unschedulable", 30*time.Second, func() (bool, string) {
		list, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).List(h.ctx, metav1.ListOptions{LabelSelector: "app=" + prefix})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range list.Items {
			ok := false
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					ok = true
				}
			}
			if !ok {
				return false, p.Name + " not yet unschedulable"
			}
		}
		return len(list.Items) == n, fmt.Sprintf("%d/%d pods", len(list.Items), n)
	})
	return out
}

func (h *harness) eventually(what string, d time.Duration, f func() (bool, string)) {
	h.t.Helper()
	cloudtest.Eventually(h.t, what, d, f)
}

// deps builds a fresh "process": new SDK clients, provider and caches, as a
// new Lambda instance would have. wrap may replace adapters (fault injection).
func (h *harness) deps(wrapEC2 func(nwaws.EC2API) nwaws.EC2API) provisioning.Deps {
	h.t.Helper()
	clients, _, err := nwaws.NewClients(h.ctx, h.region, config.WithCredentialsProvider(h.stack.Controller))
	if err != nil {
		h.t.Fatal(err)
	}
	if wrapEC2 != nil {
		clients.EC2 = wrapEC2(clients.EC2)
	}
	log := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ice := nwaws.NewICECache(awsstore.ICE{Store: h.store}, 3*time.Minute, nil)
	// A launch in doubt (a crashed run's token reused with other options) is
	// settled after LaunchConfirmWait; tests need not wait the default 30 s.
	prov, err := nwaws.New(nwaws.Options{ClusterName: h.cloud.ClusterName, Region: h.region, Owner: cloudtest.Owner(h.cloud, h.table), Logger: log, LaunchConfirmWait: 2 * time.Second}, clients, ice)
	if err != nil {
		h.t.Fatal(err)
	}
	return provisioning.Deps{
		Store: h.store, Cluster: h.kube, Launcher: prov,
		Catalog:     provisioning.ProviderCatalog(prov, awsstore.Prices{Store: h.store}, h.region, log),
		Unavailable: provisioning.ProviderICE(prov),
		Config:      h.cfg, Log: log,
		Settings: provisioning.Settings{BatchIdle: 100 * time.Millisecond, BatchMax: 2 * time.Second, LeaseDuration: time.Second},
	}
}

func (h *harness) run(d provisioning.Deps) *provisioning.Result {
	h.t.Helper()
	p, err := provisioning.New(d)
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := p.Run(h.ctx, provisioning.Trigger{Source: provisioning.TriggerManual})
	if err != nil {
		h.t.Fatalf("run: %v", err)
	}
	return res
}

// claims are the live claims of this test's table.
func (h *harness) claims() []*apis.NodeClaim {
	h.t.Helper()
	cls, err := h.store.ListNodeClaims(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return cls
}

// instances are the simulator's instances launched for this test's pool,
// by claim name (tag karpenter.sh/nodeclaim), not terminated.
func (h *harness) instances() map[string][]ec2types.Instance {
	out := map[string][]ec2types.Instance{}
	for _, inst := range h.sim.EC2().Instances() {
		if inst.State == nil || (inst.State.Name != ec2types.InstanceStateNamePending && inst.State.Name != ec2types.InstanceStateNameRunning) {
			continue
		}
		tags := map[string]string{}
		for _, tg := range inst.Tags {
			tags[sdkaws.ToString(tg.Key)] = sdkaws.ToString(tg.Value)
		}
		if tags[nwaws.TagNodePool] != h.pool {
			continue
		}
		out[tags[nwaws.TagNodeClaim]] = append(out[tags[nwaws.TagNodeClaim]], inst)
	}
	return out
}

// fleetCalls are the CreateFleet calls for this test's pool since the last
// ResetCalls, successful ones only when ok.
func (h *harness) fleetCalls(ok bool) []awssim.Call {
	var out []awssim.Call
	for _, c := range h.sim.Calls("ec2", "CreateFleet") {
		mine := false
		for k, v := range c.Params {
			if strings.HasPrefix(k, "TagSpecification.") && v == h.pool {
				mine = true
			}
		}
		if mine && (!ok || c.ErrorCode == "") {
			out = append(out, c)
		}
	}
	return out
}

// checkOneInstancePerClaim asserts the invariant crash safety is about:
// every live claim is launched with exactly one instance, and every
// instance of the pool belongs to a live claim (nothing leaked).
func (h *harness) checkOneInstancePerClaim() {
	h.t.Helper()
	insts := h.instances()
	live := map[string]*apis.NodeClaim{}
	for _, cl := range h.claims() {
		live[cl.Name] = cl
		got := insts[cl.Name]
		if len(got) != 1 {
			h.t.Errorf("claim %s has %d instances", cl.Name, len(got))
			continue
		}
		if !cl.IsTrue(apis.ConditionLaunched) || cl.Status.InstanceID != sdkaws.ToString(got[0].InstanceId) {
			h.t.Errorf("claim %s: launched=%v instance %q, EC2 has %s", cl.Name, cl.IsTrue(apis.ConditionLaunched), cl.Status.InstanceID, sdkaws.ToString(got[0].InstanceId))
		}
	}
	for name, is := range insts {
		if live[name] == nil {
			h.t.Errorf("leaked: %d instance(s) tagged for claim %q, which does not exist", len(is), name)
		}
	}
}

// The whole path through the real function handler: pending pods -> one
// NodeClaim -> CreateFleet -> the simulated kubelet registers the Node;
// a second invocation launches nothing; once the node is registered (the
// lifecycle removes karpenter.sh/unregistered) the pods run.
func TestProvisionerHandlerEndToEnd(t *testing.T) {
	h := newHarness(t, poolSpec{})
	h.sim.ResetCalls()
	pods := h.createPods("web", 3, "500m")

	a, err := app.New(h.ctx, settings.Settings{ClusterName: h.cloud.ClusterName, TableName: h.table, Owner: cloudtest.Owner(h.cloud, h.table), BatchIdle: 200 * time.Millisecond, BatchMax: 2 * time.Second},
		app.Options{Function: "provisioner", Out: h.logs, KubeREST: h.cloud.ControllerREST, Config: h.cfg, AWSCredentials: h.stack.Controller})
	if err != nil {
		t.Fatal(err)
	}
	handler, err := a.ProvisionerHandler()
	if err != nil {
		t.Fatal(err)
	}
	tick := json.RawMessage(`{"version":"0","id":"t1","detail-type":"Scheduled Event","source":"aws.events","time":"2026-11-22T00:00:00Z","detail":{}}`)
	out, err := handler.Handle(h.ctx, tick)
	if err != nil {
		t.Fatal(err)
	}
	res := out.(*provisioning.Result)
	if len(res.Launched) != 1 || res.Nominated < 3 {
		t.Fatalf("first run: %+v", res)
	}
	cls := h.claims()
	if len(cls) != 1 {
		t.Fatalf("want 1 claim, got %d", len(cls))
	}
	cl := cls[0]
	if n := len(h.fleetCalls(true)); n != 1 {
		t.Fatalf("want 1 successful CreateFleet, got %d", n)
	}
	h.checkOneInstancePerClaim()

	// The simulated kubelet registers the instance.
	var node *corev1.Node
	h.eventually("node registration", 30*time.Second, func() (bool, string) {
		nodes, err := h.cloud.KubeClient.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for i := range nodes.Items {
			if nodes.Items[i].Spec.ProviderID == cl.Status.ProviderID {
				node = &nodes.Items[i]
				return true, ""
			}
		}
		return false, "no node with providerID " + cl.Status.ProviderID
	})
	if node.Labels[apis.NodePoolLabelKey] != h.pool || node.Labels[catalog.LabelInstanceType] != cl.Labels[catalog.LabelInstanceType] ||
		node.Labels["nodewright.io/test"] != h.pool {
		t.Errorf("node labels %v", node.Labels)
	}
	if !slices.ContainsFunc(node.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == apis.UnregisteredTaintKey }) {
		t.Errorf("node registered without %s: %v", apis.UnregisteredTaintKey, node.Spec.Taints)
	}

	// A nudge now (node registered, not yet initialized) launches nothing.
	nudge, _ := json.Marshal(map[string]any{"Records": []map[string]any{{
		"messageId": "n1", "eventSource": "aws:sqs",
		"body": fmt.Sprintf(`{"kind":"provision","subject":"%s/web-0","sentAt":%q}`, h.ns, time.Now().UTC().Format(time.RFC3339Nano)),
	}}})
	if _, err := handler.Handle(h.ctx, nudge); err != nil {
		t.Fatal(err)
	}
	if n := len(h.fleetCalls(false)); n != 1 || len(h.claims()) != 1 {
		t.Fatalf("second run launched: %d CreateFleet calls, %d claims", n, len(h.claims()))
	}

	// Nominated events reached the pods.
	evs, err := h.cloud.KubeClient.CoreV1().Events(h.ns).List(h.ctx, metav1.ListOptions{FieldSelector: "reason=Nominated"})
	if err != nil {
		t.Fatal(err)
	}
	nominated := map[string]bool{}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, "nodeclaim/"+cl.Name) {
			nominated[e.InvolvedObject.Name] = true
		}
	}
	for _, p := range pods {
		if !nominated[p.Name] {
			t.Errorf("pod %s has no Nominated event naming %s (events %d)", p.Name, cl.Name, len(evs.Items))
		}
	}

	// What the lifecycle will do on registration; then the pods run there.
	if _, err := h.kube.RemoveTaints(h.ctx, node.Name, apis.UnregisteredTaintKey, ""); err != nil {
		t.Fatal(err)
	}
	h.eventually("pods running on the new node", 60*time.Second, func() (bool, string) {
		list, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range list.Items {
			if p.Spec.NodeName != node.Name || p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("%s on %q phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
		}
		return true, ""
	})
}

// NodePool limits count claims in flight: three 1-CPU pods, m5.large only
// (2 vCPU each, one such pod per node) and a 4-CPU limit make two claims.
func TestLimitsRespected(t *testing.T) {
	h := newHarness(t, poolSpec{types: `["m5.large"]`, limits: "limits:\n    cpu: \"4\""})
	h.createPods("web", 3, "1")
	res := h.run(h.deps(nil))
	// (Result counts are cluster-wide; other tests' pods may linger while
	// their namespaces terminate, so assertions stay within this test.)
	if len(res.Launched) != 2 {
		t.Fatalf("want 2 launches, got %+v", res)
	}
	// Again: nothing more, the limit is used up by the in-flight claims.
	res = h.run(h.deps(nil))
	if len(res.Created) != 0 || len(h.claims()) != 2 {
		t.Fatalf("limit exceeded on the second run: %+v", res)
	}
	h.checkOneInstancePerClaim()
	evs, err := h.cloud.KubeClient.CoreV1().Events(h.ns).List(h.ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling,source=nodewright"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Items {
		if strings.Contains(e.Message, "limit") {
			found = true
		}
	}
	if !found {
		t.Errorf("no FailedScheduling event from nodewright naming the limit (%d events)", len(evs.Items))
	}
}

// Spot m5.large is out of capacity in every zone: CreateFleet reports
// InsufficientInstanceCapacity, the claim is deleted, and the same run
// re-plans its pods onto on-demand.
func TestInsufficientCapacityReplannedInSameRun(t *testing.T) {
	h := newHarness(t, poolSpec{types: `["m5.large"]`, ct: `["spot", "on-demand"]`})
	for _, z := range h.zones() {
		h.sim.EC2().SetCapacity(ec2sim.Pool{InstanceType: "m5.large", Zone: z, CapacityType: "spot"}, 0)
		t.Cleanup(func() {
			h.sim.EC2().SetCapacity(ec2sim.Pool{InstanceType: "m5.large", Zone: z, CapacityType: "spot"}, -1)
		})
	}
	h.sim.ResetCalls()
	h.createPods("web", 2, "500m")
	res := h.run(h.deps(nil))
	if len(res.CapacityFailed) != 1 || len(res.Launched) != 1 || res.Rounds != 2 {
		t.Fatalf("want a capacity failure re-planned in round 2, got %+v", res)
	}
	cls := h.claims()
	if len(cls) != 1 || cls[0].Labels[apis.CapacityTypeLabelKey] != "on-demand" {
		t.Fatalf("claims %v", cls)
	}
	failed := 0
	for _, c := range h.fleetCalls(false) {
		if c.Params["TargetCapacitySpecification.DefaultTargetCapacityType"] == "spot" {
			failed++
		}
	}
	if failed == 0 {
		t.Error("no spot CreateFleet in the call log")
	}
	tomb, err := h.store.GetTombstone(h.ctx, res.CapacityFailed[0])
	if err != nil {
		t.Fatalf("tombstone of the spot claim: %v", err)
	}
	if c := tomb.Claim.Condition(apis.ConditionLaunched); c == nil || c.Reason != "InsufficientCapacity" {
		t.Errorf("tombstone condition %+v", c)
	}
	ice, err := h.store.UnavailableOfferings(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ice) == 0 {
		t.Error("the ICE set in the store is empty")
	}
	h.checkOneInstancePerClaim()
}

func (h *harness) zones() []string {
	out, err := ec2.NewFromConfig(h.awsConfig()).DescribeAvailabilityZones(h.ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		h.t.Fatal(err)
	}
	var zs []string
	for _, z := range out.AvailabilityZones {
		zs = append(zs, sdkaws.ToString(z.ZoneName))
	}
	return zs
}

func (h *harness) awsConfig() sdkaws.Config {
	cfg, err := settings.AWSConfig(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return cfg
}

// errCrashed is what every call returns once the simulated process died.
var errCrashed = errors.New("process crashed")

// crasher counts the run's external calls and kills the "process" right
// after the k-th one returns: that call's effect happened, its answer is
// lost, and nothing else the process attempts reaches any server.
type crasher struct {
	mu      sync.Mutex
	at      int // 0: never
	n       int
	crashed bool
	cancel  context.CancelFunc
	calls   []string
}

func (c *crasher) do(name string, f func() error) error {
	c.mu.Lock()
	if c.crashed {
		c.mu.Unlock()
		return errCrashed
	}
	c.n++
	k := c.n
	c.calls = append(c.calls, name)
	c.mu.Unlock()
	err := f()
	c.mu.Lock()
	defer c.mu.Unlock()
	if k == c.at && !c.crashed {
		c.crashed = true
		c.cancel()
	}
	if c.crashed {
		return errCrashed
	}
	return err
}

type crashStore struct {
	s *store.Store
	c *crasher
}

func (w crashStore) AcquireLease(ctx context.Context, name, holder string, d time.Duration) (l *store.Lease, err error) {
	err = w.c.do("store.AcquireLease", func() error { l, err = w.s.AcquireLease(ctx, name, holder, d); return err })
	return l, err
}
func (w crashStore) RenewLease(ctx context.Context, l *store.Lease, d time.Duration) error {
	// Renewals run on a timer; counting them would make step numbers racy.
	if w.c.isCrashed() {
		return errCrashed
	}
	return w.s.RenewLease(ctx, l, d)
}
func (w crashStore) ReleaseLease(ctx context.Context, l *store.Lease) error {
	return w.c.do("store.ReleaseLease", func() error { return w.s.ReleaseLease(ctx, l) })
}
func (w crashStore) GetKV(ctx context.Context, k string) (kv *store.KV, err error) {
	err = w.c.do("store.GetKV", func() error { kv, err = w.s.GetKV(ctx, k); return err })
	return kv, err
}
func (w crashStore) PutKV(ctx context.Context, k string, v []byte, ev int64, ttl time.Duration) (n int64, err error) {
	err = w.c.do("store.PutKV", func() error { n, err = w.s.PutKV(ctx, k, v, ev, ttl); return err })
	return n, err
}
func (w crashStore) ListNodeClaims(ctx context.Context) (out []*apis.NodeClaim, err error) {
	err = w.c.do("store.ListNodeClaims", func() error { out, err = w.s.ListNodeClaims(ctx); return err })
	return out, err
}
func (w crashStore) CreateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	return w.c.do("store.CreateNodeClaim", func() error { return w.s.CreateNodeClaim(ctx, nc) })
}
func (w crashStore) GetNodeClaim(ctx context.Context, name string) (nc *apis.NodeClaim, err error) {
	err = w.c.do("store.GetNodeClaim", func() error { nc, err = w.s.GetNodeClaim(ctx, name); return err })
	return nc, err
}
func (w crashStore) MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (nc *apis.NodeClaim, err error) {
	err = w.c.do("store.MutateNodeClaim", func() error { nc, err = w.s.MutateNodeClaim(ctx, name, fn); return err })
	return nc, err
}
func (w crashStore) DeleteNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	return w.c.do("store.DeleteNodeClaim", func() error { return w.s.DeleteNodeClaim(ctx, nc) })
}

func (c *crasher) isCrashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed
}

type crashCluster struct {
	k *kube.Client
	c *crasher
}

func (w crashCluster) Snapshot(ctx context.Context, o kube.SnapshotOptions) (s *kube.Snapshot, err error) {
	err = w.c.do("kube.Snapshot", func() error { s, err = w.k.Snapshot(ctx, o); return err })
	return s, err
}

// PodEvent is advisory and asynchronous: not a step, but nothing after the crash.
func (w crashCluster) PodEvent(ctx context.Context, p *corev1.Pod, typ, reason, format string, args ...any) error {
	if w.c.isCrashed() {
		return errCrashed
	}
	return w.k.PodEvent(ctx, p, typ, reason, format, args...)
}

// crashEC2 makes every EC2 API call of the launch path a step.
type crashEC2 struct {
	nwaws.EC2API
	c *crasher
}

func ec2Step[I, O any](w crashEC2, name string, ctx context.Context, in I, f func(context.Context, I, ...func(*ec2.Options)) (O, error), opts []func(*ec2.Options)) (out O, err error) {
	err = w.c.do("ec2."+name, func() error { out, err = f(ctx, in, opts...); return err })
	return out, err
}

func (w crashEC2) DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, o ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	return ec2Step(w, "DescribeSubnets", ctx, in, w.EC2API.DescribeSubnets, o)
}
func (w crashEC2) DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, o ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	return ec2Step(w, "DescribeSecurityGroups", ctx, in, w.EC2API.DescribeSecurityGroups, o)
}
func (w crashEC2) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, o ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	return ec2Step(w, "DescribeImages", ctx, in, w.EC2API.DescribeImages, o)
}
func (w crashEC2) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, o ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	return ec2Step(w, "DescribeLaunchTemplates", ctx, in, w.EC2API.DescribeLaunchTemplates, o)
}
func (w crashEC2) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, o ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	return ec2Step(w, "CreateLaunchTemplate", ctx, in, w.EC2API.CreateLaunchTemplate, o)
}
func (w crashEC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, o ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return ec2Step(w, "CreateFleet", ctx, in, w.EC2API.CreateFleet, o)
}
func (w crashEC2) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, o ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return ec2Step(w, "DescribeInstances", ctx, in, w.EC2API.DescribeInstances, o)
}

// Kill the provisioner after every external call of a run in turn (store,
// API server, each EC2 call of the launch path), then run it again as a
// fresh process: however the first run died, the second completes the
// work, no claim ever gets two instances and no instance is left without
// its claim.
func TestCrashBetweenEveryExternalCall(t *testing.T) {
	crashSweep(t, poolSpec{types: `["m5.large"]`})
}

// The same with spot short everywhere: every run goes through a capacity
// error, the claim's deletion and a re-plan onto on-demand, and is killed
// at each of those steps too.
func TestCrashBetweenEveryExternalCallWithCapacityErrors(t *testing.T) {
	h := newHarness(t, poolSpec{})
	for _, z := range h.zones() {
		pool := ec2sim.Pool{InstanceType: "m5.large", Zone: z, CapacityType: "spot"}
		h.sim.EC2().SetCapacity(pool, 0)
		t.Cleanup(func() { h.sim.EC2().SetCapacity(pool, -1) })
	}
	crashSweep(t, poolSpec{types: `["m5.large"]`, ct: `["spot", "on-demand"]`})
}

func crashSweep(t *testing.T, ps poolSpec) {
	h := newHarness(t, ps)
	base := h.pool
	// Count a clean run's steps.
	clean := &crasher{cancel: func() {}}
	h.createPods("clean", 2, "1")
	res := h.run(h.crashDeps(clean))
	if len(res.Launched) != 2 {
		t.Fatalf("clean run: %+v", res)
	}
	for _, cl := range h.claims() {
		if cl.Labels[apis.CapacityTypeLabelKey] != "on-demand" {
			t.Fatalf("clean run launched %s", cl.Labels[apis.CapacityTypeLabelKey])
		}
	}
	steps := clean.n
	t.Logf("a clean run makes %d external calls: %s", steps, strings.Join(clean.calls, " "))
	if steps < 10 {
		t.Fatalf("implausibly few steps: %v", clean.calls)
	}
	h.terminateAll()

	for k := 1; k <= steps+1; k++ {
		t.Run(fmt.Sprintf("crash-after-%d", k), func(t *testing.T) {
			// A fresh table, NodePool and pods per crash point, so nothing
			// of earlier points (claims, instances, nodes) is in the way.
			h.t = t
			ctx, cancelAll := context.WithTimeout(context.Background(), time.Minute)
			defer cancelAll()
			h.ctx = ctx
			phase := time.Now()
			timing := func(what string) {
				t.Logf("%s took %s", what, time.Since(phase).Round(time.Millisecond))
				phase = time.Now()
			}
			h.pool = fmt.Sprintf("%s-k%d", base, k)
			h.cfg = h.config(ps)
			h.newTable()
			h.sim.ResetCalls()
			h.createPods(h.pool, 2, "1")
			defer func() {
				h.terminateAll()
				_ = h.cloud.KubeClient.CoreV1().Pods(h.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
					metav1.ListOptions{LabelSelector: "app=" + h.pool})
			}()
			timing("setup")

			ctx, cancel := context.WithCancel(h.ctx)
			cr := &crasher{at: k, cancel: cancel}
			p, err := provisioning.New(h.crashDeps(cr))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = p.Run(ctx, provisioning.Trigger{Source: provisioning.TriggerManual})
			cancel()
			crashedAt := "(run finished first)"
			if cr.crashed {
				crashedAt = cr.calls[k-1]
			}
			timing("crashed run")

			// The re-run: a new process, once the dead one's lease expires.
			var res *provisioning.Result
			deadline := time.Now().Add(15 * time.Second)
			for {
				res = h.run(h.deps(nil))
				if res.Skipped != "lease held" || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if res.Skipped != "" {
				t.Fatalf("crash after %s: re-run skipped: %s", crashedAt, res.Skipped)
			}
			timing("re-run")
			h.checkOneInstancePerClaim()
			if n := len(h.claims()); n != 2 {
				t.Errorf("crash after %s: want 2 claims for 2 one-per-node pods, got %d", crashedAt, n)
			}
			// The call log: exactly one on-demand CreateFleet token (on-demand
			// never runs short here) per claim; a token retried after a lost
			// answer returns the same instance. Spot calls answer with
			// capacity errors inside a successful response.
			tokens := map[string]bool{}
			for _, c := range h.fleetCalls(true) {
				if c.Params["TargetCapacitySpecification.DefaultTargetCapacityType"] == "on-demand" {
					tokens[c.Params["ClientToken"]] = true
				}
			}
			if len(tokens) != 2 {
				t.Errorf("crash after %s: %d distinct on-demand CreateFleet tokens, want 2", crashedAt, len(tokens))
			}
			// And a third run has nothing left to do.
			if res := h.run(h.deps(nil)); len(res.Created) != 0 || len(res.Resumed) != 0 {
				t.Errorf("crash after %s: third run still working: %+v", crashedAt, res)
			}
			t.Logf("crash after %s: recovered (re-run created %d, resumed %d)", crashedAt, len(res.Created), len(res.Resumed))
		})
		if t.Failed() {
			break
		}
	}
}

// terminateAll terminates the current pool's instances (their Nodes go
// with them), so later tests see a small cluster.
func (h *harness) terminateAll() {
	for _, is := range h.instances() {
		for _, inst := range is {
			_ = h.sim.EC2().Terminate(sdkaws.ToString(inst.InstanceId), "test cleanup")
		}
	}
}

// crashDeps is deps with every external call going through the crasher.
func (h *harness) crashDeps(c *crasher) provisioning.Deps {
	d := h.deps(func(api nwaws.EC2API) nwaws.EC2API { return crashEC2{EC2API: api, c: c} })
	d.Store = crashStore{s: h.store, c: c}
	d.Cluster = crashCluster{k: h.kube, c: c}
	return d
}

// BenchmarkBurstToCreateFleet measures the provisioner's share of the
// issue's latency target: a burst of 100 pods is created (10 writers in
// parallel); when the scheduler marks the first one Unschedulable (the
// moment the admission webhook is called and nudges), a run starts with the
// default 1 s idle window. Reported: the time from that first Unschedulable
// to the first CreateFleet request in the simulator's call log and to the
// end of the run, how long the burst took to create, and the pods the run
// planned for (all 100 when the window caught the whole burst).
func BenchmarkBurstToCreateFleet(b *testing.B) {
	h := newHarness(b, poolSpec{types: `["m5.large", "m5.xlarge", "m5.2xlarge"]`})
	base := h.pool
	var toFleet, toDone, burstTook, batch, planned float64
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		h.pool = fmt.Sprintf("%s-%d", base, i)
		h.cfg = h.config(poolSpec{types: `["m5.large", "m5.xlarge", "m5.2xlarge"]`})
		h.newTable()
		h.sim.ResetCalls()
		d := h.deps(nil)
		d.Settings.BatchIdle, d.Settings.BatchMax = time.Second, 10*time.Second
		p, err := provisioning.New(d)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()

		burstStart := time.Now()
		burstDone := make(chan struct{})
		go func() {
			defer close(burstDone)
			h.burst(h.pool, 100, "250m", 10)
			burstTook += time.Since(burstStart).Seconds() * 1000
		}()
		start := h.firstUnschedulable(h.pool)
		res, err := p.Run(h.ctx, provisioning.Trigger{Source: provisioning.TriggerNudge, Nudges: []time.Time{start}})
		if err != nil {
			b.Fatal(err)
		}
		end := time.Since(start)
		<-burstDone

		b.StopTimer()
		calls := h.fleetCalls(true)
		if len(calls) == 0 {
			b.Fatalf("no CreateFleet (claims %d, result %+v)", len(h.claims()), res)
		}
		first := calls[0].Time
		for _, c := range calls {
			if c.Time.Before(first) {
				first = c.Time
			}
		}
		toFleet += first.Sub(start).Seconds() * 1000
		toDone += end.Seconds() * 1000
		batch += res.Batch.Seconds() * 1000
		planned += float64(res.Nominated)
		h.terminateAll()
		_ = h.cloud.KubeClient.CoreV1().Pods(h.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
			metav1.ListOptions{LabelSelector: "app=" + h.pool})
		b.StartTimer()
	}
	b.ReportMetric(toFleet/float64(i), "ms-to-CreateFleet")
	b.ReportMetric(toDone/float64(i), "ms-to-run-end")
	b.ReportMetric(burstTook/float64(i), "ms-burst")
	b.ReportMetric(batch/float64(i), "ms-batching")
	b.ReportMetric(planned/float64(i), "pods-nominated")
	// What the provisioner adds after the window closes (lease and KV reads
	// before the window are included): snapshot, solve, claim writes, launch.
	b.ReportMetric((toFleet-batch)/float64(i), "ms-window-to-CreateFleet")
}

// firstUnschedulable polls until a pod of the app is marked Unschedulable
// and returns when it saw it.
func (h *harness) firstUnschedulable(app string) time.Time {
	h.t.Helper()
	for {
		list, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).List(h.ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			h.t.Fatal(err)
		}
		for _, p := range list.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					return time.Now()
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// burst creates n pods with `writers` concurrent writers, without waiting.
func (h *harness) burst(prefix string, n int, cpu string, writers int) {
	h.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range writers {
		wg.Go(func() {
			for i := range next {
				p := &corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: h.ns, Labels: map[string]string{"app": prefix}},
					Spec: corev1.PodSpec{
						NodeSelector: map[string]string{"nodewright.io/test": h.pool},
						Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")},
						}}},
					},
				}
				if _, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).Create(h.ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Fatal(err)
	}
}
