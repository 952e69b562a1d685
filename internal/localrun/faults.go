package localrun

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// LambdaOptions set the faults AWS's services cause at random, which the
// local run injects in every run (its rules from the stack, reserved
// concurrency, retries and timeouts, always apply). A zero field takes the
// default; a negative rate or delay turns that fault off.
type LambdaOptions struct {
	// Seed seeds every random choice (default 1), so a run's faults can be
	// told apart from the system's own nondeterminism.
	Seed uint64
	// ColdStartRate is the chance that an invocation runs in a new
	// execution environment although a warm one is idle (default 0.05):
	// Lambda recycles environments when it likes, and the function's
	// process starts with nothing in memory. New environments also start
	// when the function scales out and after every timeout.
	ColdStartRate float64
	// DuplicateRate is the chance that a message received from a queue, or
	// an asynchronous event, is delivered twice (default 0.05): SQS
	// standard queues deliver at least once (SQS developer guide, "Amazon
	// SQS at-least-once delivery"), and so does Lambda's asynchronous
	// queue ("How Lambda handles errors and retries with asynchronous
	// invocation").
	DuplicateRate float64
	// EventDelay bounds the random delay with which EventBridge delivers
	// the interruption rules' events to the queue (default 1s): delivery
	// is at least once and unordered (EventBridge user guide, "Event
	// delivery from AWS services"), never instant.
	EventDelay time.Duration
	// InOrder hands a batch's messages to the function in the order the
	// queue returned them; by default they are shuffled, as a standard
	// queue's best-effort ordering allows.
	InOrder bool
	// Timeouts replace functions' timeouts by name (tests of the timeout
	// path); otherwise each function has the stack's timeout, unscaled,
	// since the functions plan their work by their deadline.
	Timeouts map[string]time.Duration
}

// NoFaults turns every random fault off: what remains is the stack's own
// behaviour (reserved concurrency, retries, timeouts).
func NoFaults() LambdaOptions {
	return LambdaOptions{ColdStartRate: -1, DuplicateRate: -1, EventDelay: -1, InOrder: true}
}

// defaults fills the unset fields.
func (o *LambdaOptions) defaults() {
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.ColdStartRate == 0 {
		o.ColdStartRate = 0.05
	}
	if o.DuplicateRate == 0 {
		o.DuplicateRate = 0.05
	}
	if o.EventDelay == 0 {
		o.EventDelay = time.Second
	}
}

// Rates is the faults' settings as the demo prints them, e.g.
// "cold_start:0.05,duplicate:0.05,event_delay_s:1.0,shuffle:on".
func (o LambdaOptions) Rates() string {
	shuffle := "on"
	if o.InOrder {
		shuffle = "off"
	}
	return fmt.Sprintf("cold_start:%.2f,duplicate:%.2f,event_delay_s:%.1f,shuffle:%s",
		max(o.ColdStartRate, 0), max(o.DuplicateRate, 0), max(o.EventDelay, 0).Seconds(), shuffle)
}

// LambdaStats counts what the Lambda, SQS and EventBridge model did to the
// functions.
type LambdaStats struct {
	// Throttles counts invocations refused for want of concurrency
	// (asynchronous ones are retried; SQS batches return to the queue).
	Throttles int
	// Retries counts asynchronous invocations retried after an error.
	Retries int
	// Expired counts asynchronous events dropped past their maximum age.
	Expired int
	// Timeouts counts invocations stopped at the function's timeout.
	Timeouts int
	// ColdStarts counts new execution environments after the first.
	ColdStarts int
	// Duplicates counts messages and events delivered a second time.
	Duplicates int
	// Delayed counts EventBridge events delivered late.
	Delayed int
	// Failed counts, by function, invocations that ran and returned an
	// error other than a timeout: what Lambda's Errors metric shows
	// besides timeouts, and what a pass that should absorb a bad item
	// must not add to.
	Failed map[string]int
}

// String is the counts as the demo prints them.
func (s LambdaStats) String() string {
	return fmt.Sprintf("throttles:%d,retries:%d,expired:%d,timeouts:%d,cold_starts:%d,duplicates:%d,delayed:%d",
		s.Throttles, s.Retries, s.Expired, s.Timeouts, s.ColdStarts, s.Duplicates, s.Delayed)
}

// faults is the run's random source and counters, shared by every
// function and event source of one System.
type faults struct {
	o LambdaOptions
	// scale converts Lambda's asynchronous queue's delays to the local
	// run's time: Tick stands for the stack's one-minute schedule, so a
	// minute of Lambda's waiting takes Tick here.
	scale float64

	mu  sync.Mutex
	rng *rand.Rand

	throttles, retries, expired, timeouts, coldStarts, duplicates, delayed atomic.Int64
	// failed is guarded by mu.
	failed map[string]int
}

func newFaults(o LambdaOptions, tick time.Duration) *faults {
	o.defaults()
	return &faults{o: o, scale: float64(tick) / float64(time.Minute), rng: rand.New(rand.NewPCG(o.Seed, 0x1a3bda))}
}

// chance reports true with probability p (never for p <= 0).
func (f *faults) chance(p float64) bool {
	if p <= 0 {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rng.Float64() < p
}

// upTo is a random duration in [0, d] (0 for d <= 0).
func (f *faults) upTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Duration(f.rng.Int64N(int64(d) + 1))
}

// shuffle permutes n items unless the options keep the queue's order.
func (f *faults) shuffle(n int, swap func(i, j int)) {
	if f.o.InOrder {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rng.Shuffle(n, swap)
}

// lambdaTime is d of Lambda's time (a retry delay, an event age) in the
// local run's.
func (f *faults) lambdaTime(d time.Duration) time.Duration {
	return time.Duration(float64(d) * f.scale)
}

func (f *faults) stats() LambdaStats {
	f.mu.Lock()
	failed := maps.Clone(f.failed)
	f.mu.Unlock()
	return LambdaStats{Throttles: int(f.throttles.Load()), Retries: int(f.retries.Load()), Expired: int(f.expired.Load()),
		Timeouts: int(f.timeouts.Load()), ColdStarts: int(f.coldStarts.Load()), Duplicates: int(f.duplicates.Load()), Delayed: int(f.delayed.Load()),
		Failed: failed}
}

// failure counts a failed invocation of fn (timeouts have their own count).
func (f *faults) failure(fn string, err error) {
	var timeout *timeoutError
	if errors.As(err, &timeout) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == nil {
		f.failed = map[string]int{}
	}
	f.failed[fn]++
}
