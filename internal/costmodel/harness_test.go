package costmodel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// counter is a reverse proxy in front of dynalite or the AWS simulator that
// counts what the functions ask of them: DynamoDB request units (estimated
// from item bytes on the wire, see units) and SQS requests by operation.
type counter struct {
	mu       sync.Mutex
	ops      map[string]int
	rru, wru float64
	sqs      map[string]int // "SendMessage" -> n
}

func newCounter() *counter { return &counter{ops: map[string]int{}, sqs: map[string]int{}} }

type counts struct {
	ops      map[string]int
	rru, wru float64
	sqs      map[string]int
}

func (c *counter) snapshot() counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := counts{ops: map[string]int{}, sqs: map[string]int{}, rru: c.rru, wru: c.wru}
	for k, v := range c.ops {
		s.ops[k] = v
	}
	for k, v := range c.sqs {
		s.sqs[k] = v
	}
	return s
}

func (a counts) sub(b counts) counts {
	d := counts{ops: map[string]int{}, sqs: map[string]int{}, rru: a.rru - b.rru, wru: a.wru - b.wru}
	for k, v := range a.ops {
		if v-b.ops[k] != 0 {
			d.ops[k] = v - b.ops[k]
		}
	}
	for k, v := range a.sqs {
		if v-b.sqs[k] != 0 {
			d.sqs[k] = v - b.sqs[k]
		}
	}
	return d
}

func (d counts) sqsTotal() int {
	n := 0
	for _, v := range d.sqs {
		n += v
	}
	return n
}

// units estimates DynamoDB request units from the bytes of one call: a
// strongly consistent read costs 1 RRU per 4 KiB returned, a write 1 WRU per
// KiB sent. The JSON envelope inflates both a little, so the estimate errs
// high.
func units(op string, reqBytes, respBytes int) (rru, wru float64) {
	ceil := func(n, unit int) float64 { return float64(max(1, (n+unit-1)/unit)) }
	switch op {
	case "GetItem", "Query", "Scan", "BatchGetItem":
		return ceil(respBytes, 4096), 0
	case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem":
		return 0, ceil(reqBytes, 1024)
	}
	return 0, 0
}

