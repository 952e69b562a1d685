package cloudtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/store"
)

// SimOption adjusts the local cloud NewShared starts.
type SimOption func(*localcloud.Options)

// NewShared is the one local cloud of an integration test package (hand
// its Main to TestMain), named cluster, with the short simulated delays
// the controllers' tests use: instances pending and registering for
// 200 ms, shutting down for 300 ms, Karpenter's two minutes between a spot
// interruption warning and the reclaim. opts change what a package needs
// otherwise.
func NewShared(cluster string, opts ...SimOption) *localcloud.Shared {
	o := localcloud.Options{ClusterName: cluster, Sim: awssim.Options{Delays: awssim.Delays{
		Pending: 200 * time.Millisecond, NodeRegistration: 200 * time.Millisecond,
		ShuttingDown: 300 * time.Millisecond, SpotInterruption: 2 * time.Minute,
	}}}
	for _, f := range opts {
		f(&o)
	}
	return localcloud.NewShared(o)
}

// ShuttingDown sets how long a terminated instance stays shutting-down.
func ShuttingDown(d time.Duration) SimOption {
	return func(o *localcloud.Options) { o.Sim.Delays.ShuttingDown = d }
}

// NodeRegistration sets how long a running instance takes to become a Node.
func NodeRegistration(d time.Duration) SimOption {
	return func(o *localcloud.Options) { o.Sim.Delays.NodeRegistration = d }
}

// SpotInterruption sets the time between a spot interruption warning and
// the reclaim.
func SpotInterruption(d time.Duration) SimOption {
	return func(o *localcloud.Options) { o.Sim.Delays.SpotInterruption = d }
}

// CompressedTime scales EC2's request throttling (rule request-throttling)
// for a package whose loops run factor times faster than the functions'
// schedules (a lifecycle pass every 300 ms instead of every minute, say):
// the account's buckets are the documented ones times factor, so the
// package's compressed call rate meets the limits a real account's rate
// would, instead of draining one shared bucket across its tests until
// every later test waits out the SDK's retry backoff.
func CompressedTime(factor float64) SimOption {
	return func(o *localcloud.Options) {
		t := ec2sim.DefaultThrottle()
		scale := func(b *ec2sim.Bucket) { b.Capacity, b.Refill = b.Capacity*factor, b.Refill*factor }
		for _, b := range []*ec2sim.Bucket{&t.NonMutating, &t.Unfiltered, &t.Mutating, &t.LaunchResource, &t.TerminateResource} {
			scale(b)
		}
		for k, b := range t.Actions {
			scale(&b)
			t.Actions[k] = b
		}
		o.Sim.Throttle = t
	}
}

// KeepTerminatedNodes keeps the Nodes of terminated instances (no
// cloud-controller deletion), for tests of a controller's own node GC.
func KeepTerminatedNodes() SimOption {
	return func(o *localcloud.Options) { o.Sim.KeepTerminatedNodes = true }
}

// PodENI turns security groups for pods on: Nodes of ENI-trunking types
// report vpc.amazonaws.com/pod-eni (awssim Options.PodENI).
func PodENI() SimOption {
	return func(o *localcloud.Options) { o.Sim.PodENI = true }
}

