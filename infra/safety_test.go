package infra

import (
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/metrics"
)

// Every queue with a dead-letter queue keeps a message longer than all the
// receives it is allowed: otherwise a failing message expires before its
// last redelivery and the DLQ (and its alarm) can never see it.
func TestQueuesOutliveTheirRedrives(t *testing.T) {
	_, _, j := full(t)
	redriven := 0
	for _, q := range resources(j, "AWS::SQS::Queue") {
		rp, ok := q.Props["RedrivePolicy"].(map[string]interface{})
		if !ok {
			continue
		}
		redriven++
		retention, _ := q.Props["MessageRetentionPeriod"].(float64)
		if retention == 0 {
			retention = 4 * 24 * 3600 // SQS's default
		}
		visibility, _ := q.Props["VisibilityTimeout"].(float64)
		if visibility == 0 {
			visibility = 30
		}
		receives, _ := rp["maxReceiveCount"].(float64)
		if retention <= visibility*receives {
			t.Errorf("%s: retention %v s <= visibility %v s x maxReceiveCount %v: the DLQ can never fire", q.ID, retention, visibility, receives)
		}
	}
	if redriven != 4 {
		t.Errorf("%d queues with a DLQ, want 4", redriven)
	}
}

// The public webhook is capped so a flood cannot take the account's
// concurrency from the functions that matter; interruption has a floor; the
// provisioner's queue is bounded by the event source's maximum concurrency,
// not by a reserved concurrency of 1 that throttled nudges.
func TestConcurrencyProtectsTheFunctionsThatMatter(t *testing.T) {
	_, _, j := full(t)
	reserved := func(fn string) float64 {
		id := logicalID(t, j, "AWS::Lambda::Function", exportID(fn)+"Function")
		for _, r := range resources(j, "AWS::Lambda::Function") {
			if r.ID == id {
				v, _ := r.Props["ReservedConcurrentExecutions"].(float64)
				return v
			}
		}
		return 0
	}
	if v := reserved("webhook"); v < 1 || v > 50 {
		t.Errorf("webhook reserved concurrency %v, want a small cap", v)
	}
	if v := reserved("interruption"); v < 2 {
		t.Errorf("interruption reserved concurrency %v, want a floor", v)
	}
	if v := reserved("provisioner"); v != 0 {
		t.Errorf("provisioner reserved concurrency %v: nudges would be throttled while a run holds the slot", v)
	}
	found := false
	for _, m := range resources(j, "AWS::Lambda::EventSourceMapping") {
		if !strings.Contains(js(m.Props["FunctionName"]), "ProvisionerFunction") {
			continue
		}
		found = true
		if js(m.Props["ScalingConfig"]) != `{"MaximumConcurrency":2}` {
			t.Errorf("provisioner event source scaling %s, want MaximumConcurrency 2", js(m.Props["ScalingConfig"]))
		}
	}
	if !found {
		t.Error("no provisioner event source")
	}
}

// Alarms that page when nodewright stops: heartbeats with missing data as
// breaching, the interruption queue's age, runs near their timeout, a
// refused garbage collection and undecodable claims; and no page for
// webhook throttles.
func TestLivenessAlarms(t *testing.T) {
	_, _, j := full(t)
	var heartbeats, nearTimeout, backlog, gc, undecodable, lifecycleFailing int
	for _, a := range resources(j, "AWS::CloudWatch::Alarm") {
		p := a.Props
		switch {
		case p["MetricName"] == metrics.FunctionRuns:
			heartbeats++
			if p["TreatMissingData"] != "breaching" || p["ComparisonOperator"] != "LessThanThreshold" {
				t.Errorf("%s: heartbeat alarm must treat missing data as breaching: %s", a.ID, js(p))
			}
		case p["MetricName"] == "Duration":
			nearTimeout++
		case p["MetricName"] == "ApproximateAgeOfOldestMessage":
			backlog++
			if p["Threshold"] != float64(60) || !strings.Contains(js(p["Dimensions"]), "InterruptionQueue") {
				t.Errorf("%s: %s", a.ID, js(p))
			}
		case p["MetricName"] == "Throttles" && strings.Contains(a.ID, "Webhook"):
			t.Errorf("%s: webhook throttles page, but are harmless under failurePolicy Ignore", a.ID)
		case strings.Contains(js(p["Metrics"]), metrics.GCRefused):
			gc++
		case strings.Contains(js(p["Metrics"]), metrics.NodeClaimsUndecodable):
			undecodable++
		case strings.Contains(js(p["Metrics"]), metrics.LifecycleFailures):
			// Lifecycle failures no longer fail the invocation: a claim
			// that keeps failing pages here instead of as a heartbeat.
			lifecycleFailing++
			if p["EvaluationPeriods"] != float64(3) || p["DatapointsToAlarm"] != float64(3) {
				t.Errorf("%s: a transient lifecycle failure pages: %s", a.ID, js(p))
			}
		}
	}
	if heartbeats != 3 || nearTimeout != len(Functions) || backlog != 1 || gc != 1 || undecodable != 1 || lifecycleFailing != 1 {
		t.Errorf("alarms: heartbeats=%d near-timeout=%d interruption-backlog=%d gc-refused=%d undecodable=%d lifecycle-failing=%d",
			heartbeats, nearTimeout, backlog, gc, undecodable, lifecycleFailing)
	}
}

