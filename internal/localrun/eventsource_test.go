package localrun

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/lambdaspec"
)

// sqsSim is the AWS simulator's SQS on loopback, spoken to over the wire.
type sqsSim struct {
	sim    *awssim.Server
	client *sqs.Client
}

func newSQSSim(t *testing.T) *sqsSim {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (simulator on loopback)")
	}
	sim, err := awssim.New(awssim.Options{ClusterName: "localrun-test", KubernetesVersion: "1.36", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	client := sqs.New(sqs.Options{Region: "us-west-2", BaseEndpoint: sdkaws.String(sim.URL()),
		Credentials: credentials.NewStaticCredentialsProvider(awssim.DefaultAccessKeyID, awssim.DefaultSecretAccessKey, "")})
	return &sqsSim{sim: sim, client: client}
}

// queue creates a queue (with a dead-letter queue when maxReceives > 0)
// holding n messages "0".."n-1".
func (s *sqsSim) queue(t *testing.T, name string, visibility, maxReceives, n int) string {
	t.Helper()
	ctx := context.Background()
	attrs := map[string]string{"VisibilityTimeout": strconv.Itoa(visibility)}
	if maxReceives > 0 {
		if _, err := s.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: sdkaws.String(name + "-dlq")}); err != nil {
			t.Fatal(err)
		}
		rp, _ := json.Marshal(map[string]any{"deadLetterTargetArn": s.sim.SQS().QueueARN(name + "-dlq"), "maxReceiveCount": maxReceives})
		attrs["RedrivePolicy"] = string(rp)
	}
	out, err := s.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: sdkaws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := s.client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: out.QueueUrl, MessageBody: sdkaws.String(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	return sdkaws.ToString(out.QueueUrl)
}

// start runs an event source for f on the queue until the test ends.
func (s *sqsSim) start(t *testing.T, f *fakeFunction, url string, spec lambdaspec.EventSource) *eventSource {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	es := &eventSource{fn: f.lambdaFunction, spec: spec, client: s.client, url: url, arn: "arn:aws:sqs:us-west-2:000000000000:q", region: "us-west-2",
		onErr: func(err error) { t.Errorf("event source: %v", err) }, wg: &wg}
	es.start(ctx)
	t.Cleanup(func() { cancel(); wg.Wait() })
	return es
}

// recorder is a handler that counts the deliveries of each message body
// and the invocations in flight.
type recorder struct {
	mu        sync.Mutex
	bodies    map[string]int
	receives  map[string]int
	running   int
	most      int
	hold      time.Duration
	delivered atomic.Int64
}

func newRecorder(hold time.Duration) *recorder {
	return &recorder{bodies: map[string]int{}, receives: map[string]int{}, hold: hold}
}

func (r *recorder) handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.running++
	r.most = max(r.most, r.running)
	r.mu.Unlock()
	time.Sleep(r.hold)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running--
	for _, m := range ev.Records {
		r.bodies[m.Body]++
		n, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
		r.receives[m.Body] = max(r.receives[m.Body], n)
		r.delivered.Add(1)
	}
	return events.SQSEventResponse{}, nil
}

func eventually(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
	}
}

// The event source never has more batches in flight than its
// MaximumConcurrency, and reaches it under a backlog; nothing is
// throttled within reserved concurrency.
func TestEventSourceMaximumConcurrency(t *testing.T) {
	s := newSQSSim(t)
	url := s.queue(t, "capped", 30, 0, 30)
	rec := newRecorder(100 * time.Millisecond)
	f := newFake(t, lambdaspec.Function{ReservedConcurrency: 3}, NoFaults(), rec.handle)
	es := s.start(t, f, url, lambdaspec.EventSource{BatchSize: 1, MaxConcurrency: 2, ReportBatchItemFailures: true})
	eventually(t, "30 messages handled", 20*time.Second, func() bool { return rec.delivered.Load() == 30 })
	if es.peak() != 2 || rec.most != 2 || f.faults.stats().Throttles != 0 {
		t.Fatalf("peak %d batches, %d invocations at once, stats %v; want 2, 2, no throttles", es.peak(), rec.most, f.faults.stats())
	}
	eventually(t, "the queue empty", 5*time.Second, func() bool {
		v, inflight, _ := s.sim.SQS().Depth("capped")
		return v+inflight == 0
	})
}

// Without MaximumConcurrency the event source scales past the function's
// reserved concurrency: the surplus batches are throttled, return after
// the visibility timeout and use up receives, so messages no invocation
// failed reach the dead-letter queue (issue 33, item 2).
func TestEventSourceThrottledAboveReservedConcurrency(t *testing.T) {
	s := newSQSSim(t)
	url := s.queue(t, "unbounded", 1, 2, 10)
	rec := newRecorder(400 * time.Millisecond)
	f := newFake(t, lambdaspec.Function{ReservedConcurrency: 1}, NoFaults(), rec.handle)
	es := s.start(t, f, url, lambdaspec.EventSource{BatchSize: 1, ReportBatchItemFailures: true})
	dlq := func() int { v, _, _ := s.sim.SQS().Depth("unbounded-dlq"); return v }
	eventually(t, "every message handled or dead-lettered", 30*time.Second, func() bool {
		rec.mu.Lock()
		handled := len(rec.bodies)
		rec.mu.Unlock()
		return handled+dlq() == 10
	})
	st := f.faults.stats()
	if st.Throttles == 0 || es.peak() <= 1 || rec.most != 1 {
		t.Fatalf("stats %v, peak %d batches, %d invocations at once: want throttles above reserved concurrency 1", st, es.peak(), rec.most)
	}
	if dlq() == 0 {
		t.Errorf("no throttled message reached the dead-letter queue (maxReceiveCount 2)")
	}
	redelivered := 0
	for _, n := range rec.receives {
		if n > 1 {
			redelivered++
		}
	}
	if redelivered == 0 {
		t.Errorf("no handled message was received more than once: %v", rec.receives)
	}
	t.Logf("stats %v, peak %d batches, %d handled, %d dead-lettered", st, es.peak(), len(rec.bodies), dlq())
}

// At-least-once delivery over the wire: every message is delivered twice,
// and deleted, so the queue drains.
func TestEventSourceDuplicates(t *testing.T) {
	s := newSQSSim(t)
	url := s.queue(t, "dups", 30, 0, 10)
	rec := newRecorder(0)
	o := NoFaults()
	o.DuplicateRate = 1
	f := newFake(t, lambdaspec.Function{}, o, rec.handle)
	s.start(t, f, url, lambdaspec.EventSource{BatchSize: 10, ReportBatchItemFailures: true})
	eventually(t, "20 deliveries", 20*time.Second, func() bool { return rec.delivered.Load() == 20 })
	rec.mu.Lock()
	for i := range 10 {
		if n := rec.bodies[fmt.Sprint(i)]; n != 2 {
			t.Errorf("message %d delivered %d times", i, n)
		}
	}
	rec.mu.Unlock()
	if st := f.faults.stats(); st.Duplicates != 10 {
		t.Errorf("stats %v", st)
	}
	eventually(t, "the queue empty", 5*time.Second, func() bool {
		v, inflight, _ := s.sim.SQS().Depth("dups")
		return v+inflight == 0
	})
}
