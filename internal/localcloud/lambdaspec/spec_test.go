package lambdaspec

import (
	"context"
	"strings"
	"testing"
	"time"
)

// A template as CDK writes one: references by Ref and Fn::GetAtt, numbers
// as numbers or strings, an EventInvokeConfig for one function only.
const small = `{"Resources": {
 "WorkQueue65074231": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 180, "MessageRetentionPeriod": "345600",
   "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["WorkDLQ0123ABCD", "Arn"]}, "maxReceiveCount": 10}}},
 "WorkDLQ0123ABCD": {"Type": "AWS::SQS::Queue", "Properties": {"MessageRetentionPeriod": 1209600}},
 "LifecycleFunction8F5375C1": {"Type": "AWS::Lambda::Function", "Properties": {"Timeout": 120}},
 "ProvisionerFunction35249F57": {"Type": "AWS::Lambda::Function", "Properties": {"Timeout": 300, "ReservedConcurrentExecutions": 1}},
 "ProvisionerFunctionEventInvokeConfig56FF957D": {"Type": "AWS::Lambda::EventInvokeConfig",
   "Properties": {"FunctionName": {"Ref": "ProvisionerFunction35249F57"}, "Qualifier": "$LATEST", "MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60}},
 "LifecycleFunctionSqsEventSourceWorkQueue65074231E0479A4F": {"Type": "AWS::Lambda::EventSourceMapping",
   "Properties": {"FunctionName": {"Ref": "LifecycleFunction8F5375C1"}, "EventSourceArn": {"Fn::GetAtt": ["WorkQueue65074231", "Arn"]},
     "BatchSize": 10, "ScalingConfig": {"MaximumConcurrency": 3}, "FunctionResponseTypes": ["ReportBatchItemFailures"]}},
 "LifecycleSchedule56ACD84D": {"Type": "AWS::Events::Rule", "Properties": {"ScheduleExpression": "rate(1 minute)",
   "Targets": [{"Arn": {"Fn::GetAtt": ["LifecycleFunction8F5375C1", "Arn"]}, "Id": "Target0", "RetryPolicy": {"MaximumRetryAttempts": 0}}]}},
 "AWS679f53fac002430cb0da5b7982bd22872D164C4C": {"Type": "AWS::Lambda::Function", "Properties": {"Timeout": 120}}
}}`

func TestParse(t *testing.T) {
	s, err := Parse([]byte(small))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Functions(), ","); got != "lifecycle,provisioner" {
		t.Fatalf("functions %s (CDK's own provider function is not one of ours)", got)
	}
	life, _ := s.Function("lifecycle")
	if life.Timeout != 120*time.Second || life.ReservedConcurrency != 0 {
		t.Errorf("lifecycle %+v", life)
	}
	if life.Async != (Async{MaxRetries: 2, MaxEventAge: 6 * time.Hour}) {
		t.Errorf("lifecycle without EventInvokeConfig: %+v, want Lambda's defaults", life.Async)
	}
	if len(life.Schedules) != 1 || life.Schedules[0] != "rate(1 minute)" {
		t.Errorf("schedules %v", life.Schedules)
	}
	if len(life.Sources) != 1 {
		t.Fatalf("sources %+v", life.Sources)
	}
	es := life.Sources[0]
	want := Queue{Construct: "WorkQueue", LogicalID: "WorkQueue65074231", VisibilityTimeout: 180 * time.Second, Retention: 96 * time.Hour,
		MaxReceiveCount: 10, DeadLetter: "WorkDLQ"}
	if es.Queue != want || es.BatchSize != 10 || es.MaxConcurrency != 3 || !es.ReportBatchItemFailures {
		t.Errorf("event source %+v", es)
	}
	prov, _ := s.Function("provisioner")
	if prov.ReservedConcurrency != 1 || prov.Async != (Async{MaxRetries: 0, MaxEventAge: time.Minute, Configured: true}) || len(prov.Sources) != 0 {
		t.Errorf("provisioner %+v", prov)
	}
	if dlq, err := s.Queue("WorkDLQ"); err != nil || dlq.Retention != 14*24*time.Hour || dlq.VisibilityTimeout != 30*time.Second {
		t.Errorf("dead-letter queue %+v %v", dlq, err)
	}
	if _, err := s.Function("webhook"); err == nil {
		t.Error("a function the template lacks was found")
	}
}