// Every SQS event source runs at most as many invocations as its function
// may (its reserved concurrency, Lambda's minimum of 2 for disruption's 1):
// an event source that scales past it gets its batches throttled, and a
// throttled batch uses a receive, so spot warnings reached the DLQ
// unhandled. An unreserved function's source keeps its own cap, if any.
func TestEventSourceMaxConcurrencyIsReservedConcurrency(t *testing.T) {
	_, _, j := full(t)
	fns := map[string]resource{}
	for _, f := range resources(j, "AWS::Lambda::Function") {
		fns[f.ID] = f
	}
	seen := map[string]float64{}
	for _, m := range resources(j, "AWS::Lambda::EventSourceMapping") {
		ref, _ := m.Props["FunctionName"].(map[string]interface{})
		id, _ := ref["Ref"].(string)
		f, ok := fns[id]
		if !ok {
			t.Errorf("%s: function %s is not in the template", m.ID, js(m.Props["FunctionName"]))
			continue
		}
		var name string
		for _, fn := range Functions {
			if strings.HasPrefix(id, exportID(fn)+"Function") {
				name = fn
			}
		}
		reserved, _ := f.Props["ReservedConcurrentExecutions"].(float64)
		scaling, _ := m.Props["ScalingConfig"].(map[string]interface{})
		got, _ := scaling["MaximumConcurrency"].(float64)
		want := float64(Sizing[name].SQSMaxConcurrency)
		if reserved > 0 {
			want = max(reserved, 2)
		}
		if got != want {
			t.Errorf("%s (%s, reserved concurrency %v): event source MaximumConcurrency %v, want %v", m.ID, name, reserved, got, want)
		}
		seen[name] = got
	}
	if seen["interruption"] != 5 || seen["disruption"] != 2 || seen["provisioner"] != 2 || len(seen) != 4 {
		t.Errorf("event sources' maximum concurrency by function = %v, want interruption 5, disruption 2, provisioner 2 and lifecycle's", seen)
	}
}

// Every function invoked asynchronously, by a schedule (EventBridge) or
// as a custom resource's provider (CloudFormation), is never run again by
// Lambda: the rule target's RetryAttempts is only EventBridge's delivery
// retry, and Lambda's own default (2 retries, 6 hours of event age) made
// one failing claim run each lifecycle tick three times. The event age is
// short, so a throttled tick or request is dropped, not run late.
func TestAsyncInvokedFunctionsAreNotRetried(t *testing.T) {
	_, _, j := full(t)
	arnOf := func(v interface{}) string {
		m, _ := v.(map[string]interface{})
		ga, _ := m["Fn::GetAtt"].([]interface{})
		if len(ga) == 2 && ga[1] == "Arn" {
			id, _ := ga[0].(string)
			return id
		}
		return ""
	}
	async := map[string]string{} // function logical ID -> what invokes it
	for _, r := range resources(j, "AWS::Events::Rule") {
		if r.Props["ScheduleExpression"] == nil {
			continue
		}
		for _, tg := range asList(r.Props["Targets"]) {
			tm := tg.(map[string]interface{})
			if id := arnOf(tm["Arn"]); strings.Contains(id, "Function") {
				async[id] = "schedule " + r.ID
				if js(tm["RetryPolicy"]) != `{"MaximumRetryAttempts":0}` {
					t.Errorf("%s: target %s retry policy %s, want EventBridge's delivery retries off", r.ID, id, js(tm["RetryPolicy"]))
				}
			}
		}
	}
	for id, r := range j["Resources"].(map[string]interface{}) {
		rm := r.(map[string]interface{})
		if typ, _ := rm["Type"].(string); strings.HasPrefix(typ, "Custom::") || typ == "AWS::CloudFormation::CustomResource" {
			props, _ := rm["Properties"].(map[string]interface{})
			if fn := arnOf(props["ServiceToken"]); fn != "" {
				async[fn] = "custom resource " + id
			}
		}
	}
	configs := map[string]resource{}
	for _, c := range resources(j, "AWS::Lambda::EventInvokeConfig") {
		ref, _ := c.Props["FunctionName"].(map[string]interface{})
		id, _ := ref["Ref"].(string)
		configs[id] = c
	}
	for _, fn := range []string{"provisioner", "lifecycle", "disruption", "webhookregistrar"} {
		if id := logicalID(t, j, "AWS::Lambda::Function", exportID(fn)+"Function"); async[id] == "" {
			t.Errorf("%s is not found invoked asynchronously: the test no longer sees its schedule or custom resource", fn)
		}
	}
	for id, by := range async {
		c, ok := configs[id]
		if !ok {
			t.Errorf("%s (invoked by %s) has no EventInvokeConfig: Lambda retries it twice and keeps its events 6 hours", id, by)
			continue
		}
		retries, hasRetries := c.Props["MaximumRetryAttempts"].(float64)
		age, hasAge := c.Props["MaximumEventAgeInSeconds"].(float64)
		if !hasRetries || retries != 0 || !hasAge || age > 300 {
			t.Errorf("%s (invoked by %s): EventInvokeConfig %s, want MaximumRetryAttempts 0 and MaximumEventAgeInSeconds <= 300", id, by, js(c.Props))
		}
	}
}
