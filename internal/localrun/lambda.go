package localrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/lambdaspec"
)

// handlerFunc is a function's Lambda handler as functions/<name>/main.go
// passes it to lambda.Start.
type handlerFunc func(ctx context.Context, raw json.RawMessage) (any, error)

// errThrottled is Lambda's answer when the function has no concurrency
// left (HTTP 429 TooManyRequestsException, "Rate Exceeded."): the
// invocation never started.
var errThrottled = errors.New("TooManyRequestsException: Rate Exceeded")

// timeoutError is how Lambda reports an invocation stopped at the
// function's timeout.
type timeoutError struct{ after time.Duration }

func (e *timeoutError) Error() string {
	return fmt.Sprintf("Task timed out after %.2f seconds", e.after.Seconds())
}

// lambdaFunction is one function as Lambda runs it: at most its reserved
// concurrency of invocations at once ("Lambda function scaling", reserved
// concurrency), each in an execution environment of its own, reused while
// warm, and stopped at the function's timeout.
type lambdaFunction struct {
	name    string
	spec    lambdaspec.Function
	timeout time.Duration
	// newEnv initializes a new execution environment: the function's
	// process started anew (its app and handler built, nothing in memory).
	newEnv func(ctx context.Context) (handlerFunc, error)
	faults *faults
	// report sees every invocation that ran (not a throttled one).
	report func(fn, trigger string, err error, took time.Duration)
	// bg holds the handlers' goroutines, including those a timeout
	// abandoned, so Close waits for them.
	bg *sync.WaitGroup

	mu   sync.Mutex
	busy int
	idle []handlerFunc
}

// invoke runs one invocation of event: throttled (errThrottled) without a
// free concurrency slot, else in a warm environment or a new one, under
// the function's timeout.
func (f *lambdaFunction) invoke(ctx context.Context, trigger string, event any) (any, error) {
	raw, err := json.Marshal(event)
	if err != nil {
		return nil, fmt.Errorf("%s: encode %s event: %w", f.name, trigger, err)
	}
	if !f.acquire() {
		f.faults.throttles.Add(1)
		return nil, errThrottled
	}
	defer f.release()
	start := time.Now()
	h, err := f.environment(ctx)
	if err != nil {
		err = fmt.Errorf("%s: init: %w", f.name, err)
	} else {
		var keep bool
		var res any
		res, err, keep = f.run(ctx, h, raw)
		if keep {
			f.putIdle(h)
		}
		if err == nil {
			return res, nil
		}
	}
	if f.report != nil && ctx.Err() == nil {
		f.report(f.name, trigger, err, time.Since(start))
	}
	return nil, err
}

// acquire takes a concurrency slot; false when reserved concurrency is
// used up (a function without reserved concurrency is never refused here:
// the account's pool is far larger than a local run).
func (f *lambdaFunction) acquire() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.spec.ReservedConcurrency; n > 0 && f.busy >= n {
		return false
	}
	f.busy++
	return true
}

func (f *lambdaFunction) release() {
	f.mu.Lock()
	f.busy--
	f.mu.Unlock()
}

// environment is a warm environment, or a new one when none is idle or
// Lambda recycles the idle one (ColdStartRate).
func (f *lambdaFunction) environment(ctx context.Context) (handlerFunc, error) {
	f.mu.Lock()
	var h handlerFunc
	if n := len(f.idle); n > 0 {
		h, f.idle = f.idle[n-1], f.idle[:n-1]
	}
	f.mu.Unlock()
	if h != nil && !f.faults.chance(f.faults.o.ColdStartRate) {
		return h, nil
	}
	f.faults.coldStarts.Add(1)
	return f.newEnv(ctx)
}

func (f *lambdaFunction) putIdle(h handlerFunc) {
	f.mu.Lock()
	f.idle = append(f.idle, h)
	f.mu.Unlock()
}

// outcome is what a handler's goroutine returned.
type outcome struct {
	res      any
	err      error
	panicked bool
}

// run calls the handler with a context that ends at the function's
// timeout. At the timeout Lambda stops the process: the invocation fails
// and whatever the handler still does is abandoned, so its environment is
// not reused (keep is false) and the next invocation starts cold. A panic
// fails the invocation and the runtime restarts the process likewise.
func (f *lambdaFunction) run(ctx context.Context, h handlerFunc, raw json.RawMessage) (res any, err error, keep bool) {
	ictx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	done := make(chan outcome, 1)
	f.bg.Go(func() {
		defer func() {
			if p := recover(); p != nil {
				done <- outcome{err: fmt.Errorf("Runtime.ExitError: panic: %v", p), panicked: true}
			}
		}()
		r, e := h(ictx, raw)
		done <- outcome{res: r, err: e}
	})
	select {
	case o := <-done:
		return o.res, o.err, !o.panicked
	case <-ictx.Done():
		if ctx.Err() != nil {
			return nil, ctx.Err(), false
		}
		f.faults.timeouts.Add(1)
		return nil, &timeoutError{after: f.timeout}, false
	}
}
