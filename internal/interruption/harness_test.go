package interruption_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/app"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/interruption"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// batch is one invocation of the handler by the test's event source mapping.
type batch struct {
	received time.Time // ReceiveMessage returned
	returned time.Time // the handler returned
	records  []events.SQSMessage
	resp     events.SQSEventResponse
	err      error
}

// harness is one test's slice of the shared cloud: its own table, NodePool,
// namespace, interruption queue + DLQ and EventBridge rules, the
// interruption handler fed by an SQS poller (Lambda's event source mapping)
// and the lifecycle controller ticking (registration, the drain after the
// handler's first step, termination).
type harness struct {
	t       testing.TB
	ctx     context.Context
	pool    string
	ns      string
	cloud   *localcloud.Cloud
	sim     *awssim.Server
	table   string
	store   *store.Store
	cfg     *apis.Config
	logs    *cloudtest.SyncBuffer
	sqs     *sqs.Client
	qURL    string
	qName   string
	dlqName string
	stack   *localcloud.Stack

	app     *app.App
	handler atomic.Pointer[interruption.Handler]
	// dead, when its process has crashed, keeps the poller from deleting
	// the batch: a killed Lambda acknowledges nothing.
	dead atomic.Pointer[cloudtest.Crasher]

	mu      sync.Mutex
	batches []batch
}

const maxReceiveCount = 3

var harnesses atomic.Int64

func newHarness(t testing.TB) *harness {
	t.Helper()
	// Unique per harness: a benchmark builds one per run under one name.
	h := &harness{t: t, pool: fmt.Sprintf("%s-%d", cloudtest.DNSName(t.Name(), 30), harnesses.Add(1))}
	e := cloudtest.NewEnv(t, shared, cloudtest.PoolName(h.pool), cloudtest.PoolLabel("nodewright.io/test"),
		cloudtest.InstanceTypes("m5.large", "m5.xlarge"), cloudtest.CapacityTypes("spot", "on-demand"),
		cloudtest.Resources(func(e *cloudtest.Env) localcloud.StackResources {
			h.ctx, h.cloud, h.sim, h.sqs = e.Ctx, e.Cloud, e.Cloud.AWS, sqs.NewFromConfig(e.AWS)
			h.createQueues()
			return localcloud.StackResources{InterruptionQueue: h.qName}
		}))
	h.table, h.store, h.ns, h.cfg, h.logs, h.stack = e.Table, e.Store, e.Namespace, e.Config, e.Logs, e.Stack
	t.Cleanup(h.terminateAll)
	// The function and its SQS event source run as the stack's controller
	// role, as Lambda's event source mapping uses the execution role.
	h.sqs = sqs.NewFromConfig(e.Controller())
	h.app = h.newApp(interruption.RebalanceIgnore)
	h.setHandler(h.app)
	h.startLoops()
	return h
}

// createQueues creates the interruption queue with its DLQ (as the CDK stack
// does, with a short visibility timeout and maxReceiveCount so redrive
// happens within the test) and the stack's four EventBridge rules.
func (h *harness) createQueues() {
	h.t.Helper()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	h.qName, h.dlqName = "intr-"+h.pool+"-"+suffix, "intr-"+h.pool+"-"+suffix+"-dlq"
	cloudtest.CreateQueue(h.ctx, h.t, h.sqs, h.dlqName, nil)
	redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": h.sim.SQS().QueueARN(h.dlqName), "maxReceiveCount": maxReceiveCount})
	h.qURL = cloudtest.CreateQueue(h.ctx, h.t, h.sqs, h.qName, map[string]string{
		"VisibilityTimeout": "1", "RedrivePolicy": string(redrive),
	})
	cloudtest.RouteInterruptionEvents(h.t, h.sim, h.qName, h.qName)
}

