// Package queue sends and parses the work messages nodewright functions pass
// to each other through SQS: provisioner nudges, delayed requeues (the
// serverless form of a controller's requeueAfter) and disruption wake-ups.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Kinds of work message.
const (
	KindProvision = "provision" // wake the provisioner; the payload is a hint
	KindLifecycle = "lifecycle" // resume a NodeClaim's lifecycle step
	// KindDisruption wakes the disruption function when a candidate's
	// consolidateAfter (or a decision's validation delay) runs out before
	// the next scheduled pass; the payload is a hint.
	KindDisruption = "disruption"
)

// MaxDelay is SQS's limit on DelaySeconds; longer waits are chained by the
// receiver re-sending with the remaining delay.
const MaxDelay = 15 * time.Minute

// Message is one unit of work.
type Message struct {
	Kind string `json:"kind"`
	// Subject names what the work is about: a NodeClaim for lifecycle work,
	// "namespace/pod" for a provisioning hint.
	Subject string    `json:"subject,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	SentAt  time.Time `json:"sentAt"`
	// NotBefore is when the work is due; set when the wanted delay exceeds
	// what SQS can hold a message back for.
	NotBefore time.Time `json:"notBefore,omitzero"`
	// Chain identifies a lifecycle work chain (each step sends the next);
	// the receiver drops a message whose chain is no longer the claim's
	// current one, so duplicates from at-least-once delivery die out
	// instead of running side by side. Empty for messages that start work
	// (the provisioner's, interruption's, disruption's).
	Chain string `json:"chain,omitempty"`
}

// Sender is the part of the SQS client the queue uses.
type Sender interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Queue sends work messages to one SQS queue.
type Queue struct {
	client Sender
	url    string
	now    func() time.Time
}

// New returns a Queue for the queue at url.
func New(client Sender, url string) *Queue {
	return &Queue{client: client, url: url, now: time.Now}
}

// Send enqueues msg to become visible after delay.
func (q *Queue) Send(ctx context.Context, msg Message, delay time.Duration) error {
	body, seconds, err := q.encode(msg, delay)
	if err != nil {
		return err
	}
	_, err = q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(q.url),
		MessageBody:  aws.String(body),
		DelaySeconds: seconds,
	})
	if err != nil {
		return fmt.Errorf("send %s message for %q: %w", msg.Kind, msg.Subject, err)
	}
	return nil
}

// encode is msg's body and SQS delay for a send now with delay.
func (q *Queue) encode(msg Message, delay time.Duration) (string, int32, error) {
	now := q.now()
	if msg.SentAt.IsZero() {
		msg.SentAt = now
	}
	if delay > MaxDelay {
		msg.NotBefore = now.Add(delay)
		delay = MaxDelay
	}
	if delay < 0 {
		delay = 0
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return "", 0, fmt.Errorf("encode %s message: %w", msg.Kind, err)
	}
	return string(body), int32((delay + time.Second - 1) / time.Second), nil
}

// BatchSender is the part of the SQS client SendBatch uses when the client
// has it (*sqs.Client does).
type BatchSender interface {
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// maxBatch is SQS's limit on entries per SendMessageBatch.
const maxBatch = 10

// SendBatch enqueues msgs, each to become visible after delay, ten to a
// SendMessageBatch call (one SendMessage each when the client has no batch
// call): a provisioning pass's hundreds of post-launch requeues were as many
// calls. It tries every message and returns the failures joined.
func (q *Queue) SendBatch(ctx context.Context, msgs []Message, delay time.Duration) error {
	bs, ok := q.client.(BatchSender)
	if !ok || len(msgs) == 1 {
		var errs []error
		for _, m := range msgs {
			errs = append(errs, q.Send(ctx, m, delay))
		}
		return errors.Join(errs...)
	}
	var errs []error
	for chunk := range slices.Chunk(msgs, maxBatch) {
		errs = append(errs, q.sendChunk(ctx, bs, chunk, delay))
	}
	return errors.Join(errs...)
}

// sendChunk sends up to maxBatch messages in one SendMessageBatch call.
func (q *Queue) sendChunk(ctx context.Context, bs BatchSender, msgs []Message, delay time.Duration) error {
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.url), Entries: make([]sqstypes.SendMessageBatchRequestEntry, 0, len(msgs))}
	for i, m := range msgs {
		body, seconds, err := q.encode(m, delay)
		if err != nil {
			return err
		}
		in.Entries = append(in.Entries, sqstypes.SendMessageBatchRequestEntry{
			Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(body), DelaySeconds: seconds})
	}
	out, err := bs.SendMessageBatch(ctx, in)
	if err != nil {
		return fmt.Errorf("send %d %s messages: %w", len(msgs), msgs[0].Kind, err)
	}
	var errs []error
	for _, f := range out.Failed {
		i, _ := strconv.Atoi(aws.ToString(f.Id))
		subject := ""
		if i >= 0 && i < len(msgs) {
			subject = msgs[i].Subject
		}
		errs = append(errs, fmt.Errorf("send %s message for %q: %s: %s", msgs[0].Kind, subject, aws.ToString(f.Code), aws.ToString(f.Message)))
	}
	return errors.Join(errs...)
}

// Parse decodes a message body, rejecting anything that is not a known kind
// so a malformed message is reported (and redriven to the DLQ), not dropped.
func Parse(body string) (Message, error) {
	var m Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return Message{}, fmt.Errorf("decode work message: %w", err)
	}
	switch m.Kind {
	case KindProvision, KindLifecycle, KindDisruption:
	default:
		return Message{}, fmt.Errorf("work message kind %q is not one of %s, %s, %s", m.Kind, KindProvision, KindLifecycle, KindDisruption)
	}
	return m, nil
}

// Remaining is how much longer the message should wait before its work is
// done; receivers re-send it with that delay when it is positive (SQS holds
// a message back for at most 15 minutes).
func (m Message) Remaining(now time.Time) time.Duration {
	if m.NotBefore.IsZero() || !m.NotBefore.After(now) {
		return 0
	}
	return m.NotBefore.Sub(now)
}
