package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nodewright/nodewright/internal/localcloud/lambdaspec"
)

// testTick stands for Lambda's minute (scale 1/100): Lambda's 1- and
// 2-minute retry delays take 600 ms and 1.2 s, its 1 s throttle back-off
// 10 ms.
const testTick = 600 * time.Millisecond

// fakeFunction is a function whose every new execution environment runs
// handle; envs counts the environments started.
type fakeFunction struct {
	*lambdaFunction
	envs atomic.Int64
	wg   sync.WaitGroup
}

func newFake(t *testing.T, spec lambdaspec.Function, o LambdaOptions, handle handlerFunc) *fakeFunction {
	t.Helper()
	if spec.Timeout == 0 {
		spec.Timeout = 5 * time.Second
	}
	ff := &fakeFunction{}
	ff.lambdaFunction = &lambdaFunction{name: "fake", spec: spec, timeout: spec.Timeout, faults: newFaults(o, testTick), bg: &ff.wg,
		newEnv: func(context.Context) (handlerFunc, error) {
			ff.envs.Add(1)
			return handle, nil
		}}
	t.Cleanup(ff.wg.Wait)
	return ff
}

// The handler gets the event's JSON, as the Lambda runtime passes it, and a
// context ending at the function's timeout.
func TestInvokeDecodesLikeLambda(t *testing.T) {
	var got json.RawMessage
	var deadline time.Time
	f := newFake(t, lambdaspec.Function{Timeout: 40 * time.Second}, NoFaults(), func(ctx context.Context, raw json.RawMessage) (any, error) {
		got, deadline = raw, time.Time{}
		deadline, _ = ctx.Deadline()
		return nil, nil
	})
	ev := scheduledEvent("us-east-1", "123456789012", "r", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	start := time.Now()
	if _, err := f.invoke(context.Background(), "schedule", ev); err != nil {
		t.Fatal(err)
	}
	if d := deadline.Sub(start); d < 39*time.Second || d > 41*time.Second {
		t.Errorf("deadline %s after the start, want the 40 s timeout", d)
	}
	var probe struct {
		DetailType string   `json:"detail-type"`
		Source     string   `json:"source"`
		Time       string   `json:"time"`
		Resources  []string `json:"resources"`
	}
	if err := json.Unmarshal(got, &probe); err != nil {
		t.Fatal(err)
	}
	if probe.DetailType != "Scheduled Event" || probe.Source != "aws.events" || probe.Time != "2026-01-02T03:04:05Z" ||
		len(probe.Resources) != 1 || probe.Resources[0] != "arn:aws:events:us-east-1:123456789012:rule/r" {
		t.Fatalf("scheduled event %s", got)
	}
	if f.envs.Load() != 1 || f.faults.stats().ColdStarts != 1 {
		t.Errorf("%d environments, stats %v", f.envs.Load(), f.faults.stats())
	}
}

// blocker is a handler that holds its invocation until released.
type blocker struct {
	started chan struct{}
	release chan struct{}
	runs    atomic.Int64
}

func newBlocker() *blocker {
	return &blocker{started: make(chan struct{}, 100), release: make(chan struct{})}
}

func (b *blocker) handle(ctx context.Context, _ json.RawMessage) (any, error) {
	b.runs.Add(1)
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil, nil
}

// Reserved concurrency caps the invocations in flight: one more is
// throttled without running, and runs once a slot is free.
func TestReservedConcurrencyThrottles(t *testing.T) {
	b := newBlocker()
	f := newFake(t, lambdaspec.Function{ReservedConcurrency: 2}, NoFaults(), b.handle)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { _, _ = f.invoke(ctx, "sqs", struct{}{}) })
		<-b.started
	}
	if _, err := f.invoke(ctx, "sqs", struct{}{}); !errors.Is(err, errThrottled) {
		t.Fatalf("third concurrent invocation: %v, want throttled", err)
	}
	if b.runs.Load() != 2 || f.faults.stats().Throttles != 1 {
		t.Fatalf("runs %d, stats %v", b.runs.Load(), f.faults.stats())
	}
	close(b.release)
	wg.Wait()
	if _, err := f.invoke(ctx, "sqs", struct{}{}); err != nil {
		t.Fatalf("after the slots freed: %v", err)
	}
	if f.envs.Load() != 2 {
		t.Errorf("%d environments for 2 concurrent invocations", f.envs.Load())
	}
}

