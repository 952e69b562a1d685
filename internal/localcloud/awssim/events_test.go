package awssim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// eventsCall sends one signed EventBridge JSON 1.1 request. The module
// pins no EventBridge SDK client (nothing in the product calls it), so
// the wire request is built here with the SDK's SigV4 signer.
func eventsCall(t *testing.T, s *Server, op string, body any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx(t), http.MethodPost, s.URL(), bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "AWSEvents."+op)
	sum := sha256.Sum256(b)
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: DefaultAccessKeyID, SecretAccessKey: DefaultSecretAccessKey},
		req, hex.EncodeToString(sum[:]), "events", "us-west-2", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %v", op, resp.StatusCode, out)
	}
	return out
}

func TestEventBridgeRulesDeliverToSQS(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	q := sqs.NewFromConfig(cfg)
	qu, _ := q.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("interruption")})
	arn := s.SQS().QueueARN("interruption")
	eventsCall(t, s, "PutRule", map[string]any{"Name": "health", "EventPattern": `{"source":["aws.health"],"detail":{"eventTypeCategory":["scheduledChange"],"service":["EC2"]}}`})
	eventsCall(t, s, "PutRule", map[string]any{"Name": "ec2", "EventPattern": `{"source":["aws.ec2"],"detail-type":["EC2 Instance Rebalance Recommendation","EC2 Instance State-change Notification"],"detail":{"state":[{"anything-but":["pending","running"]},{"exists":false}]}}`})
	for _, r := range []string{"health", "ec2"} {
		eventsCall(t, s, "PutTargets", map[string]any{"Rule": r, "Targets": []map[string]string{{"Id": "q", "Arn": arn}}})
	}
	out := eventsCall(t, s, "PutEvents", map[string]any{"Entries": []map[string]any{
		{"Source": "custom.app", "DetailType": "x", "Detail": `{"a":1}`},
		{"Source": "aws.health", "DetailType": "AWS Health Event", "Detail": `{"service":"EC2","eventTypeCategory":"scheduledChange"}`},
		{"Source": "aws.health", "DetailType": "AWS Health Event", "Detail": `not json`},
	}})
	if out["FailedEntryCount"].(float64) != 1 {
		t.Fatalf("PutEvents %v", out)
	}

	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "nodes", "")
	fl, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a")))
	if err != nil {
		t.Fatal(err)
	}
	id := fl.Instances[0].InstanceIds[0]
	if err := s.RecommendRebalance(id); err != nil {
		t.Fatal(err)
	}
	if err := s.ScheduleMaintenance(id, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	// Expect: the PutEvents health event, rebalance, scheduled maintenance,
	// shutting-down and terminated state changes (pending/running filtered out).
	want := map[string]int{"AWS Health Event": 2, DetailRebalance: 1, DetailStateChange: 2}
	got := map[string]int{}
	eventually(t, "events in the queue", func() bool {
		r, err := q.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: qu.QueueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Messages {
			var ev struct {
				DetailType string `json:"detail-type"`
				Account    string `json:"account"`
				Region     string `json:"region"`
			}
			_ = json.Unmarshal([]byte(*m.Body), &ev)
			if ev.Account != DefaultAccountID || ev.Region != "us-west-2" {
				t.Fatalf("envelope %s", *m.Body)
			}
			got[ev.DetailType]++
			_, _ = q.DeleteMessage(ctx(t), &sqs.DeleteMessageInput{QueueUrl: qu.QueueUrl, ReceiptHandle: m.ReceiptHandle})
		}
		return got["AWS Health Event"] == 2 && got[DetailRebalance] == 1 && got[DetailStateChange] == 2
	})
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}

// A delayed delivery reaches the queue after the delay (simulated time:
// 60 s are 600 ms at the test server's scale), not before; once restored,
// events are delivered at once.
func TestDelayEventDelivery(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	q := sqs.NewFromConfig(cfg)
	qu, _ := q.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("late")})
	arn := s.SQS().QueueARN("late")
	eventsCall(t, s, "PutRule", map[string]any{"Name": "custom", "EventPattern": `{"source":["custom.app"]}`})
	eventsCall(t, s, "PutTargets", map[string]any{"Rule": "custom", "Targets": []map[string]string{{"Id": "q", "Arn": arn}}})
	var asked []string
	restore := s.DelayEventDelivery(func(target string) time.Duration { asked = append(asked, target); return time.Minute })
	put := func() {
		eventsCall(t, s, "PutEvents", map[string]any{"Entries": []map[string]any{{"Source": "custom.app", "DetailType": "x", "Detail": `{"a":1}`}}})
	}
	start := time.Now()
	put()
	if v, _, _ := s.SQS().Depth("late"); v != 0 {
		t.Fatalf("delayed event visible at once (%d)", v)
	}
	for v, _, _ := s.SQS().Depth("late"); v == 0; v, _, _ = s.SQS().Depth("late") {
		if time.Since(start) > 5*time.Second {
			t.Fatal("delayed event never delivered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Since(start); d < 500*time.Millisecond || len(asked) != 1 || asked[0] != arn {
		t.Errorf("delivered after %s (want 600 ms), delay asked for %v", d, asked)
	}
	if _, err := q.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: qu.QueueUrl}); err != nil {
		t.Fatal(err)
	}
	restore()
	put()
	if v, _, _ := s.SQS().Depth("late"); v != 1 {
		t.Fatalf("after restore the event is not delivered at once (%d visible)", v)
	}
}
