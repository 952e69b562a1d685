// Package lambdaspec reads, from the stack's synthesized CloudFormation
// template, how Lambda runs each function: its timeout and reserved
// concurrency, its asynchronous invocation settings, its SQS event source
// mappings and their queues, and the schedules that invoke it. The local run
// drives the functions by these settings, so a change to the stack changes
// what the local run does, and nothing is restated beside the stack.
package lambdaspec

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud"
)

// Function is one Lambda function as the template deploys it.
type Function struct {
	// Name is the function's name in the repository ("provisioner",
	// "webhookregistrar"): its logical ID is <Name capitalized>Function<hash>.
	Name, LogicalID string
	// Timeout is the function's Timeout (Lambda's default is 3 s).
	Timeout time.Duration
	// ReservedConcurrency is ReservedConcurrentExecutions; 0 when the
	// function reserves none (it then shares the account's unreserved pool).
	ReservedConcurrency int
	// Async is how Lambda retries the function's asynchronous invocations.
	Async Async
	// Sources are the function's SQS event source mappings.
	Sources []EventSource
	// Schedules are the ScheduleExpressions of the EventBridge rules that
	// invoke the function (asynchronously).
	Schedules []string
}

// Async is a function's EventInvokeConfig.
type Async struct {
	MaxRetries  int
	MaxEventAge time.Duration
	// Configured is false when the template has no EventInvokeConfig for
	// the function: Lambda's defaults apply.
	Configured bool
}

// Lambda's asynchronous defaults: two retries, events kept six hours
// (Lambda developer guide, "Configuring error handling for asynchronous
// invocation").
const (
	DefaultMaxRetries  = 2
	DefaultMaxEventAge = 6 * time.Hour
)

// EventSource is one SQS event source mapping.
type EventSource struct {
	LogicalID string
	Queue     Queue
	// BatchSize is the most messages per invocation (Lambda's SQS
	// default 10).
	BatchSize int
	// MaxConcurrency is ScalingConfig.MaximumConcurrency: the most
	// concurrent invocations the mapping makes; 0 when unset (the mapping
	// scales by Lambda's own rules, up to the function's concurrency).
	MaxConcurrency int
	// ReportBatchItemFailures is whether the function may fail single
	// messages (FunctionResponseTypes ReportBatchItemFailures).
	ReportBatchItemFailures bool
}

// Queue is an SQS queue of the template.
type Queue struct {
	// Construct is the logical ID without CDK's hash ("WorkQueue").
	Construct, LogicalID string
	// VisibilityTimeout (SQS's default 30 s) and Retention
	// (MessageRetentionPeriod, default 4 days).
	VisibilityTimeout, Retention time.Duration
	// MaxReceiveCount is the redrive policy's maxReceiveCount; 0 without
	// a dead-letter queue.
	MaxReceiveCount int
	// DeadLetter is the construct ID of the redrive policy's dead-letter
	// queue ("" without one).
	DeadLetter string
}

// Spec is every function and queue of a template.
type Spec struct {
	functions map[string]Function
	queues    map[string]Queue
}

// Function returns the function named name ("lifecycle").
func (s *Spec) Function(name string) (Function, error) {
	f, ok := s.functions[name]
	if !ok {
		return Function{}, fmt.Errorf("the template has no function %s (has %v)", name, s.Functions())
	}
	return f, nil
}

// Functions lists the functions' names.
func (s *Spec) Functions() []string {
	out := make([]string, 0, len(s.functions))
	for n := range s.functions {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Queue returns the queue whose construct ID is construct ("WorkQueue").
func (s *Spec) Queue(construct string) (Queue, error) {
	q, ok := s.queues[construct]
	if !ok {
		return Queue{}, fmt.Errorf("the template has no queue %s", construct)
	}
	return q, nil
}

// Load reads the stack's template as `cdk synth` produces it (synthesized
// and cached by localcloud.StackTemplate: minutes the first time).
func Load(ctx context.Context) (*Spec, error) {
	b, err := localcloud.StackTemplate(ctx)
	if err != nil {
		return nil, fmt.Errorf("lambda settings: %w", err)
	}
	return Parse(b)
}
