package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// handlerFunc is a function's Lambda handler as functions/<name>/main.go
// passes it to lambda.Start.
type handlerFunc func(ctx context.Context, raw json.RawMessage) (any, error)

// function stands in for one Lambda function: its handler, its timeout, and
// (for singletons) reserved concurrency 1.
type function struct {
	name      string
	handle    handlerFunc
	timeout   time.Duration
	singleton bool
	mu        sync.Mutex // held per invocation when singleton
	// onResult sees every invocation's trigger, result and error.
	onResult func(fn, trigger string, res any, err error, took time.Duration)
}

// invoke runs the handler once with event, as the Lambda runtime would,
// under the function's timeout. A singleton invocation waits for the one
// running, as SQS event source mapping retries would.
func (f *function) invoke(ctx context.Context, trigger string, event any) (any, error) {
	raw, err := json.Marshal(event)
	if err != nil {
		return nil, fmt.Errorf("%s: encode %s event: %w", f.name, trigger, err)
	}
	if f.singleton {
		f.mu.Lock()
		defer f.mu.Unlock()
	}
	ictx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	start := time.Now()
	res, err := f.handle(ictx, raw)
	if f.onResult != nil && ctx.Err() == nil {
		f.onResult(f.name, trigger, res, err, time.Since(start))
	}
	return res, err
}

// tryInvoke is an asynchronous schedule invocation: dropped when a
// singleton is busy (the stack sets MaxEventAge 1 min and no retries; the
// next tick covers it).
func (f *function) tryInvoke(ctx context.Context, trigger string, event any) {
	if f.singleton {
		if !f.mu.TryLock() {
			return
		}
		f.mu.Unlock()
	}
	_, _ = f.invoke(ctx, trigger, event)
}

// scheduledEvent is what an EventBridge schedule rule delivers.
func scheduledEvent(region, account, rule string, now time.Time) map[string]any {
	return map[string]any{
		"version":     "0",
		"id":          fmt.Sprintf("%x", now.UnixNano()),
		"detail-type": "Scheduled Event",
		"source":      "aws.events",
		"account":     account,
		"time":        now.UTC().Format(time.RFC3339),
		"region":      region,
		"resources":   []string{fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", region, account, rule)},
		"detail":      map[string]any{},
	}
}

// schedule ticks fns every period until ctx ends, each function in its own
// goroutine so a slow one does not delay the others.
func schedule(ctx context.Context, wg *sync.WaitGroup, period time.Duration, region, account string, fns ...*function) {
	for _, f := range fns {
		wg.Go(func() {
			t := time.NewTicker(period)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case now := <-t.C:
					f.tryInvoke(ctx, "schedule", scheduledEvent(region, account, "nodewright-"+f.name+"-schedule", now))
				}
			}
		})
	}
}

// pollQueue is the SQS event source mapping: long-poll the queue, hand each
// batch to the function as an SQS event, delete what succeeded (everything
// but the reported batch item failures; nothing when the invocation
// failed, so the messages come back after the visibility timeout).
func pollQueue(ctx context.Context, wg *sync.WaitGroup, client *sqs.Client, region, queueURL, queueARN string, f *function, onErr func(error)) {
	wg.Go(func() {
		for ctx.Err() == nil {
			out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
				QueueUrl:                    sdkaws.String(queueURL),
				MaxNumberOfMessages:         10,
				WaitTimeSeconds:             1,
				MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
			})
			if err != nil {
				if ctx.Err() == nil {
					onErr(fmt.Errorf("receive from %s queue: %w", f.name, err))
					sleep(ctx, time.Second)
				}
				continue
			}
			if len(out.Messages) == 0 {
				continue
			}
			ev := events.SQSEvent{}
			for _, m := range out.Messages {
				ev.Records = append(ev.Records, events.SQSMessage{
					MessageId:      sdkaws.ToString(m.MessageId),
					ReceiptHandle:  sdkaws.ToString(m.ReceiptHandle),
					Body:           sdkaws.ToString(m.Body),
					Md5OfBody:      sdkaws.ToString(m.MD5OfBody),
					Attributes:     m.Attributes,
					EventSource:    "aws:sqs",
					EventSourceARN: queueARN,
					AWSRegion:      region,
				})
			}
			res, err := f.invoke(ctx, "sqs", ev)
			if err != nil {
				if ctx.Err() == nil {
					onErr(fmt.Errorf("%s invocation (SQS, %d messages): %w", f.name, len(ev.Records), err))
				}
				continue
			}
			failed := map[string]bool{}
			if r, ok := res.(events.SQSEventResponse); ok {
				for _, bf := range r.BatchItemFailures {
					failed[bf.ItemIdentifier] = true
				}
			}
			var del []sqstypes.DeleteMessageBatchRequestEntry
			for i, rec := range ev.Records {
				if !failed[rec.MessageId] {
					del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: sdkaws.String(strconv.Itoa(i)), ReceiptHandle: sdkaws.String(rec.ReceiptHandle)})
				}
			}
			if len(del) > 0 {
				if _, err := client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: sdkaws.String(queueURL), Entries: del}); err != nil && ctx.Err() == nil {
					onErr(fmt.Errorf("delete from %s queue: %w", f.name, err))
				}
			}
		}
	})
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// errorsOnly keeps the first few distinct errors for the failure report.
type errorLog struct {
	mu   sync.Mutex
	errs []error
	seen map[string]bool
}

func (l *errorLog) add(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if l.seen[err.Error()] {
		return false
	}
	l.seen[err.Error()] = true
	if len(l.errs) < 20 {
		l.errs = append(l.errs, err)
	}
	return true
}

func (l *errorLog) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}
