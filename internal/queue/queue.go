// Package queue sends and parses the work messages nodewright functions pass
// to each other through SQS: provisioner nudges, delayed requeues (the
// serverless form of a controller's requeueAfter) and disruption wake-ups.
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
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
		return fmt.Errorf("encode %s message: %w", msg.Kind, err)
	}
	_, err = q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(q.url),
		MessageBody:  aws.String(string(body)),
		DelaySeconds: int32((delay + time.Second - 1) / time.Second),
	})
	if err != nil {
		return fmt.Errorf("send %s message for %q: %w", msg.Kind, msg.Subject, err)
	}
	return nil
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
