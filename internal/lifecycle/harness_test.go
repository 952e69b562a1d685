package lifecycle_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
)

// defaultPool is the env's NodePool "default" (on the EC2NodeClass
// "default"): tainted and labelled for a team, a startup taint, expiry and
// a drain bound, WhenEmpty after 5 s, a budget of 10 nodes.
func defaultPool() apistest.Pool {
	return apistest.Pool{
		Labels:                 map[string]string{"team": "payments"},
		Requirements:           []apistest.Req{apistest.In(apis.CapacityTypeLabelKey, "on-demand")},
		Taints:                 []apistest.Taint{{Key: "dedicated", Value: "payments", Effect: "NoSchedule"}},
		StartupTaints:          []apistest.Taint{{Key: "example.com/agent", Effect: "NoSchedule"}},
		ExpireAfter:            "720h",
		TerminationGracePeriod: "1h",
		ConsolidationPolicy:    "WhenEmpty",
		ConsolidateAfter:       "5s",
		Budgets:                []apistest.Budget{{Nodes: "10"}},
	}
}

type env struct {
	t     testing.TB
	ctx   context.Context
	cloud *localcloud.Cloud
	cs    kubernetes.Interface
	// The lifecycle's clients, as the stack's controller role.
	controllerClients
	ec2   *ec2.Client
	work  string // work queue URL
	prov  string // provision queue URL
	cfg   *apis.Config
	clock *cloudtest.Clock
	cat   *catalog.Catalog
	ns    string
	// owner is the env's stack owner value (its table's ARN).
	owner string
	// stack holds the env's function roles (the controller's policy is
	// the synthesized template's).
	stack *localcloud.Stack

	// pool is the NodePool the env loads, unless configYAML replaces it.
	pool       apistest.Pool
	configYAML string
	// id makes claim names unique across tests and -count runs: a claim
	// name determines its CreateFleet ClientToken, and a reused token
	// returns the earlier (terminated) instance.
	id int64
}

var seq atomic.Int64

type envOpt func(*env)

func withBudget(nodes string) envOpt {
	return func(e *env) { e.pool.Budgets = []apistest.Budget{{Nodes: nodes}} }
}

// withPool edits the default pool.
func withPool(edit func(*apistest.Pool)) envOpt { return func(e *env) { edit(&e.pool) } }

// withConfig replaces the NodePool YAML (the EC2NodeClass "default" is
// added).
func withConfig(yaml string) envOpt { return func(e *env) { e.configYAML = yaml } }

func newEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	e := &env{t: t, clock: &cloudtest.Clock{}, pool: defaultPool(), id: seq.Add(1)}
	for _, o := range opts {
		o(e)
	}
	doc := e.configYAML
	if doc == "" {
		doc = e.pool.YAML()
	}
	ce := cloudtest.NewEnv(t, shared, cloudtest.PoolName("default"), cloudtest.NodeClass("default"), cloudtest.PoolYAML(doc), cloudtest.WorkQueue(), cloudtest.ProvisionQueue())
	e.ctx, e.cloud, e.cs, e.work, e.cfg, e.ns = ce.Ctx, ce.Cloud, ce.Cloud.KubeClient, ce.WorkQueue, ce.Config, ce.Namespace
	e.prov = ce.ProvisionQueue
	e.owner, e.stack, e.ec2 = ce.Owner(), ce.Stack, ec2.NewFromConfig(ce.AWS)
	// Everything the lifecycle does runs as the stack's controller role.
	e.controllerClients = e.connect(ce.Table, rest.CopyConfig(ce.Cloud.ControllerREST))
	var err error
	if e.cat, err = e.p.Catalog(e.ctx, nil); err != nil {
		t.Fatalf("catalog: %v", err)
	}
	return e
}

// controllerClients are the lifecycle's adapters over the real servers,
// as the stack's controller role: the table, EC2, the work queue and the
// API server.
type controllerClients struct {
	st  *store.Store
	p   *nwaws.Provider
	kc  *kube.Client
	sqs *sqs.Client
}

// connect builds controllerClients over table and the env's stack;
// awsOpts and restCfg let crash tests send every call through a Crasher.
func (e *env) connect(table string, restCfg *rest.Config, awsOpts ...func(*config.LoadOptions) error) controllerClients {
	e.t.Helper()
	ctrl := cloudtest.RoleConfig(e.ctx, e.t, e.stack.Controller, awsOpts...)
	st, err := store.New(store.NewDynamoDBClient(ctrl), table, store.WithClock(e.clock.Now))
	if err != nil {
		e.t.Fatal(err)
	}
	clientOpts := append([]func(*config.LoadOptions) error{config.WithCredentialsProvider(e.stack.Controller)}, awsOpts...)
	clients, _, err := nwaws.NewClients(e.ctx, e.cloud.Region, clientOpts...)
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := nwaws.New(nwaws.Options{ClusterName: e.cloud.ClusterName, Region: e.cloud.Region, Owner: e.owner, Now: e.clock.Now}, clients, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	kc, err := kube.NewClient(restCfg, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return controllerClients{st: st, p: p, kc: kc, sqs: sqs.NewFromConfig(ctrl)}
}

// deps are the lifecycle's adapters over the real servers; requeues go to
// the real (simulated) SQS work queue.
func (e *env) deps() lifecycle.Deps { return e.depsOver(e.controllerClients) }

// depsOver are deps() over other clients of the same servers.
func (e *env) depsOver(cc controllerClients) lifecycle.Deps {
	return lifecycle.Deps{Store: cc.st, Cluster: cc.kc, Cloud: cc.p, Config: e.cfg, Now: e.clock.Now, Requeue: e.requeueVia(cc.sqs),
		Provision: queue.New(cc.sqs, e.prov).Send}
}

// awaitNudge waits for a provisioner nudge about subject on the provision
// queue (read as the controller role, as the provisioner reads it).
func (e *env) awaitNudge(subject string) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		out, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: sdkaws.String(e.prov), WaitTimeSeconds: 1, MaxNumberOfMessages: 10})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, m := range out.Messages {
			if msg, err := queue.Parse(sdkaws.ToString(m.Body)); err == nil && msg.Kind == queue.KindProvision && msg.Subject == subject {
				return
			}
		}
	}
	e.t.Fatalf("no provisioner nudge about %s", subject)
}

// requeueVia sends work messages to the env's work queue through c.
func (e *env) requeueVia(c *sqs.Client) func(context.Context, queue.Message, time.Duration) error {
	wq := queue.New(c, e.work)
	return func(ctx context.Context, msg queue.Message, d time.Duration) error { return wq.Send(ctx, msg, d) }
}

// newController is lifecycle.New, failing the test on error.
func (e *env) newController(d lifecycle.Deps) *lifecycle.Controller {
	e.t.Helper()
	c, err := lifecycle.New(d)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) handler(d lifecycle.Deps) *lifecycle.Handler {
	h, err := lifecycle.NewHandler(d)
	if err != nil {
		e.t.Fatal(err)
	}
	return h
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

// One local cloud for the package. Nodes of terminated instances are kept
// (no cloud-controller deletion) so the lifecycle's own node GC is what
// removes them.
var shared = cloudtest.NewShared("", cloudtest.KeepTerminatedNodes())

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
