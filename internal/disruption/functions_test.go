package disruption_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/settings"
)

// queueFunction is a function as deployed behind an SQS queue: an event
// source mapping polls the queue as the stack's controller role and hands
// each batch to the real handler, built by the composition root over the
// environment's table, configuration and work queue (so the lifecycle the
// environment steps carries drains on). What the handler did not report
// failed is deleted (nothing when the invocation failed).
type queueFunction struct {
	logs cloudtest.SyncBuffer

	mu      sync.Mutex
	batches []queueBatch
}

type queueBatch struct {
	received time.Time
	bodies   []string
	resp     events.SQSEventResponse
	err      error
}

// functionApp builds function fn's App as the stack's controller role,
// over the environment's settings adjusted by edit.
func functionApp(e *env, fn string, stack *localcloud.Stack, logs io.Writer, edit func(*settings.Settings)) *app.App {
	e.t.Helper()
	s := settings.Settings{ClusterName: e.cloud.ClusterName, TableName: e.st.Table(), Owner: cloudtest.Owner(e.cloud, e.st.Table()), WorkQueueURL: e.work,
		BatchIdle: 100 * time.Millisecond, BatchMax: 2 * time.Second, LogLevel: slog.LevelInfo}
	edit(&s)
	a, err := app.New(e.ctx, s, app.Options{Function: fn, Out: logs, KubeREST: e.cloud.ControllerREST, Config: e.cfg, AWSCredentials: stack.Controller})
	if err != nil {
		e.t.Fatalf("%s app: %v", fn, err)
	}
	return a
}

// serve is the event source mapping of queue name (URL url) for handle,
// until the test ends.
func (f *queueFunction) serve(e *env, stack *localcloud.Stack, name, url string, handle func(context.Context, json.RawMessage) (any, error)) {
	t := e.t
	poller := sqs.NewFromConfig(cloudtest.RoleConfig(e.ctx, t, stack.Controller))
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		for ctx.Err() == nil {
			out, err := poller.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil || len(out.Messages) == 0 {
				continue
			}
			b := queueBatch{received: time.Now()}
			ev := events.SQSEvent{}
			for _, m := range out.Messages {
				ev.Records = append(ev.Records, events.SQSMessage{MessageId: sdkaws.ToString(m.MessageId), ReceiptHandle: sdkaws.ToString(m.ReceiptHandle),
					Body: sdkaws.ToString(m.Body), EventSource: "aws:sqs", EventSourceARN: e.cloud.AWS.SQS().QueueARN(name)})
				b.bodies = append(b.bodies, sdkaws.ToString(m.Body))
			}
			raw, _ := json.Marshal(ev)
			// e.ctx, not ctx: stopping the loop must not abort a batch midway
			// (dynalite does not survive aborted requests well).
			res, err := handle(e.ctx, raw)
			b.err = err
			if err == nil {
				b.resp = res.(events.SQSEventResponse)
			}
			failed := map[string]bool{}
			for _, f := range b.resp.BatchItemFailures {
				failed[f.ItemIdentifier] = true
			}
			for _, r := range ev.Records {
				if err == nil && !failed[r.MessageId] {
					_, _ = poller.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: sdkaws.String(r.ReceiptHandle)})
				}
			}
			f.mu.Lock()
			f.batches = append(f.batches, b)
			f.mu.Unlock()
		}
	})
}

// handled returns the first batch that carried a message containing s.
func (f *queueFunction) handled(s string) (queueBatch, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.batches {
		for _, body := range b.bodies {
			if strings.Contains(body, s) {
				return b, true
			}
		}
	}
	return queueBatch{}, false
}

// received returns the batches handled so far.
func (f *queueFunction) received() []queueBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]queueBatch(nil), f.batches...)
}
