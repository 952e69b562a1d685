package localrun

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Lambda's asynchronous queue ("How Lambda handles errors and retries with
// asynchronous invocation"): a throttled event returns to the queue and is
// tried again after 1 s, doubling up to 5 min, for as long as its maximum
// event age allows; a function error (a timeout too) is retried
// MaximumRetryAttempts times, 1 min after the first attempt and 2 min after
// the second. These delays and the event age are Lambda's time, run at the
// local scale (faults.lambdaTime).
const (
	throttleBackoffFirst = time.Second
	throttleBackoffMax   = 5 * time.Minute
)

// retryDelay is Lambda's wait before retry n (1-based) of a failed
// asynchronous invocation.
func retryDelay(n int) time.Duration { return time.Duration(n) * time.Minute }

// invokeAsync queues event for the function as an asynchronous invoke
// (what an EventBridge schedule does, the only asynchronous caller here)
// and returns at once. Lambda's queue delivers at least once: now and then
// the event runs twice.
func (f *lambdaFunction) invokeAsync(ctx context.Context, wg *sync.WaitGroup, event any) {
	const trigger = "schedule"
	queued := time.Now()
	wg.Go(func() { f.deliverAsync(ctx, trigger, event, queued) })
	if f.faults.chance(f.faults.o.DuplicateRate) {
		f.faults.duplicates.Add(1)
		wg.Go(func() { f.deliverAsync(ctx, trigger, event, queued) })
	}
}

// deliverAsync runs an event queued at queued until it succeeds, its
// retries are spent or it is older than the function's maximum event age.
func (f *lambdaFunction) deliverAsync(ctx context.Context, trigger string, event any, queued time.Time) {
	maxAge := f.faults.lambdaTime(f.spec.Async.MaxEventAge)
	backoff := throttleBackoffFirst
	failures, retrying := 0, false
	for ctx.Err() == nil {
		if time.Since(queued) > maxAge {
			f.faults.expired.Add(1)
			return
		}
		if retrying {
			f.faults.retries.Add(1)
			retrying = false
		}
		_, err := f.invoke(ctx, trigger, event)
		switch {
		case err == nil:
			return
		case errors.Is(err, errThrottled):
			sleep(ctx, f.faults.lambdaTime(backoff))
			backoff = min(2*backoff, throttleBackoffMax)
		case failures >= f.spec.Async.MaxRetries:
			return // discarded: the stack configures no on-failure destination
		default:
			failures++
			retrying = true
			sleep(ctx, f.faults.lambdaTime(retryDelay(failures)))
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
