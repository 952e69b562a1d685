package awssim

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/eventsim"
)

// A long poll returns when a message arrives, not at the end of its wait.
// The server runs at a tenth of its usual speed, so the 20 s wait lasts
// 2 s of wall time and a loaded machine's latency cannot pass for it.
func TestSQSLongPollWakesOnSend(t *testing.T) {
	s, cfg := newTestServer(t, func(o *Options) { o.TimeScale = 10 })
	q := sqs.NewFromConfig(cfg)
	dlq, err := q.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("dlq")})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = s.SQS().Send("dlq", "wake", 0)
	}()
	start := time.Now()
	lp, err := q.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: dlq.QueueUrl, WaitTimeSeconds: 20})
	if err != nil || len(lp.Messages) != 1 || *lp.Messages[0].Body != "wake" || time.Since(start) > time.Second {
		t.Fatalf("long poll: %+v %v after %s (its wait ends after 2 s)", lp, err, time.Since(start))
	}
}

func TestSQSRedriveAndVisibility(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	q := sqs.NewFromConfig(cfg)
	dlq, err := q.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("dlq")})
	if err != nil {
		t.Fatal(err)
	}
	main, err := q.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("work"), Attributes: map[string]string{
		"VisibilityTimeout": "0", "RedrivePolicy": `{"deadLetterTargetArn":"` + s.SQS().QueueARN("dlq") + `","maxReceiveCount":"2"}`}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.SendMessageBatch(ctx(t), &sqs.SendMessageBatchInput{QueueUrl: main.QueueUrl, Entries: []sqstypes.SendMessageBatchRequestEntry{
		{Id: aws.String("a"), MessageBody: aws.String("now")}, {Id: aws.String("b"), MessageBody: aws.String("later"), DelaySeconds: 100}}}); err != nil {
		t.Fatal(err)
	}
	attrs, _ := q.GetQueueAttributes(ctx(t), &sqs.GetQueueAttributesInput{QueueUrl: main.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{"All"}})
	if attrs.Attributes["ApproximateNumberOfMessages"] != "1" || attrs.Attributes["ApproximateNumberOfMessagesDelayed"] != "1" {
		t.Fatalf("attributes %v", attrs.Attributes)
	}
	for i := 1; i <= 2; i++ {
		r, err := q.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: main.QueueUrl, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		if err != nil || len(r.Messages) != 1 || *r.Messages[0].Body != "now" || r.Messages[0].Attributes["ApproximateReceiveCount"] != string(rune('0'+i)) {
			t.Fatalf("receive %d: %+v %v", i, r, err)
		}
	}
	// Third receive: past maxReceiveCount, moved to the DLQ.
	r, _ := q.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: main.QueueUrl})
	if len(r.Messages) != 0 {
		t.Fatalf("message not redriven: %+v", r.Messages)
	}
	d, err := q.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: dlq.QueueUrl, VisibilityTimeout: 30, WaitTimeSeconds: 1})
	if err != nil || len(d.Messages) != 1 {
		t.Fatalf("dlq: %+v %v", d, err)
	}
	if _, err := q.ChangeMessageVisibility(ctx(t), &sqs.ChangeMessageVisibilityInput{QueueUrl: dlq.QueueUrl, ReceiptHandle: d.Messages[0].ReceiptHandle, VisibilityTimeout: 60}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.DeleteMessage(ctx(t), &sqs.DeleteMessageInput{QueueUrl: dlq.QueueUrl, ReceiptHandle: d.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.DeleteMessage(ctx(t), &sqs.DeleteMessageInput{QueueUrl: dlq.QueueUrl, ReceiptHandle: aws.String("bogus")}); apiCode(err) != "ReceiptHandleIsInvalid" {
		t.Fatalf("bogus handle: %v", err)
	}
	// The delayed message (100 s, 1 s of wall time at TimeScale 100) arrives
	// during a long poll (20 s, 200 ms of wall time).
	eventually(t, "delayed message", func() bool {
		r, err := q.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: main.QueueUrl, WaitTimeSeconds: 20})
		return err == nil && len(r.Messages) == 1 && *r.Messages[0].Body == "later"
	})
	if _, err := q.GetQueueUrl(ctx(t), &sqs.GetQueueUrlInput{QueueName: aws.String("nope")}); apiCode(err) != "QueueDoesNotExist" {
		t.Fatalf("missing queue: %v", err)
	}
}

func TestSpotReclaimEventsReachQueue(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	q := sqs.NewFromConfig(cfg)
	qu, _ := q.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("interruption")})
	if _, err := s.Events().PutRule("spot", `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`); err != nil {
		t.Fatal(err)
	}
	if err := s.Events().PutTargets("spot", eventsim.Target{Id: "q", Arn: s.SQS().QueueARN("interruption")}); err != nil {
		t.Fatal(err)
	}
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "nodes", "")
	out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeSpot, override("m5.large", "us-west-2a")))
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("fleet %+v %v", out, err)
	}
	id := out.Instances[0].InstanceIds[0]
	if err := s.ReclaimSpot(id); err != nil {
		t.Fatal(err)
	}
	r, err := q.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: qu.QueueUrl, WaitTimeSeconds: 5})
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("no warning: %+v %v", r, err)
	}
	var ev struct {
		DetailType string            `json:"detail-type"`
		Detail     map[string]string `json:"detail"`
	}
	_ = json.Unmarshal([]byte(*r.Messages[0].Body), &ev)
	if ev.DetailType != DetailSpotWarning || ev.Detail["instance-id"] != id {
		t.Fatalf("event %s", *r.Messages[0].Body)
	}
	// 120 s at TimeScale 100 is 1.2 s, plus shutting-down.
	eventually(t, "terminated", func() bool {
		inst, _, _ := s.EC2().Instance(id)
		return inst.State.Name == types.InstanceStateNameTerminated
	})
}

func TestFaultsAndCallLog(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	s.Throttle("ec2", "DescribeSubnets", 1)
	if _, err := c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{}); apiCode(err) != "RequestLimitExceeded" {
		t.Fatalf("throttle: %v", err)
	}
	if _, err := c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{}); err != nil {
		t.Fatalf("after throttle: %v", err)
	}
	s.FailNth("ec2", "DescribeImages", 2, "InternalError")
	for i, want := range []string{"", "InternalError", ""} {
		if _, err := c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{Owners: []string{"amazon"}}); apiCode(err) != want {
			t.Fatalf("call %d: %v, want %q", i+1, err, want)
		}
	}
	s.InjectFault(Fault{Service: "ec2", Operation: "DescribeAvailabilityZones", Latency: 200 * time.Millisecond, Times: 1})
	start := time.Now()
	if _, err := c.DescribeAvailabilityZones(ctx(t), &ec2.DescribeAvailabilityZonesInput{}); err != nil || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("latency fault: %v after %s", err, time.Since(start))
	}
	calls := s.Calls("ec2", "DescribeImages")
	if len(calls) != 3 || calls[1].ErrorCode != "InternalError" || calls[0].Params["Owner.1"] != "amazon" {
		t.Fatalf("call log %+v", calls)
	}
}
