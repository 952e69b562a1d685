package queue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim"
)

func TestParseRejectsUnknown(t *testing.T) {
	for _, body := range []string{``, `{}`, `{"kind":"launch"}`, `[1]`} {
		if _, err := Parse(body); err == nil {
			t.Errorf("%q accepted", body)
		}
	}
	m, err := Parse(`{"kind":"lifecycle","subject":"default-abc","sentAt":"2026-11-21T00:00:00Z"}`)
	if err != nil || m.Kind != KindLifecycle || m.Subject != "default-abc" {
		t.Fatalf("%+v %v", m, err)
	}
}

// Over the real SQS wire protocol (the local simulator): a message sent with
// a delay stays invisible until then and arrives intact.
func TestSendOverSQSWire(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test (simulator on loopback)")
	}
	sim, err := awssim.New(awssim.Options{ClusterName: "queue-test", KubernetesVersion: "1.36"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	client := sqs.New(sqs.Options{
		Region:       "us-west-2",
		BaseEndpoint: aws.String(sim.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider(awssim.DefaultAccessKeyID, awssim.DefaultSecretAccessKey, ""),
	})
	ctx := context.Background()
	created, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("work")})
	if err != nil {
		t.Fatal(err)
	}
	q := New(client, aws.ToString(created.QueueUrl))
	if err := q.Send(ctx, Message{Kind: KindLifecycle, Subject: "default-x1", Reason: "registration"}, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := q.Send(ctx, Message{Kind: KindProvision, Subject: "default/inflate-0"}, 0); err != nil {
		t.Fatal(err)
	}
	first, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Messages) != 1 {
		t.Fatalf("delayed message visible early: got %d messages", len(first.Messages))
	}
	if m, err := Parse(aws.ToString(first.Messages[0].Body)); err != nil || m.Kind != KindProvision || m.SentAt.IsZero() {
		t.Fatalf("%+v %v", m, err)
	}
	later, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(later.Messages) != 1 {
		t.Fatalf("delayed message never arrived")
	}
	m, err := Parse(aws.ToString(later.Messages[0].Body))
	if err != nil || m.Subject != "default-x1" || m.Reason != "registration" {
		t.Fatalf("%+v %v", m, err)
	}
}

func TestLongDelaysAreChained(t *testing.T) {
	var got *sqs.SendMessageInput
	q := New(senderFunc(func(in *sqs.SendMessageInput) { got = in }), "url")
	now := time.Unix(1000, 0)
	q.now = func() time.Time { return now }
	if err := q.Send(context.Background(), Message{Kind: KindLifecycle, Subject: "c"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got.DelaySeconds != 900 {
		t.Fatalf("delay %d, want SQS's 900 s maximum", got.DelaySeconds)
	}
	m, _ := Parse(aws.ToString(got.MessageBody))
	if !m.NotBefore.Equal(now.Add(time.Hour)) {
		t.Fatalf("NotBefore %v", m.NotBefore)
	}
}

type senderFunc func(*sqs.SendMessageInput)

func (f senderFunc) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f(in)
	return &sqs.SendMessageOutput{}, nil
}

func TestRemaining(t *testing.T) {
	now := time.Unix(1000, 0)
	if (Message{}).Remaining(now) != 0 {
		t.Fatal("message without NotBefore must be due")
	}
	m := Message{NotBefore: now.Add(time.Minute)}
	if m.Remaining(now) != time.Minute || m.Remaining(now.Add(2*time.Minute)) != 0 {
		t.Fatal("remaining wrong")
	}
}

// batchSender records SendMessageBatch calls and fails the entries whose
// subject is "bad".
type batchSender struct {
	senderFunc
	batches [][]string // subjects per call
}

func (b *batchSender) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var subjects []string
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		m, err := Parse(aws.ToString(e.MessageBody))
		if err != nil || e.DelaySeconds != 30 {
			return nil, fmt.Errorf("entry %+v: %w", e, err)
		}
		subjects = append(subjects, m.Subject)
		if m.Subject == "bad" {
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("try again")})
		}
	}
	b.batches = append(b.batches, subjects)
	return out, nil
}

// A pass's requeues go ten to a call; a failed entry is reported by its
// subject and does not stop the others.
func TestSendBatchTenToACall(t *testing.T) {
	var msgs []Message
	for i := range 23 {
		msgs = append(msgs, Message{Kind: KindLifecycle, Subject: fmt.Sprintf("c-%d", i)})
	}
	msgs[12].Subject = "bad"
	b := &batchSender{}
	err := New(b, "url").SendBatch(context.Background(), msgs, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Fatalf("error %v, want the failed entry's", err)
	}
	if len(b.batches) != 3 || len(b.batches[0]) != 10 || len(b.batches[1]) != 10 || len(b.batches[2]) != 3 || b.batches[2][2] != "c-22" {
		t.Fatalf("batches %v", b.batches)
	}
	// A client without the batch call sends them one by one.
	sent := 0
	if err := New(senderFunc(func(*sqs.SendMessageInput) { sent++ }), "url").SendBatch(context.Background(), msgs[:3], 0); err != nil || sent != 3 {
		t.Fatalf("sent %d (%v), want 3", sent, err)
	}
}