// Env is one test's slice of a shared local cloud: the process environment
// pointing the SDKs at the cloud, a context bounding the test, its own
// DynamoDB table (and queues when asked for) deployed as its own stack, its
// own namespace, and its NodePool with an EC2NodeClass loaded as the
// functions load their configuration directory. Logs collects what the
// test's handlers log and is printed when the test fails.
//
// Env's fields are set once by NewEnv; tests that switch to a subtest's T
// or context keep their own copies.
type Env struct {
	T     testing.TB
	Ctx   context.Context
	Cloud *localcloud.Cloud
	// AWS is the administrator's SDK configuration: the one that deploys
	// the stack, not a function's role (see Stack and RoleConfig).
	AWS sdkaws.Config
	// Table is the test's NodeClaim table; the stack's owner value is
	// Owner(Cloud, Table).
	Table string
	// Store is the table's store as the administrator; controllers
	// reach it as Stack's controller role (see Controller).
	Store *store.Store
	Stack *localcloud.Stack
	// WorkQueue, InterruptionQueue, DisruptionQueue and ProvisionQueue
	// are the URLs of the queues the options of those names ask for.
	WorkQueue, InterruptionQueue, DisruptionQueue, ProvisionQueue string
	Namespace                                                     string
	// Pool is the NodePool's name, Config the loaded NodePool and
	// EC2NodeClass, ConfigDir the directory they were loaded from (what
	// settings.Settings.ConfigDir names).
	Pool      string
	Config    *apis.Config
	ConfigDir string
	Logs      *SyncBuffer
}

// Option shapes an Env.
type Option func(*envOptions)

type envOptions struct {
	timeout   time.Duration
	pool      string
	nodeClass string
	amiAlias  string
	edits     []func(*apistest.Pool)
	yaml      string
	work      bool
	intr      bool
	disr      bool
	prov      bool
	resources func(*Env) localcloud.StackResources
	dynamo    []func(*dynamodb.Options)
	setenv    func(*Env)
}

// Timeout bounds the Env's context (default 4 minutes).
func Timeout(d time.Duration) Option { return func(o *envOptions) { o.timeout = d } }

// PoolName names the NodePool (default: the test's name as a DNS label of
// at most 40 characters).
func PoolName(name string) Option { return func(o *envOptions) { o.pool = name } }

// NodeClass names the EC2NodeClass the pool refers to (default: the
// pool's name).
func NodeClass(name string) Option { return func(o *envOptions) { o.nodeClass = name } }

// AMIAlias gives the EC2NodeClass an AMI alias other than al2023@latest
// (e.g. windows2022@latest).
func AMIAlias(alias string) Option { return func(o *envOptions) { o.amiAlias = alias } }

// PoolLabel labels the pool's nodes key=<pool name>, so pods selecting it
// land on this test's nodes only.
func PoolLabel(key string) Option {
	return PoolSpec(func(p *apistest.Pool) { p.Labels = map[string]string{key: p.Name} })
}

// InstanceTypes adds the requirement that the pool's nodes be one of types.
func InstanceTypes(types ...string) Option {
	return PoolSpec(func(p *apistest.Pool) {
		p.Requirements = append(p.Requirements, apistest.In(catalog.LabelInstanceType, types...))
	})
}

// CapacityTypes adds the requirement that the pool's nodes be of one of
// the capacity types cts ("spot", "on-demand").
func CapacityTypes(cts ...string) Option {
	return PoolSpec(func(p *apistest.Pool) {
		p.Requirements = append(p.Requirements, apistest.In(apis.CapacityTypeLabelKey, cts...))
	})
}

// PoolSpec edits the pool's spec; edits apply in order, after the pool's
// name and node class are set.
func PoolSpec(edit func(*apistest.Pool)) Option {
	return func(o *envOptions) { o.edits = append(o.edits, edit) }
}

// PoolYAML replaces the built NodePool with the document doc; the
// EC2NodeClass is still added.
func PoolYAML(doc string) Option { return func(o *envOptions) { o.yaml = doc } }

// WorkQueue gives the stack a work queue (Env.WorkQueue).
func WorkQueue() Option { return func(o *envOptions) { o.work = true } }

// InterruptionQueue gives the stack an interruption queue
// (Env.InterruptionQueue) with the CDK stack's EventBridge rules routing
// EC2's and AWS Health's events to it.
func InterruptionQueue() Option { return func(o *envOptions) { o.intr = true } }

// DisruptionQueue gives the stack a disruption (wake-up) queue
// (Env.DisruptionQueue).
func DisruptionQueue() Option { return func(o *envOptions) { o.disr = true } }