// newApp builds the function's App as app.Run would, with the test's
// table, configuration and admin kube config.
func (h *harness) newApp(rebalance string) *app.App {
	h.t.Helper()
	s := settings.Settings{ClusterName: h.cloud.ClusterName, TableName: h.table, Owner: cloudtest.Owner(h.cloud, h.table), Rebalance: rebalance,
		BatchIdle: 100 * time.Millisecond, BatchMax: 2 * time.Second, LogLevel: slog.LevelDebug}
	a, err := app.New(h.ctx, s, app.Options{Function: "interruption", Out: h.logs, KubeREST: h.cloud.ControllerREST, Config: h.cfg, AWSCredentials: h.stack.Controller})
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

func (h *harness) setHandler(a *app.App) {
	h.t.Helper()
	hd, err := a.InterruptionHandler()
	if err != nil {
		h.t.Fatal(err)
	}
	h.handler.Store(hd)
}

// startLoops runs the SQS event source mapping for the interruption
// function and the lifecycle controller's schedule (every 300 ms here).
func (h *harness) startLoops() {
	ctx, cancel := context.WithCancel(h.ctx)
	var wg sync.WaitGroup
	h.t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { h.poll(ctx) })
	lc, err := lifecycle.New(lifecycle.Deps{Store: h.app.Store, Cluster: h.app.Kube, Cloud: h.app.EC2, Config: h.cfg,
		Log: h.app.Log.With("function", "lifecycle"), Holder: "lifecycle-" + h.pool})
	if err != nil {
		h.t.Fatal(err)
	}
	wg.Go(func() {
		t := time.NewTicker(300 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// h.ctx, not ctx: stopping the loop must not abort requests in
				// flight (dynalite dies on an aborted request).
				if _, err := lc.ReconcileAll(h.ctx); err != nil && ctx.Err() == nil {
					h.app.Log.Warn("lifecycle pass", "error", err.Error())
				}
			}
		}
	})
}

// poll is Lambda's SQS event source mapping: batches of up to 10, deleting
// everything but the reported batch item failures.
func (h *harness) poll(ctx context.Context) {
	for ctx.Err() == nil {
		out, err := h.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: sdkaws.String(h.qURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil || len(out.Messages) == 0 {
			continue
		}
		b := batch{received: time.Now()}
		ev := events.SQSEvent{}
		for _, m := range out.Messages {
			ev.Records = append(ev.Records, events.SQSMessage{
				MessageId: sdkaws.ToString(m.MessageId), ReceiptHandle: sdkaws.ToString(m.ReceiptHandle),
				Body: sdkaws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs",
				EventSourceARN: h.sim.SQS().QueueARN(h.qName),
			})
		}
		b.records = ev.Records
		raw, _ := json.Marshal(ev)
		res, err := h.handler.Load().Handle(h.ctx, raw)
		b.returned, b.err = time.Now(), err
		if err == nil {
			b.resp = res.(events.SQSEventResponse)
		}
		failed := map[string]bool{}
		for _, f := range b.resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		killed := h.dead.Load() != nil && h.dead.Load().Crashed()
		for _, r := range ev.Records {
			if err == nil && !failed[r.MessageId] && !killed {
				_, _ = h.sqs.DeleteMessage(h.ctx, &sqs.DeleteMessageInput{QueueUrl: sdkaws.String(h.qURL), ReceiptHandle: sdkaws.String(r.ReceiptHandle)})
			}
		}
		h.mu.Lock()
		h.batches = append(h.batches, b)
		h.mu.Unlock()
	}
}

// handled returns the batches that carried a record whose body contains s.
func (h *harness) handled(s string) []batch {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []batch
	for _, b := range h.batches {
		for _, r := range b.records {
			if strings.Contains(r.Body, s) {
				out = append(out, b)
				break
			}
		}
	}
	return out
}

func (h *harness) eventually(what string, d time.Duration, f func() (bool, string)) {
	h.t.Helper()
	cloudtest.Eventually(h.t, what, d, f)
}

// firstBatch waits for the first handled batch whose records contain s and
// fails the test unless the handler took it without failures.
func (h *harness) firstBatch(what, s string) batch {
	h.t.Helper()
	var b batch
	h.eventually(what, 30*time.Second, func() (bool, string) {
		bs := h.handled(s)
		if len(bs) == 0 {
			return false, "not yet"
		}
		b = bs[0]
		return true, ""
	})
	if b.err != nil || len(b.resp.BatchItemFailures) != 0 {
		h.t.Fatalf("handler: %v %+v", b.err, b.resp)
	}
	return b
}

func (h *harness) terminateAll() {
	for _, inst := range h.sim.EC2().Instances() {
		for _, tg := range inst.Tags {
			if sdkaws.ToString(tg.Key) == nwaws.TagNodePool && sdkaws.ToString(tg.Value) == h.pool {
				_ = h.sim.EC2().Terminate(sdkaws.ToString(inst.InstanceId), "test cleanup")
			}
		}
	}
}

// One local cloud for the package. Spot instances get Karpenter's two
// minutes between the warning and the reclaim, in real time. The harness's
// lifecycle runs every 300 ms, 200 times its schedule: EC2's throttling is
// scaled to match (with the documented buckets the crash sweeps' later
// subtests each waited out seconds of retry backoff, and the package took
// 36 minutes instead of 5).
var shared = cloudtest.NewShared("intr", cloudtest.CompressedTime(200))

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
