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
	var heartbeats, nearTimeout, backlog, gc, undecodable int
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
		}
	}
	if heartbeats != 3 || nearTimeout != len(Functions) || backlog != 1 || gc != 1 || undecodable != 1 {
		t.Errorf("alarms: heartbeats=%d near-timeout=%d interruption-backlog=%d gc-refused=%d undecodable=%d", heartbeats, nearTimeout, backlog, gc, undecodable)
	}
}