// ProvisionQueue gives the stack a provision (nudge) queue
// (Env.ProvisionQueue).
func ProvisionQueue() Option { return func(o *envOptions) { o.prov = true } }

// Resources builds the stack's resources itself (e.g. queues with their
// own attributes) once the table exists; the table is filled in.
func Resources(f func(*Env) localcloud.StackResources) Option {
	return func(o *envOptions) { o.resources = f }
}

// DynamoDBOptions adjust the administrator's DynamoDB client that creates
// the table.
func DynamoDBOptions(opts ...func(*dynamodb.Options)) Option {
	return func(o *envOptions) { o.dynamo = append(o.dynamo, opts...) }
}

// Setenv runs f after SetEnv and before the SDK configuration is loaded,
// to change the environment (e.g. counting proxies as endpoints).
func Setenv(f func(*Env)) Option { return func(o *envOptions) { o.setenv = f } }

// NewEnv gives t its slice of the local cloud shared starts (see Env).
func NewEnv(t testing.TB, shared *localcloud.Shared, opts ...Option) *Env {
	t.Helper()
	o := envOptions{timeout: 4 * time.Minute}
	for _, f := range opts {
		f(&o)
	}
	cloud := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	t.Cleanup(cancel)
	e := &Env{T: t, Ctx: ctx, Cloud: cloud, Logs: &SyncBuffer{}, Pool: o.pool}
	t.Cleanup(func() {
		if t.Failed() && e.Logs.Len() > 0 {
			t.Logf("logs:\n%s", e.Logs.String())
		}
	})
	if e.Pool == "" {
		e.Pool = DNSName(t.Name(), 40)
	}
	SetEnv(t, cloud)
	if o.setenv != nil {
		o.setenv(e)
	}
	var err error
	if e.AWS, err = config.LoadDefaultConfig(ctx); err != nil {
		t.Fatal(err)
	}
	e.Table = TableName(e.Pool)
	e.Store = NewTable(ctx, t, store.NewDynamoDBClient(e.AWS, o.dynamo...), e.Table)
	e.Stack = Deploy(t, cloud, e.resources(o))
	e.Namespace = cloud.NewNamespace(t)
	e.ConfigDir, e.Config = o.loadPool(t, e.Pool, cloud.ClusterName)
	return e
}

// LoadPool loads the NodePool pool, shaped by opts' pool options, with its
// EC2NodeClass for cloud's cluster: what NewEnv loads as Env.Config, for
// tests that move to a fresh pool.
func LoadPool(t testing.TB, cloud *localcloud.Cloud, pool string, opts ...Option) *apis.Config {
	t.Helper()
	var o envOptions
	for _, f := range opts {
		f(&o)
	}
	_, cfg := o.loadPool(t, pool, cloud.ClusterName)
	return cfg
}

func (o envOptions) loadPool(t testing.TB, pool, cluster string) (dir string, cfg *apis.Config) {
	t.Helper()
	class := or(o.nodeClass, pool)
	doc := o.yaml
	if doc == "" {
		spec := apistest.Pool{Name: pool, NodeClass: class}
		for _, edit := range o.edits {
			edit(&spec)
		}
		doc = spec.YAML()
	}
	nc := nodeClass(class, cluster)
	nc.AMIAlias = o.amiAlias
	return loadConfig(t, apistest.Doc(doc, nc.YAML()))
}

