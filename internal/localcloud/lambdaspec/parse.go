package lambdaspec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
)

// resource is one entry of the template's Resources.
type resource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties"`
}

// template is a template's resources by logical ID.
type template map[string]resource

// Parse reads a synthesized template (cdk.out/<stack>.template.json).
func Parse(data []byte) (*Spec, error) {
	var doc struct {
		Resources template `json:"Resources"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("read template: %w", err)
	}
	t := doc.Resources
	s := &Spec{functions: map[string]Function{}, queues: map[string]Queue{}}
	var errs []error
	for id, r := range t {
		if r.Type == "AWS::SQS::Queue" {
			q, err := t.queue(id)
			errs = append(errs, err)
			s.queues[q.Construct] = q
		}
	}
	for id, r := range t {
		if name, ok := functionName(id); ok && r.Type == "AWS::Lambda::Function" {
			f, err := t.function(id, name, s.queues)
			errs = append(errs, err)
			s.functions[name] = f
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(s.functions) == 0 {
		return nil, errors.New("read template: no function <Name>Function<hash>")
	}
	return s, nil
}

// functionName is "provisioner" for ProvisionerFunction<hash>: the stack
// names each function's construct exportID(name)+"Function"
// (infra/functions.go). Other functions (CDK's own providers) are not ours.
func functionName(logicalID string) (string, bool) {
	c := iam.ConstructID(logicalID)
	base, ok := strings.CutSuffix(c, "Function")
	if !ok || base == "" || c == logicalID {
		return "", false
	}
	return strings.ToLower(base[:1]) + base[1:], true
}

// function reads the function with logical ID id and what refers to it:
// its EventInvokeConfig, event source mappings and schedule rules.
func (t template) function(id, name string, queues map[string]Queue) (Function, error) {
	p := t[id].Properties
	f := Function{Name: name, LogicalID: id, Timeout: 3 * time.Second,
		Async: Async{MaxRetries: DefaultMaxRetries, MaxEventAge: DefaultMaxEventAge}}
	var errs []error
	if v, ok := p["Timeout"]; ok {
		n, err := number(v)
		errs = append(errs, err)
		f.Timeout = time.Duration(n) * time.Second
	}
	if v, ok := p["ReservedConcurrentExecutions"]; ok {
		n, err := number(v)
		errs = append(errs, err)
		f.ReservedConcurrency = n
	}
	for rid, r := range t {
		switch r.Type {
		case "AWS::Lambda::EventInvokeConfig":
			if ref(r.Properties["FunctionName"]) == id {
				f.Async, errs = asyncConfig(r.Properties), append(errs, asyncErr(r.Properties))
			}
		case "AWS::Lambda::EventSourceMapping":
			if ref(r.Properties["FunctionName"]) == id {
				es, err := eventSource(rid, r.Properties, queues)
				errs = append(errs, err)
				f.Sources = append(f.Sources, es)
			}
		case "AWS::Events::Rule":
			if expr, ok := r.Properties["ScheduleExpression"].(string); ok && targets(r.Properties, id) {
				f.Schedules = append(f.Schedules, expr)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return f, fmt.Errorf("function %s: %w", id, err)
	}
	return f, nil
}

// asyncConfig is an EventInvokeConfig; a field it leaves out keeps
// Lambda's default.
func asyncConfig(p map[string]any) Async {
	a := Async{MaxRetries: DefaultMaxRetries, MaxEventAge: DefaultMaxEventAge, Configured: true}
	if n, err := number(p["MaximumRetryAttempts"]); err == nil {
		a.MaxRetries = n
	}
	if n, err := number(p["MaximumEventAgeInSeconds"]); err == nil {
		a.MaxEventAge = time.Duration(n) * time.Second
	}
	return a
}

// asyncErr reports an EventInvokeConfig field that is present but not a
// number.
func asyncErr(p map[string]any) error {
	var errs []error
	for _, k := range []string{"MaximumRetryAttempts", "MaximumEventAgeInSeconds"} {
		if v, ok := p[k]; ok {
			if _, err := number(v); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", k, err))
			}
		}
	}
	return errors.Join(errs...)
}

// eventSource reads an SQS event source mapping.
func eventSource(id string, p map[string]any, queues map[string]Queue) (EventSource, error) {
	es := EventSource{LogicalID: id, BatchSize: 10}
	qid := getAtt(p["EventSourceArn"], "Arn")
	q, ok := queues[iam.ConstructID(qid)]
	if !ok {
		return es, fmt.Errorf("event source %s: source %v is not a queue of the template", id, p["EventSourceArn"])
	}
	es.Queue = q
	var errs []error
	if v, ok := p["BatchSize"]; ok {
		n, err := number(v)
		errs = append(errs, err)
		es.BatchSize = n
	}
	if sc, ok := p["ScalingConfig"].(map[string]any); ok {
		if v, ok := sc["MaximumConcurrency"]; ok {
			n, err := number(v)
			errs = append(errs, err)
			es.MaxConcurrency = n
		}
	}
	types, _ := p["FunctionResponseTypes"].([]any)
	for _, v := range types {
		es.ReportBatchItemFailures = es.ReportBatchItemFailures || v == "ReportBatchItemFailures"
	}
	if err := errors.Join(errs...); err != nil {
		return es, fmt.Errorf("event source %s: %w", id, err)
	}
	return es, nil
}

// queue reads an SQS queue, with SQS's defaults for what it leaves out.
func (t template) queue(id string) (Queue, error) {
	p := t[id].Properties
	q := Queue{Construct: iam.ConstructID(id), LogicalID: id, VisibilityTimeout: 30 * time.Second, Retention: 4 * 24 * time.Hour}
	var errs []error
	if v, ok := p["VisibilityTimeout"]; ok {
		n, err := number(v)
		errs = append(errs, err)
		q.VisibilityTimeout = time.Duration(n) * time.Second
	}
	if v, ok := p["MessageRetentionPeriod"]; ok {
		n, err := number(v)
		errs = append(errs, err)
		q.Retention = time.Duration(n) * time.Second
	}
	if rp, ok := p["RedrivePolicy"].(map[string]any); ok {
		n, err := number(rp["maxReceiveCount"])
		errs = append(errs, err)
		q.MaxReceiveCount = n
		q.DeadLetter = iam.ConstructID(getAtt(rp["deadLetterTargetArn"], "Arn"))
	}
	if err := errors.Join(errs...); err != nil {
		return q, fmt.Errorf("queue %s: %w", id, err)
	}
	return q, nil
}