// A throttled asynchronous event waits in Lambda's queue and runs when the
// function has room, within its maximum event age; past that age it is
// dropped without running.
func TestAsyncThrottleRetriedWithinEventAge(t *testing.T) {
	for _, tc := range []struct {
		name     string
		hold     time.Duration
		wantRuns int64
		expired  int
	}{
		{"slot frees in time", 200 * time.Millisecond, 2, 0},
		{"event too old", 1500 * time.Millisecond, 1, 1}, // 60 s of age is 600 ms here
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBlocker()
			spec := lambdaspec.Function{ReservedConcurrency: 1, Async: lambdaspec.Async{MaxRetries: 2, MaxEventAge: time.Minute}}
			f := newFake(t, spec, NoFaults(), b.handle)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var wg sync.WaitGroup
			f.invokeAsync(ctx, &wg, struct{}{})
			<-b.started
			f.invokeAsync(ctx, &wg, struct{}{})
			time.Sleep(tc.hold)
			close(b.release)
			wg.Wait()
			st := f.faults.stats()
			if b.runs.Load() != tc.wantRuns || st.Throttles == 0 || st.Expired != tc.expired || st.Retries != 0 {
				t.Fatalf("runs %d, stats %v", b.runs.Load(), st)
			}
		})
	}
}

// A failing asynchronous invocation is retried MaximumRetryAttempts times,
// 1 and 2 minutes of Lambda's time apart (600 ms and 1.2 s here), unless
// the event is older than its maximum age by then.
func TestAsyncRetries(t *testing.T) {
	for _, tc := range []struct {
		name          string
		async         lambdaspec.Async
		runs, retries int
		expired       int
	}{
		{"Lambda's defaults", lambdaspec.Async{MaxRetries: 2, MaxEventAge: 6 * time.Hour}, 3, 2, 0},
		{"no retries", lambdaspec.Async{MaxRetries: 0, MaxEventAge: time.Minute, Configured: true}, 1, 0, 0},
		{"event age before the second retry", lambdaspec.Async{MaxRetries: 2, MaxEventAge: 2 * time.Minute, Configured: true}, 2, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var times []time.Time
			var mu sync.Mutex
			f := newFake(t, lambdaspec.Function{Async: tc.async}, NoFaults(), func(context.Context, json.RawMessage) (any, error) {
				mu.Lock()
				times = append(times, time.Now())
				mu.Unlock()
				return nil, errors.New("one claim failed")
			})
			var reported atomic.Int64
			f.report = func(string, string, error, time.Duration) { reported.Add(1) }
			var wg sync.WaitGroup
			f.invokeAsync(context.Background(), &wg, struct{}{})
			wg.Wait()
			st := f.faults.stats()
			if len(times) != tc.runs || st.Retries != tc.retries || st.Expired != tc.expired || int(reported.Load()) != tc.runs {
				t.Fatalf("%d runs, %d reported, stats %v", len(times), reported.Load(), st)
			}
			for i, want := range []time.Duration{600 * time.Millisecond, 1200 * time.Millisecond}[:len(times)-1] {
				if d := times[i+1].Sub(times[i]); d < want || d > want+400*time.Millisecond {
					t.Errorf("retry %d came %s after the attempt before, want %s", i+1, d, want)
				}
			}
		})
	}
}

// At its timeout the invocation fails with Lambda's message, even if the
// handler ignores its context; its environment is discarded, so the next
// invocation starts cold.
func TestTimeoutFailsAndNextStartsCold(t *testing.T) {
	late := make(chan struct{})
	var block atomic.Bool
	f := newFake(t, lambdaspec.Function{Timeout: 100 * time.Millisecond}, NoFaults(), func(ctx context.Context, _ json.RawMessage) (any, error) {
		if block.Load() {
			<-late // a process that keeps going past its deadline
		}
		return "ok", nil
	})
	defer close(late)
	ctx := context.Background()
	if _, err := f.invoke(ctx, "sqs", struct{}{}); err != nil {
		t.Fatal(err) // the first environment starts
	}
	block.Store(true)
	start := time.Now()
	_, err := f.invoke(ctx, "sqs", struct{}{})
	block.Store(false)
	var te *timeoutError
	if !errors.As(err, &te) || err.Error() != "Task timed out after 0.10 seconds" || time.Since(start) > time.Second {
		t.Fatalf("err %v after %s, want a timeout at 100 ms", err, time.Since(start))
	}
	if f.envs.Load() != 1 {
		t.Fatalf("%d environments before the timeout", f.envs.Load())
	}
	if res, err := f.invoke(ctx, "sqs", struct{}{}); err != nil || res != "ok" {
		t.Fatalf("after the timeout: %v %v", res, err)
	}
	if st := f.faults.stats(); f.envs.Load() != 2 || st.Timeouts != 1 || st.ColdStarts != 2 {
		t.Fatalf("%d environments, stats %v: the timed-out one was reused", f.envs.Load(), st)
	}
}

