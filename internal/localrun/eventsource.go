package localrun

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nodewright/nodewright/internal/localcloud/lambdaspec"
)

// An SQS event source mapping scales as "Configuring scaling behavior for
// SQS event source mappings" says: five concurrent batches while messages
// are available, more (300 a minute, instant here) while batches come back
// full, up to 1,000 or the mapping's MaximumConcurrency, and back to five
// when traffic is low. It long-polls as Lambda does (20 s).
const (
	initialBatches       = 5
	maxBatches           = 1000
	longPoll       int32 = 20
)

// eventSource is one SQS event source mapping: it polls the queue and
// hands each batch to the function synchronously. A batch the function
// fails, or cannot take (throttled: no concurrency left), is not deleted
// and its messages return after the queue's visibility timeout, using one
// of their receives ("Using Lambda with Amazon SQS", error handling).
type eventSource struct {
	fn                    *lambdaFunction
	spec                  lambdaspec.EventSource
	client                *sqs.Client
	url, arn, region      string
	onErr                 func(error)
	wg                    *sync.WaitGroup
	atLeastOnce           *atLeastOnce
	mu                    sync.Mutex
	pollers, inflight, hi int
}

// limit is the most batches the mapping processes at once.
func (e *eventSource) limit() int {
	if e.spec.MaxConcurrency > 0 {
		return e.spec.MaxConcurrency
	}
	return maxBatches
}

// start begins polling with Lambda's initial concurrency.
func (e *eventSource) start(ctx context.Context) {
	e.atLeastOnce = &atLeastOnce{faults: e.fn.faults}
	for range min(initialBatches, e.limit()) {
		e.addPoller(ctx)
	}
}

// addPoller adds one concurrent batch reader, within the limit.
func (e *eventSource) addPoller(ctx context.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pollers >= e.limit() {
		return
	}
	e.pollers++
	e.wg.Go(func() { e.poll(ctx) })
}

// shrink lets an idle poller go while more than the initial ones run.
func (e *eventSource) shrink() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pollers > min(initialBatches, e.limit()) {
		e.pollers--
		return true
	}
	return false
}

// poll receives and processes batches, one at a time, until ctx ends or
// traffic is low enough to scale in.
func (e *eventSource) poll(ctx context.Context) {
	for ctx.Err() == nil {
		recs, err := e.receive(ctx)
		if err != nil {
			if ctx.Err() == nil {
				e.onErr(fmt.Errorf("receive from %s queue: %w", e.fn.name, err))
				sleep(ctx, time.Second)
			}
			continue
		}
		if len(recs) == e.spec.BatchSize {
			e.addPoller(ctx)
		}
		batch := e.atLeastOnce.batch(recs, e.spec.BatchSize)
		if len(batch) == 0 {
			if e.shrink() {
				return
			}
			continue
		}
		if !e.process(ctx, batch) && e.shrink() {
			return // throttled: the mapping scales in
		}
	}
}

// receive long-polls one batch.
func (e *eventSource) receive(ctx context.Context) ([]events.SQSMessage, error) {
	out, err := e.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    sdkaws.String(e.url),
		MaxNumberOfMessages:         int32(min(e.spec.BatchSize, 10)),
		WaitTimeSeconds:             e.atLeastOnce.wait(longPoll),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		return nil, err
	}
	recs := make([]events.SQSMessage, 0, len(out.Messages))
	for _, m := range out.Messages {
		recs = append(recs, events.SQSMessage{
			MessageId:      sdkaws.ToString(m.MessageId),
			ReceiptHandle:  sdkaws.ToString(m.ReceiptHandle),
			Body:           sdkaws.ToString(m.Body),
			Md5OfBody:      sdkaws.ToString(m.MD5OfBody),
			Attributes:     m.Attributes,
			EventSource:    "aws:sqs",
			EventSourceARN: e.arn,
			AWSRegion:      e.region,
		})
	}
	return recs, nil
}

// process invokes the function with one batch and deletes what it handled:
// everything but the reported batch item failures, nothing when the
// invocation failed or was throttled (then it returns false).
func (e *eventSource) process(ctx context.Context, recs []events.SQSMessage) bool {
	e.track(1)
	defer e.track(-1)
	res, err := e.fn.invoke(ctx, "sqs", events.SQSEvent{Records: recs})
	if errors.Is(err, errThrottled) {
		return false
	}
	if err != nil {
		return true // the function reported it; the messages come back
	}
	e.delete(ctx, recs, failedItems(res, e.spec.ReportBatchItemFailures))
	return true
}

// failedItems are the message IDs a partial batch response names; without
// ReportBatchItemFailures Lambda ignores the response.
func failedItems(res any, partial bool) map[string]bool {
	failed := map[string]bool{}
	if r, ok := res.(events.SQSEventResponse); ok && partial {
		for _, bf := range r.BatchItemFailures {
			failed[bf.ItemIdentifier] = true
		}
	}
	return failed
}

// delete deletes the batch's handled messages, once per receipt (a
// duplicate delivered in the same batch shares its original's).
func (e *eventSource) delete(ctx context.Context, recs []events.SQSMessage, failed map[string]bool) {
	var del []sqstypes.DeleteMessageBatchRequestEntry
	seen := map[string]bool{}
	for i, rec := range recs {
		if failed[rec.MessageId] || seen[rec.ReceiptHandle] {
			continue
		}
		seen[rec.ReceiptHandle] = true
		del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: sdkaws.String(fmt.Sprint(i)), ReceiptHandle: sdkaws.String(rec.ReceiptHandle)})
	}
	if len(del) == 0 {
		return
	}
	if _, err := e.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: sdkaws.String(e.url), Entries: del}); err != nil && ctx.Err() == nil {
		e.onErr(fmt.Errorf("delete from %s queue: %w", e.fn.name, err))
	}
}

// track counts the batches in flight and their peak.
func (e *eventSource) track(d int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.inflight += d
	e.hi = max(e.hi, e.inflight)
}

// peak is the most batches the mapping had in flight at once.
func (e *eventSource) peak() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hi
}