func TestParseRejects(t *testing.T) {
	for name, doc := range map[string]string{
		"no functions":    `{"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}`,
		"timeout":         `{"Resources": {"XFunction01234567": {"Type": "AWS::Lambda::Function", "Properties": {"Timeout": "soon"}}}}`,
		"foreign source":  `{"Resources": {"XFunction01234567": {"Type": "AWS::Lambda::Function"}, "M": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"FunctionName": {"Ref": "XFunction01234567"}, "EventSourceArn": "arn:aws:kinesis:x"}}}}`,
		"not JSON":        `{`,
		"receive count":   `{"Resources": {"XFunction01234567": {"Type": "AWS::Lambda::Function"}, "Q": {"Type": "AWS::SQS::Queue", "Properties": {"RedrivePolicy": {"maxReceiveCount": 2.5}}}}}`,
		"retry attempts":  `{"Resources": {"XFunction01234567": {"Type": "AWS::Lambda::Function"}, "C": {"Type": "AWS::Lambda::EventInvokeConfig", "Properties": {"FunctionName": {"Ref": "XFunction01234567"}, "MaximumRetryAttempts": "x"}}}}`,
		"max concurrency": `{"Resources": {"XFunction01234567": {"Type": "AWS::Lambda::Function"}, "Q": {"Type": "AWS::SQS::Queue"}, "M": {"Type": "AWS::Lambda::EventSourceMapping", "Properties": {"FunctionName": {"Ref": "XFunction01234567"}, "EventSourceArn": {"Fn::GetAtt": ["Q", "Arn"]}, "ScalingConfig": {"MaximumConcurrency": true}}}}}`,
	} {
		if _, err := Parse([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The stack's own template, as `cdk synth` writes it: every function the
// repository deploys is there, with the settings the local run drives it
// by. The values checked are what the stack's sources say today
// (infra/functions.go, infra/stack.go, settings.DefaultSize); a change there
// is expected to change this test, not the local run.
func TestStackTemplate(t *testing.T) {
	if testing.Short() {
		t.Skip("synthesizes the stack (minutes on a cold cache)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s, err := Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Functions(), ","); got != "disruption,interruption,lifecycle,provisioner,webhook,webhookregistrar" {
		t.Fatalf("functions %s", got)
	}
	queueOf := map[string]string{"provisioner": "ProvisionQueue", "lifecycle": "WorkQueue", "interruption": "InterruptionQueue", "disruption": "DisruptionQueue"}
	for _, name := range s.Functions() {
		f, _ := s.Function(name)
		t.Logf("%s: timeout %s, reserved %d, async %+v, schedules %v", name, f.Timeout, f.ReservedConcurrency, f.Async, f.Schedules)
		if f.Timeout <= 0 || f.Async.MaxEventAge <= 0 {
			t.Errorf("%s: %+v", name, f)
		}
		q, consumes := queueOf[name]
		if !consumes {
			// The registrar's one schedule is the webhook secret's
			// rotation (webhookSecretRotationDays, default 7).
			rotation := name == "webhookregistrar" && len(f.Schedules) == 1 && f.Schedules[0] == "rate(7 days)"
			if len(f.Sources) != 0 || (len(f.Schedules) != 0 && !rotation) {
				t.Errorf("%s is invoked by a queue or schedule: %+v", name, f)
			}
			continue
		}
		if len(f.Sources) != 1 || f.Sources[0].Queue.Construct != q {
			t.Fatalf("%s: event sources %+v, want one on %s", name, f.Sources, q)
		}
		es := f.Sources[0]
		t.Logf("  %s: batch %d, max concurrency %d, queue %+v", q, es.BatchSize, es.MaxConcurrency, es.Queue)
		// Lambda requires a visibility timeout of at least the function's
		// timeout of a queue it consumes ("Using Lambda with Amazon SQS").
		if es.Queue.VisibilityTimeout < f.Timeout || es.Queue.MaxReceiveCount == 0 || es.Queue.DeadLetter == "" || !es.ReportBatchItemFailures || es.BatchSize != 10 {
			t.Errorf("%s: event source %+v", name, es)
		}
		if _, err := s.Queue(es.Queue.DeadLetter); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if name != "interruption" && len(f.Schedules) != 1 {
			t.Errorf("%s: schedules %v", name, f.Schedules)
		}
	}
	prov, _ := s.Function("provisioner")
	if prov.Async != (Async{MaxRetries: 0, MaxEventAge: time.Minute, Configured: true}) || prov.Sources[0].MaxConcurrency != 2 {
		t.Errorf("provisioner: async %+v, max concurrency %d", prov.Async, prov.Sources[0].MaxConcurrency)
	}
	if d, _ := s.Function("disruption"); d.ReservedConcurrency != 1 || d.Timeout != 300*time.Second {
		t.Errorf("disruption %+v", d)
	}
	if i, _ := s.Function("interruption"); i.ReservedConcurrency != 5 || i.Sources[0].Queue.VisibilityTimeout != time.Minute || i.Sources[0].Queue.Retention != 5*time.Minute {
		t.Errorf("interruption %+v", i)
	}
}
