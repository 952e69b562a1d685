package karpenter_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/settings"
)

type handler func(context.Context, json.RawMessage) (any, error)

// nodewright runs the four controller functions, built through internal/app
// as the Lambda functions are and signing as the stack's controller role,
// fed as their triggers would: every period a schedule tick to the
// provisioner and lifecycle (and every third to disruption), and whatever
// the work and interruption queues hold.
type nodewright struct {
	e   *cloudtest.Env
	sqs *sqs.Client
	fns map[string]handler
}

func startNodewright(t *testing.T, e *cloudtest.Env, period time.Duration) {
	t.Helper()
	n := &nodewright{e: e, sqs: sqs.NewFromConfig(e.Controller()), fns: map[string]handler{}}
	s := settings.Settings{ClusterName: e.Cloud.ClusterName, TableName: e.Table, Owner: e.Owner(), WorkQueueURL: e.WorkQueue,
		BatchIdle: 200 * time.Millisecond, BatchMax: 2 * time.Second, Rebalance: "ignore"}
	for _, fn := range []string{"provisioner", "lifecycle", "interruption", "disruption"} {
		a, err := app.New(e.Ctx, s, app.Options{Function: fn, Out: e.Logs, KubeREST: e.KubeConfig(), Config: e.Config, AWSCredentials: e.Stack.Controller})
		if err != nil {
			t.Fatal(err)
		}
		h, err := a.FunctionHandler(fn)
		if err != nil {
			t.Fatalf("%s: %v", fn, err)
		}
		n.fns[fn] = h
	}
	ctx, stop := context.WithCancel(e.Ctx)
	var wg sync.WaitGroup
	wg.Go(func() { n.loop(ctx, period) })
	t.Cleanup(func() { stop(); wg.Wait() })
}

var tick = json.RawMessage(`{"version":"0","id":"tick","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)

func (n *nodewright) loop(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for i := 0; ctx.Err() == nil; i++ {
		_, _ = n.call(ctx, "provisioner", tick)
		n.queue(ctx, "interruption", n.e.InterruptionQueue)
		n.queue(ctx, "lifecycle", n.e.WorkQueue)
		_, _ = n.call(ctx, "lifecycle", tick)
		if i%3 == 0 {
			_, _ = n.call(ctx, "disruption", tick)
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

func (n *nodewright) call(ctx context.Context, fn string, ev json.RawMessage) (any, error) {
	res, err := n.fns[fn](ctx, ev)
	if err != nil && ctx.Err() == nil {
		n.e.T.Logf("%s: %v", fn, err)
	}
	return res, err
}

// queue hands what url holds to fn as one SQS batch and deletes the
// records it did not report as failed.
func (n *nodewright) queue(ctx context.Context, fn, url string) {
	out, err := n.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) == 0 {
		return
	}
	sent := strconv.FormatInt(time.Now().UnixMilli(), 10)
	records := make([]events.SQSMessage, len(out.Messages))
	for i, m := range out.Messages {
		records[i] = events.SQSMessage{MessageId: aws.ToString(m.MessageId), Body: aws.ToString(m.Body),
			ReceiptHandle: aws.ToString(m.ReceiptHandle), Attributes: map[string]string{"SentTimestamp": sent}}
	}
	raw, _ := json.Marshal(events.SQSEvent{Records: records})
	res, err := n.call(ctx, fn, raw)
	if err != nil {
		return // the messages come back after their visibility timeout
	}
	failed := map[string]bool{}
	if resp, ok := res.(events.SQSEventResponse); ok {
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
	}
	for _, m := range out.Messages {
		if !failed[*m.MessageId] {
			_, _ = n.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
		}
	}
}
