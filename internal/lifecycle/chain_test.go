package lifecycle_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/lifecycle"
)

// SQS delivers at least once. A work message delivered twice must not fork
// its claim's chain into two that run side by side for ever: the second
// delivery is dropped. A chain whose message is lost is restarted by the
// scheduled pass once overdue.
func TestDuplicateWorkMessagesMerge(t *testing.T) {
	e, c, h := newEnvWithController(t)
	// A drain held by a PDB keeps the claim's chain going.
	cl, _ := e.busyClaim(c, "dup-chain")
	e.guard(t, "web", 1)
	e.mark(cl.Name, apis.DeletionReasonManual)
	e.clock.Advance(1500 * time.Millisecond) // steps of 1.5 s: requeued, not run inline
	e.send(cl.Name)
	e.deliver(h, 1)
	for round := range 4 {
		e.deliver(h, 2)
		if n := e.queueDepth(); n != 1 {
			t.Fatalf("after duplicate delivery %d the queue holds %d messages for one claim, want 1 chain", round+1, n)
		}
	}

	// Lose the chain's message; the pass restarts the chain once overdue.
	e.drainQueue()
	e.clock.Advance(3 * time.Minute)
	if res := e.tick(h); res.Requeued != 1 {
		t.Errorf("pass after a lost chain requeued %d claims, want 1", res.Requeued)
	}
	if n := e.queueDepth(); n != 1 {
		t.Errorf("after the restart the queue holds %d messages, want 1", n)
	}
}

// deliver receives one batch and hands it to the handler copies times, as
// at-least-once delivery may, then deletes it.
func (e *env) deliver(h *lifecycle.Handler, copies int) {
	e.t.Helper()
	var msgs []sqstypes.Message
	for deadline := time.Now().Add(20 * time.Second); len(msgs) == 0; {
		if time.Now().After(deadline) {
			e.t.Fatal("no work message arrived")
		}
		out, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: &e.work, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			e.t.Fatal(err)
		}
		msgs = out.Messages
	}
	for i := range copies {
		ev := events.SQSEvent{}
		for _, m := range msgs {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId + "-" + strconv.Itoa(i), Body: *m.Body})
		}
		raw, _ := json.Marshal(ev)
		res, err := h.Handle(e.ctx, raw)
		if err != nil {
			e.t.Fatal(err)
		}
		if f := res.(events.SQSEventResponse).BatchItemFailures; len(f) > 0 {
			e.t.Fatalf("work items failed: %v", f)
		}
	}
	for _, m := range msgs {
		if _, err := e.sqs.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &e.work, ReceiptHandle: m.ReceiptHandle}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// queueDepth counts the work queue's messages, delayed and in flight too.
func (e *env) queueDepth() int {
	e.t.Helper()
	out, err := e.sqs.GetQueueAttributes(e.ctx, &sqs.GetQueueAttributesInput{QueueUrl: &e.work,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, a := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"} {
		v, _ := strconv.Atoi(out.Attributes[a])
		n += v
	}
	return n
}

// drainQueue deletes every message, delayed ones once they show.
func (e *env) drainQueue() {
	e.t.Helper()
	for e.queueDepth() > 0 {
		out, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: &e.work, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, m := range out.Messages {
			if _, err := e.sqs.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &e.work, ReceiptHandle: m.ReceiptHandle}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}