// ColdStartRate replaces warm environments at random; off, one
// environment serves invocations one after another.
func TestColdStartRate(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		envs int64
	}{{-1, 1}, {1, 20}} {
		o := NoFaults()
		o.ColdStartRate = tc.rate
		f := newFake(t, lambdaspec.Function{}, o, func(context.Context, json.RawMessage) (any, error) { return nil, nil })
		for range 20 {
			if _, err := f.invoke(context.Background(), "sqs", struct{}{}); err != nil {
				t.Fatal(err)
			}
		}
		if f.envs.Load() != tc.envs {
			t.Errorf("rate %v: %d environments for 20 invocations, want %d", tc.rate, f.envs.Load(), tc.envs)
		}
	}
}

// A panic fails the invocation and the process restarts.
func TestPanicFailsAndRestarts(t *testing.T) {
	f := newFake(t, lambdaspec.Function{}, NoFaults(), func(context.Context, json.RawMessage) (any, error) { panic("boom") })
	for range 2 {
		if _, err := f.invoke(context.Background(), "sqs", struct{}{}); err == nil {
			t.Fatal("a panic succeeded")
		}
	}
	if f.envs.Load() != 2 {
		t.Errorf("%d environments after two panics", f.envs.Load())
	}
}

// At-least-once delivery: with DuplicateRate 1 each message comes twice,
// in the same batch or a later one, never more than the batch size.
func TestAtLeastOnceBatches(t *testing.T) {
	o := NoFaults()
	o.DuplicateRate, o.InOrder = 1, false
	a := &atLeastOnce{faults: newFaults(o, testTick)}
	seen := map[string]int{}
	var order []string
	for i := range 5 {
		var recs []events.SQSMessage
		for j := range 4 {
			recs = append(recs, events.SQSMessage{MessageId: string(rune('a' + 4*i + j))})
		}
		batch := a.batch(recs, 6)
		if len(batch) > 6 {
			t.Fatalf("batch of %d", len(batch))
		}
		for _, r := range batch {
			seen[r.MessageId]++
			order = append(order, r.MessageId)
		}
	}
	for len(a.later) > 0 {
		for _, r := range a.batch(nil, 6) {
			seen[r.MessageId]++
		}
	}
	for id, n := range seen {
		if n != 2 {
			t.Errorf("message %s delivered %d times", id, n)
		}
	}
	if len(seen) != 20 || a.faults.stats().Duplicates != 20 {
		t.Fatalf("%d messages, stats %v", len(seen), a.faults.stats())
	}
	sorted := true
	for i := 1; i < len(order); i++ {
		sorted = sorted && order[i-1] <= order[i]
	}
	if sorted {
		t.Error("batches never out of order")
	}
}

func TestSchedulePeriod(t *testing.T) {
	for expr, want := range map[string]time.Duration{"rate(1 minute)": 5 * time.Second, "rate(5 minutes)": 25 * time.Second, "rate(1 hour)": 300 * time.Second} {
		if got, err := schedulePeriod(expr, 5*time.Second); err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", expr, got, err, want)
		}
	}
	if _, err := schedulePeriod("cron(0 * * * ? *)", time.Second); err == nil {
		t.Error("cron accepted")
	}
}

func TestFaultLines(t *testing.T) {
	o := LambdaOptions{}
	o.defaults()
	if got, want := o.Rates(), "cold_start:0.05,duplicate:0.05,event_delay_s:1.0,shuffle:on"; got != want {
		t.Errorf("Rates() = %q, want %q", got, want)
	}
	if got, want := NoFaults().Rates(), "cold_start:0.00,duplicate:0.00,event_delay_s:0.0,shuffle:off"; got != want {
		t.Errorf("NoFaults().Rates() = %q, want %q", got, want)
	}
	s := LambdaStats{Throttles: 3, Retries: 1, ColdStarts: 4, Duplicates: 2, Delayed: 5}
	if got, want := s.String(), "throttles:3,retries:1,expired:0,timeouts:0,cold_starts:4,duplicates:2,delayed:5"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
