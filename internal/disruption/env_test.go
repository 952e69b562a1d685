package disruption_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
)

// budget is a disruption budget of nodes ("1", "50%") at all times.
func budget(nodes string) apistest.Budget { return apistest.Budget{Nodes: nodes} }

// noneEver is a budget of 0 nodes that is always active: a schedule every
// minute lasting an hour always covers now.
var noneEver = apistest.Budget{Nodes: "0", Schedule: "* * * * *", Duration: "1h"}

// scenarioPool is a scenario's NodePool (on the EC2NodeClass "default"):
// on-demand nodes of types, disrupted by policy after consolidateAfter
// within budgets.
func scenarioPool(types []string, policy, after string, budgets ...apistest.Budget) apistest.Pool {
	return apistest.Pool{
		Requirements: []apistest.Req{
			apistest.In(apis.CapacityTypeLabelKey, "on-demand"),
			apistest.In(catalog.LabelInstanceType, types...),
		},
		ConsolidationPolicy: policy, ConsolidateAfter: after, Budgets: budgets,
	}
}

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
	// spec is the NodePool the env loaded (named pool).
	spec apistest.Pool
	// disr is the disruption queue's URL (cloudtest.DisruptionQueue).
	disr string

	prov *provisioning.Provisioner
	life *lifecycle.Handler
	dis  *disruption.Controller

	lastTick time.Time
	lastDis  time.Time
	// results of every disruption pass, in order
	results []*disruption.Result
}

func newEnv(t *testing.T, spec apistest.Pool, opts ...cloudtest.Option) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end disruption scenarios need the local cloud (skipped in -short)")
	}
	spec.Name = fmt.Sprintf("dis%d-%d", time.Now().UnixNano()%1e5, seq.Add(1))
	ce := cloudtest.NewEnv(t, shared, append([]cloudtest.Option{cloudtest.Timeout(8 * time.Minute), cloudtest.PoolName(spec.Name), cloudtest.NodeClass("default"),
		cloudtest.PoolYAML(spec.YAML()), cloudtest.WorkQueue()}, opts...)...)
	e := &env{t: t, ctx: ce.Ctx, cloud: ce.Cloud, cs: ce.Cloud.KubeClient, pool: ce.Pool, spec: spec, cfg: ce.Config, ns: ce.Namespace,
		work: ce.WorkQueue, disr: ce.DisruptionQueue, stack: ce.Stack, admin: sqs.NewFromConfig(ce.AWS)}
	e.connect(ce)
	var err error
	if e.cat, err = e.p.Catalog(e.ctx, nil); err != nil {
		t.Fatalf("catalog: %v", err)
	}
	e.controllers()
	t.Cleanup(e.terminatePool)
	return e
}

// connect builds the env's adapters over its stack's table, EC2 and work
// queue and the API server, as the stack's controller role (every
// controller runs as it).
func (e *env) connect(ce *cloudtest.Env) {
	t, ctx, cloud, table := e.t, e.ctx, e.cloud, ce.Table
	ctrl := cloudtest.RoleConfig(ctx, t, e.stack.Controller)
	var err error
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
	if e.kc, err = kube.NewClient(ce.KubeConfig(), nil); err != nil {
		t.Fatal(err)
	}
}

// controllers builds the provisioner, lifecycle handler and disruption
// controller the env steps, all handing work over the env's work queue.
func (e *env) controllers() {
	t := e.t
	wq := queue.New(e.sqs, e.work)
	requeue := func(ctx context.Context, m queue.Message, d time.Duration) error { return wq.Send(ctx, m, d) }
	var err error
	e.prov, err = provisioning.New(provisioning.Deps{
		Store: e.st, Cluster: e.kc, Launcher: e.p, Config: e.cfg,
		Catalog:     provisioning.ForNodeClasses(provisioning.ProviderCatalog(e.p, nil, e.cloud.Region, nil), e.p, e.cfg),
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
		Catalog:     provisioning.ForNodeClasses(provisioning.ProviderCatalog(e.p, nil, e.cloud.Region, nil), e.p, e.cfg),
		Unavailable: provisioning.ProviderICE(e.p),
		Provision:   e.prov.Pass(),
		Requeue:     requeue,
		Settings:    disruption.Settings{ValidationDelay: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// terminatePool terminates the env's pool's instances when the test ends.
func (e *env) terminatePool() {
	insts, err := e.p.ListClusterInstances(context.Background())
	if err != nil {
		return
	}
	for _, i := range insts {
		if i.NodePool == e.pool {
			_ = e.p.Terminate(context.Background(), i.ID)
		}
	}
}

func (e *env) deployment(name string, replicas int32, cpu string, pdbMaxUnavailable *int32) {
	e.t.Helper()
	cloudtest.Workload{Name: name, Replicas: replicas, CPU: cpu, Memory: "256Mi", NodeSelector: map[string]string{apis.NodePoolLabelKey: e.pool},
		GraceSeconds: new(int64(0)), NoServiceAccountToken: true, MaxUnavailable: pdbMaxUnavailable}.Deploy(e.ctx, e.t, e.cs, e.ns)
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

func int32p(v int32) *int32 { return &v }

// One local cloud for the package, with a fast simulated cloud.
var shared = cloudtest.NewShared("", cloudtest.NodeRegistration(300*time.Millisecond))

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
