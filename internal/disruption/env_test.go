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
	e.deploy(n)
	e.cfg = cloudtest.LoadConfig(t, fmt.Sprintf(poolYAML, e.pool, types, disruptionBlock)+cloudtest.NodeClassYAML("default", cloud.ClusterName))
	var err error
	if e.cat, err = e.p.Catalog(ctx, nil); err != nil {
		t.Fatalf("catalog: %v", err)
	}
	e.ns = cloud.NewNamespace(t)
	e.controllers()
	t.Cleanup(e.terminatePool)
	return e
}

// deploy gives the env its own stack: a table and a work queue, the
// controller role every controller runs as, and the adapters over them.
func (e *env) deploy(n int64) {
	t, ctx, cloud := e.t, e.ctx, e.cloud
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
		Catalog:     provisioning.ProviderCatalog(e.p, nil, e.cloud.Region, nil),
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
		Catalog:     provisioning.ProviderCatalog(e.p, nil, e.cloud.Region, nil),
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

func int32p(v int32) *int32 { return &v }