func (c *counter) proxy(t testing.TB, target string) string {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		target := r.Header.Get("X-Amz-Target")
		rec := &sizeWriter{ResponseWriter: w}
		rp.ServeHTTP(rec, r)
		svc, op, _ := strings.Cut(target, ".")
		c.mu.Lock()
		defer c.mu.Unlock()
		switch {
		case strings.HasPrefix(svc, "DynamoDB"):
			c.ops[op]++
			rr, ww := units(op, len(body), rec.n)
			c.rru += rr
			c.wru += ww
		case svc == "AmazonSQS":
			c.sqs[op]++
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type sizeWriter struct {
	http.ResponseWriter
	n int
}

func (s *sizeWriter) Write(p []byte) (int, error) {
	s.n += len(p)
	return s.ResponseWriter.Write(p)
}

func (s *sizeWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// handler is one function's Lambda handler as functions/<name>/main.go
// hands it to the runtime.
type handler func(ctx context.Context, raw json.RawMessage) (any, error)

// invocation is what one call of a handler cost.
type invocation struct {
	fn, trigger string
	took        time.Duration
	alloc       uint64 // bytes allocated during the call (whole process)
	heap        uint64 // heap in use after the call
	logBytes    int
	d           counts
	err         error
	res         any
}

// env is one measurement run: the local cloud behind counting proxies, a
// fresh table, work queue and NodePool, and every function built through
// internal/app with the STS-token path to the cluster, as in Lambda.
type env struct {
	t        testing.TB
	ctx      context.Context
	cloud    *localcloud.Cloud
	db, sim  *counter
	logs     *cloudtest.SyncBuffer
	table    string
	st       *store.Store
	ns, pool string
	fns      map[string]handler
	calls    []invocation
	workURL  string
	cfgDir   string
}

// pool is the run's NodePool: five 2-vCPU types on-demand, emptied nodes
// removed after 15 s with no budget in the way.
func pool(name string) []cloudtest.Option {
	return []cloudtest.Option{
		cloudtest.PoolName(name), cloudtest.PoolLabel("nodewright.io/cost"),
		cloudtest.InstanceTypes("m5.large", "m5a.large", "m6i.large", "m6a.large", "m7i.large"), cloudtest.CapacityTypes("on-demand"),
		cloudtest.PoolSpec(func(p *apistest.Pool) {
			p.ConsolidationPolicy, p.ConsolidateAfter, p.Budgets = "WhenEmpty", "15s", []apistest.Budget{{Nodes: "100%"}}
		}),
	}
}

func newEnv(t testing.TB, name string, level slog.Level) *env {
	t.Helper()
	e := &env{t: t, db: newCounter(), sim: newCounter(), pool: name, fns: map[string]handler{}}
	// The functions run as the stack's controller role, under its policy,
	// and reach the cluster through EKS DescribeCluster and an STS token,
	// never a kubeconfig (as in Lambda); DynamoDB and the simulator are
	// behind the counting proxies.
	ce := cloudtest.NewEnv(t, shared, append(pool(name), cloudtest.Timeout(15*time.Minute), cloudtest.WorkQueue(), cloudtest.DisruptionQueue(),
		cloudtest.Setenv(func(ce *cloudtest.Env) {
			for _, kv := range ce.Cloud.ControllerEnv() {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			t.Setenv("KUBECONFIG", "")
			t.Setenv("AWS_ENDPOINT_URL_DYNAMODB", e.db.proxy(t, ce.Cloud.DynamoDBEndpoint))
			t.Setenv("AWS_ENDPOINT_URL", e.sim.proxy(t, ce.Cloud.AWSEndpoint))
		}))...)
	cloud, ctx, stack := ce.Cloud, ce.Ctx, ce.Stack
	e.ctx, e.cloud, e.logs, e.table, e.st, e.workURL, e.cfgDir, e.ns = ctx, cloud, ce.Logs, ce.Table, ce.Store, ce.WorkQueue, ce.ConfigDir, ce.Namespace
	s := settings.Settings{ClusterName: cloud.ClusterName, TableName: e.table, Owner: cloud.TableARN(e.table), WorkQueueURL: e.workURL, DisruptionQueueURL: ce.DisruptionQueue, ConfigDir: e.cfgDir,
		BatchIdle: 100 * time.Millisecond, BatchMax: time.Second, LogLevel: slog.LevelDebug, Rebalance: "ignore"}
	for _, fn := range []string{"provisioner", "lifecycle", "disruption", "interruption"} {
		a, err := app.New(ctx, s, app.Options{Function: fn, Out: e.logs, AWSCredentials: stack.Controller})
		if err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		h, err := a.FunctionHandler(fn)
		if err != nil {
			t.Fatal(err)
		}
		e.fns[fn] = h
	}
	return e
}

// tick is the EventBridge schedule's event.
var tick = json.RawMessage(`{"version":"0","id":"tick","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012","region":"us-west-2","time":"2026-11-22T00:00:00Z","resources":[],"detail":{}}`)

// invoke calls one handler and records what it cost. Handlers run one at a
// time, so the counters' deltas are this invocation's.
func (e *env) invoke(fn, trigger string, event json.RawMessage) invocation {
	e.t.Helper()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	alloc0 := ms.TotalAlloc
	db0, sim0, log0 := e.db.snapshot(), e.sim.snapshot(), e.logs.Len()
	start := time.Now()
	res, err := e.fns[fn](e.ctx, event)
	took := time.Since(start)
	runtime.ReadMemStats(&ms)
	d := e.db.snapshot().sub(db0)
	d.sqs = e.sim.snapshot().sub(sim0).sqs
	inv := invocation{fn: fn, trigger: trigger, took: took, alloc: ms.TotalAlloc - alloc0, heap: ms.HeapInuse,
		logBytes: e.logs.Len() - log0, d: d, err: err, res: res}
	e.calls = append(e.calls, inv)
	return inv
}

// claims returns the live claims.
func (e *env) claims() []*apis.NodeClaim {
	e.t.Helper()
	cls, err := e.st.ListNodeClaims(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return cls
}

// stateChanges is the interruption queue's SQS batch of EC2 state-change
// notifications (state) for instances, as EventBridge delivers them.
func stateChanges(region string, instances []string, state string) json.RawMessage {
	var recs []map[string]any
	now := time.Now().UTC()
	for i, id := range instances {
		env, _ := json.Marshal(map[string]any{
			"version": "0", "id": fmt.Sprintf("sc-%d-%s", i, id), "detail-type": "EC2 Instance State-change Notification",
			"source": "aws.ec2", "account": "123456789012", "time": now.Format(time.RFC3339), "region": region,
			"resources": []string{"arn:aws:ec2:" + region + ":123456789012:instance/" + id},
			"detail":    map[string]any{"instance-id": id, "state": state},
		})
		recs = append(recs, map[string]any{"messageId": fmt.Sprintf("m-%d", i), "receiptHandle": "r", "body": string(env),
			"attributes":  map[string]any{"SentTimestamp": fmt.Sprint(now.UnixMilli()), "ApproximateReceiveCount": "1"},
			"eventSource": "aws:sqs", "awsRegion": region})
	}
	b, _ := json.Marshal(map[string]any{"Records": recs})
	return b
}

// One local cloud per package; short simulated delays so instances become
// Nodes within a second.
var shared = cloudtest.NewShared("cost")

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