// resources creates the queues o asks for and returns the stack's
// resources.
func (e *Env) resources(o envOptions) localcloud.StackResources {
	r := localcloud.StackResources{}
	if o.resources != nil {
		r = o.resources(e)
	}
	r.Table = e.Table
	admin := sqs.NewFromConfig(e.AWS)
	if o.work {
		e.WorkQueue = CreateQueue(e.Ctx, e.T, admin, e.Table+"-work", nil)
		r.WorkQueue = e.WorkQueue
	}
	if o.intr {
		e.InterruptionQueue = CreateQueue(e.Ctx, e.T, admin, e.Table+"-intr", nil)
		RouteInterruptionEvents(e.T, e.Cloud.AWS, e.Table, e.Table+"-intr")
		r.InterruptionQueue = e.InterruptionQueue
	}
	if o.disr {
		e.DisruptionQueue = CreateQueue(e.Ctx, e.T, admin, e.Table+"-disr", nil)
		r.DisruptionQueue = e.DisruptionQueue
	}
	if o.prov {
		e.ProvisionQueue = CreateQueue(e.Ctx, e.T, admin, e.Table+"-prov", nil)
		r.ProvisionQueue = e.ProvisionQueue
	}
	return r
}

// Owner is the Env's stack's owner value (settings.Owner).
func (e *Env) Owner() string { return Owner(e.Cloud, e.Table) }

// Controller is the SDK configuration of the stack's controller role, the
// one every controller function runs as.
func (e *Env) Controller(optFns ...func(*config.LoadOptions) error) sdkaws.Config {
	e.T.Helper()
	return RoleConfig(e.Ctx, e.T, e.Stack.Controller, optFns...)
}

// KubeConfig is the API server configuration the controllers use
// (ControllerREST), copied so one client's settings never reach another's.
func (e *Env) KubeConfig() *rest.Config { return rest.CopyConfig(e.Cloud.ControllerREST) }

var tables atomic.Int64

// TableName is a table name no other test of the process uses, for the
// NodePool pool: tests in one package, and -count runs, each get their own.
func TableName(pool string) string {
	return fmt.Sprintf("nw-%s-%d-%d", pool, time.Now().UnixNano()%1e9, tables.Add(1))
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// NewTable creates table with the store's schema through db, waits until
// it is active and returns a Store on it.
func NewTable(ctx context.Context, t testing.TB, db *dynamodb.Client, table string, opts ...store.Option) *store.Store {
	t.Helper()
	if _, err := db.CreateTable(ctx, store.Schema.CreateTableInput(table)); err != nil {
		t.Fatalf("create table: %v", err)
	}
	// The waiter's default first delay is 20 s; dynalite is ready in milliseconds.
	if err := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: sdkaws.String(table)}, time.Minute); err != nil {
		t.Fatalf("wait for table: %v", err)
	}
	s, err := store.New(db, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Owner is the owner value (settings.Owner, aws.Options.Owner) of a
// stack whose NodeClaim table is table: the table's ARN, as the CDK app sets
// it. Each test's own table makes each test its own stack, so one test's
// garbage collection never sees another's instances.
func Owner(cloud *localcloud.Cloud, table string) string {
	return cloud.TableARN(table)
}

// CreateQueue creates the SQS queue name with attrs (nil for the
// defaults) and returns its URL.
func CreateQueue(ctx context.Context, t testing.TB, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: sdkaws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	return sdkaws.ToString(out.QueueUrl)
}

// Deploy registers the test's stack (its table, queues, secret) with the
// local cloud and returns its function roles: controllers built with
// stack.Controller make every AWS call under the synthesized controller
// policy, as in AWS.
func Deploy(t testing.TB, cloud *localcloud.Cloud, r localcloud.StackResources) *localcloud.Stack {
	t.Helper()
	st, err := cloud.Deploy(r)
	if err != nil {
		t.Fatalf("deploy the test's stack: %v", err)
	}
	return st
}

// RoleConfig is the AWS SDK configuration of a function signing as a role
// of a deployed stack (e.g. stack.Controller).
func RoleConfig(ctx context.Context, t testing.TB, creds sdkaws.CredentialsProvider, optFns ...func(*config.LoadOptions) error) sdkaws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(ctx, append([]func(*config.LoadOptions) error{config.WithCredentialsProvider(creds)}, optFns...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
