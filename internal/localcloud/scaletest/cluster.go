package scaletest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/settings"
)

// Cluster is a seeded scale cluster with nodewright's provisioner,
// lifecycle and disruption functions built as in Lambda: through
// internal/app, signing as the stack's controller role, reaching the
// cluster through EKS and an STS token, with DynamoDB and the AWS
// simulator behind counting proxies.
type Cluster struct {
	Env   *cloudtest.Env
	Shape Shape
	t     testing.TB
	ctx   context.Context
	// admin is a clientset without client-side rate limits, for seeding
	// and scraping the API server's metrics.
	admin   kubernetes.Interface
	db, sim *wireCounter
	fns     map[string]handler
	// kubes are the functions' API server clients.
	kubes []*kube.Client
	// pools are the seeded pools: template node, pod size.
	pools []*seedPool
}

// handler is one function's Lambda handler.
type handler func(ctx context.Context, raw json.RawMessage) (any, error)

// Functions a Cluster runs.
const (
	Provisioner = "provisioner"
	Lifecycle   = "lifecycle"
	Disruption  = "disruption"
)

// New starts a scale cluster of shape s on shared's local cloud: the
// stack, the functions, one real node per pool, then the seeded nodes,
// claims, instances and bound pods; it returns once KWOK runs every pod
// and a lifecycle pass has looked at every node (the steady state the
// measurements start from). The pending burst is created by Burst.
func New(t testing.TB, shared *localcloud.Shared, s Shape) *Cluster {
	t.Helper()
	if s.Workers == 0 {
		s.Workers = 48
	}
	c := &Cluster{Shape: s, t: t, db: &wireCounter{}, sim: &wireCounter{}, fns: map[string]handler{}}
	c.Env = cloudtest.NewEnv(t, shared, append(s.envOptions(), cloudtest.Setenv(c.setenv))...)
	c.ctx = c.Env.Ctx
	cfg := rest.CopyConfig(c.Env.Cloud.REST)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.AcceptContentTypes, cfg.ContentType = "application/vnd.kubernetes.protobuf,application/json", "application/vnd.kubernetes.protobuf"
	var err error
	if c.admin, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	c.buildFunctions()
	start := time.Now()
	c.provisionTemplates()
	c.seed()
	c.settle()
	t.Logf("scale cluster %s seeded in %s", s.Name(), time.Since(start).Round(time.Second))
	return c
}

// setenv makes the functions sign as the controller role and find the
// cluster through EKS (KUBECONFIG unset), as in Lambda, and puts the
// counting proxies in front of DynamoDB and the simulator.
func (c *Cluster) setenv(e *cloudtest.Env) {
	for _, kv := range e.Cloud.ControllerEnv() {
		k, v, _ := strings.Cut(kv, "=")
		c.t.Setenv(k, v)
	}
	c.t.Setenv("KUBECONFIG", "")
	c.t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", c.db.front(c.t, e.Cloud.DynamoDBEndpoint))
	c.t.Setenv("AWS_ENDPOINT_URL", c.sim.front(c.t, e.Cloud.AWSEndpoint))
}

// buildFunctions builds the three functions through internal/app. The
// provisioner batches for 100 ms idle and 1 s at most (the stack's
// defaults wait for a burst to settle; the harness creates it whole).
func (c *Cluster) buildFunctions() {
	e := c.Env
	s := settings.Settings{
		ClusterName: e.Cloud.ClusterName, TableName: e.Table, Owner: e.Owner(), ConfigDir: e.ConfigDir,
		WorkQueueURL: e.WorkQueue, DisruptionQueueURL: e.DisruptionQueue,
		BatchIdle: 100 * time.Millisecond, BatchMax: time.Second, LogLevel: slog.LevelInfo, Rebalance: "ignore",
	}
	for _, fn := range []string{Provisioner, Lifecycle, Disruption} {
		a, err := app.New(c.ctx, s, app.Options{Function: fn, Out: e.Logs, AWSCredentials: e.Stack.Controller})
		if err != nil {
			c.t.Fatalf("%s: %v", fn, err)
		}
		c.kubes = append(c.kubes, a.Kube)
		h, err := a.FunctionHandler(fn)
		if err != nil {
			c.t.Fatalf("%s: %v", fn, err)
		}
		c.fns[fn] = h
	}
}

// scheduledEvent is the EventBridge schedule's event every function's
// periodic pass starts from.
var scheduledEvent = json.RawMessage(`{"version":"0","id":"scale","detail-type":"Scheduled Event","source":"aws.events",` +
	`"account":"123456789012","region":"us-west-2","time":"2026-11-22T00:00:00Z","resources":[],"detail":{}}`)

// Invoke runs one scheduled pass of function fn (Provisioner, Lifecycle,
// Disruption) and returns its result.
func (c *Cluster) Invoke(fn string) (any, error) {
	h, ok := c.fns[fn]
	if !ok {
		return nil, fmt.Errorf("scaletest: no function %q", fn)
	}
	return h(c.ctx, scheduledEvent)
}

// FullLists makes the functions list everything fresh each pass (on) or
// use cached snapshots where they do (off): kube.Client.FullLists, to
// measure one against the other on the same cluster.
func (c *Cluster) FullLists(on bool) {
	for _, k := range c.kubes {
		k.FullLists(on)
	}
}

// Pass runs one scheduled pass of fn and measures it.
func (c *Cluster) Pass(fn string) (Cost, any, error) {
	var res any
	cost, err := c.measure(func() (err error) {
		res, err = c.Invoke(fn)
		return err
	})
	return cost, res, err
}
