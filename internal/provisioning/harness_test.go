package provisioning_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// harness is one test's slice of the shared cloud (cloudtest.Env): its own
// table, namespace, NodePool (named after the test, with a label only its
// pods select). t and ctx are the current (sub)test's.
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

// dynaliteSafe: dynalite dies when a client aborts a request mid-flight (its
// request error handler throws), and the crash test aborts requests on
// purpose; so requests to it finish even when their context ends.
func dynaliteSafe(o *dynamodb.Options) {
	o.HTTPClient = &http.Client{Transport: noAbort{http.DefaultTransport}}
}

type poolSpec struct {
	types  string            // JSON list of instance types
	ct     string            // JSON list of capacity types
	limits map[string]string // spec.limits, e.g. {"cpu": "4"}
	alias  string            // the class's AMI alias ("": al2023@latest)
}

// options are the cloudtest pool options of ps: m5.large and m5.xlarge
// on-demand unless ps says otherwise.
func (ps poolSpec) options(t testing.TB) []cloudtest.Option {
	t.Helper()
	types, cts := []string{"m5.large", "m5.xlarge"}, []string{"on-demand"}
	for _, l := range []struct {
		in  string
		out *[]string
	}{{ps.types, &types}, {ps.ct, &cts}} {
		if l.in != "" {
			if err := json.Unmarshal([]byte(l.in), l.out); err != nil {
				t.Fatalf("pool spec list %s: %v", l.in, err)
			}
		}
	}
	return []cloudtest.Option{
		cloudtest.PoolLabel("nodewright.io/test"), cloudtest.InstanceTypes(types...), cloudtest.CapacityTypes(cts...),
		cloudtest.PoolSpec(func(p *apistest.Pool) { p.Limits = ps.limits }), cloudtest.AMIAlias(ps.alias),
	}
}

func newHarness(t testing.TB, ps poolSpec) *harness {
	t.Helper()
	e := cloudtest.NewEnv(t, shared, append(ps.options(t), cloudtest.Timeout(3*time.Minute), cloudtest.DynamoDBOptions(dynaliteSafe))...)
	h := &harness{t: t, ctx: e.Ctx, cloud: e.Cloud, sim: e.Cloud.AWS, region: e.Cloud.Region, logs: e.Logs,
		pool: e.Pool, table: e.Table, stack: e.Stack, ns: e.Namespace, cfg: e.Config}
	h.store = h.controllerStore()
	t.Cleanup(h.terminateAll)
	var err error
	h.kube, err = kube.NewClient(e.Cloud.ControllerREST, slog.New(slog.NewJSONHandler(h.logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// newTable gives the harness a fresh table (fresh claims, lease, ICE set)
// and stack.
func (h *harness) newTable() {
	h.t.Helper()
	h.table = cloudtest.TableName(h.pool)
	cloudtest.NewTable(h.ctx, h.t, store.NewDynamoDBClient(h.awsConfig(), dynaliteSafe), h.table)
	h.stack = cloudtest.Deploy(h.t, h.cloud, localcloud.StackResources{Table: h.table})
	h.store = h.controllerStore()
}

// controllerStore is the table's store as the provisioner has it: as the
// stack's controller role.
func (h *harness) controllerStore() *store.Store {
	h.t.Helper()
	ctrl := cloudtest.RoleConfig(h.ctx, h.t, h.stack.Controller)
	st, err := store.New(store.NewDynamoDBClient(ctrl, dynaliteSafe), h.table)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

// pod is the i-th pod of app prefix, which only this test's NodePool can
// take (its node selector names the pool's label).
func (h *harness) pod(prefix string, i int, cpu string) *corev1.Pod {
	return cloudtest.PausePod(h.ns, fmt.Sprintf("%s-%d", prefix, i), prefix, map[string]string{"nodewright.io/test": h.pool}, cpu, "256Mi")
}

// createPods creates pods only this test's NodePool can take and waits for
// the scheduler to find them unschedulable.
func (h *harness) createPods(prefix string, n int, cpu string) []*corev1.Pod {
	h.t.Helper()
	var out []*corev1.Pod
	for i := range n {
		created, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).Create(h.ctx, h.pod(prefix, i, cpu), metav1.CreateOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		out = append(out, created)
	}
	cloudtest.WaitUnschedulable(h.ctx, h.t, h.cloud.KubeClient, h.ns, "app="+prefix, n, 30*time.Second)
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
	return cloudtest.Claims(h.ctx, h.t, h.store)
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
		if cloudtest.Tags(c, h.pool) && (!ok || c.ErrorCode == "") {
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

// terminateAll terminates the current pool's instances (their Nodes go
// with them), so later tests see a small cluster.
func (h *harness) terminateAll() {
	for _, is := range h.instances() {
		for _, inst := range is {
			_ = h.sim.EC2().Terminate(sdkaws.ToString(inst.InstanceId), "test cleanup")
		}
	}
}

// deletePods deletes the pods of app at once (between crash points and
// benchmark rounds, so the next round's pods are the only pending ones).
func (h *harness) deletePods(app string) {
	_ = h.cloud.KubeClient.CoreV1().Pods(h.ns).DeleteCollection(context.Background(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{LabelSelector: "app=" + app})
}

// freshPool points the harness at a new NodePool named pool, with a fresh
// table and an empty call log, so nothing of earlier rounds is in the way.
func (h *harness) freshPool(pool string, ps poolSpec) {
	h.t.Helper()
	h.pool = pool
	h.cfg = cloudtest.LoadPool(h.t, h.cloud, pool, ps.options(h.t)...)
	h.newTable()
	h.sim.ResetCalls()
}

// spotShort makes spot m5.large short of capacity in every zone until the
// test ends.
func (h *harness) spotShort() {
	for _, z := range h.zones() {
		pool := ec2sim.Pool{InstanceType: "m5.large", Zone: z, CapacityType: "spot"}
		h.sim.EC2().SetCapacity(pool, 0)
		h.t.Cleanup(func() { h.sim.EC2().SetCapacity(pool, -1) })
	}
}

// One local cloud for the package, started by the first integration test;
// short simulated delays so instances become Nodes within a second.
// Security groups for pods is on (TestPodENIPodRunsEndToEnd), as on a
// cluster whose VPC CNI sets ENABLE_POD_ENI: m5 nodes report pod-eni.
var shared = cloudtest.NewShared("prov", cloudtest.ShuttingDown(500*time.Millisecond), cloudtest.PodENI())

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
