package infra

import (
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/internal/metrics"
)

func TestAlarmsAndDashboard(t *testing.T) {
	_, tpl, j := full(t)
	alarms := resources(j, "AWS::CloudWatch::Alarm")
	var dlq, errorsN, throttles, pending int
	for _, a := range alarms {
		p := a.Props
		switch p["MetricName"] {
		case "ApproximateNumberOfMessagesVisible":
			dlq++
		case "Errors":
			errorsN++
		case "Throttles":
			throttles++
		case metrics.OldestPendingPodSeconds:
			pending++
			if p["MetricName"] != "nodewright_pods_oldest_pending_seconds" {
				t.Errorf("oldest pending pod alarm reads %v", p["MetricName"])
			}
			if p["Namespace"] != MetricsNamespace || p["Threshold"] != float64(300) ||
				js(p["Dimensions"]) != `[{"Name":"cluster","Value":"example"},{"Name":"function","Value":"provisioner"}]` {
				t.Errorf("oldest pending pod alarm = %s", js(p))
			}
		}
		if len(asList(p["AlarmActions"])) != 1 {
			t.Errorf("%s: alarm actions %v, want the alarm topic", a.ID, p["AlarmActions"])
		}
	}
	if dlq != 4 || errorsN != len(Functions) || throttles != 3 || pending != 1 {
		t.Errorf("alarms: dlq=%d errors=%d throttles=%d pending=%d", dlq, errorsN, throttles, pending)
	}
	check(t, "email subscription", func() {
		tpl.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]interface{}{"Protocol": "email", "Endpoint": "oncall@example.com"})
	})
	check(t, "dashboard", func() { tpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1)) })
	body := js(resources(j, "AWS::CloudWatch::Dashboard")[0].Props["DashboardBody"])
	for _, m := range DashboardMetrics {
		if !strings.Contains(body, `MetricName=\\\"`+m+`\\\"`) {
			t.Errorf("dashboard lacks %s", m)
		}
	}
	// Karpenter's v1 names where they mean the same (issue 19).
	for _, m := range []string{"karpenter_scheduler_scheduling_duration_seconds", "karpenter_voluntary_disruption_decisions_total",
		"karpenter_nodeclaims_created_total", "karpenter_pods_eviction_requests_total", "nodewright_cluster_cost_per_hour"} {
		if !strings.Contains(body, m) {
			t.Errorf("dashboard lacks %s", m)
		}
	}
}

func TestSavedQueries(t *testing.T) {
	_, _, j := full(t)
	defs := resources(j, "AWS::Logs::QueryDefinition")
	if len(defs) != len(SavedQueries()) {
		t.Fatalf("%d query definitions, want %d", len(defs), len(SavedQueries()))
	}
	names := map[string]string{}
	for _, d := range defs {
		if n := len(asList(d.Props["LogGroupNames"])); n != len(Functions) {
			t.Errorf("%s: %d log groups, want every function's", d.ID, n)
		}
		names[d.Props["Name"].(string)] = d.Props["QueryString"].(string)
	}
	for name, placeholder := range map[string]string{
		"why-is-this-pod-pending": "NAMESPACE/POD", "why-was-this-node-removed": "NODECLAIM_OR_NODE", "errors-and-warnings": "ERROR",
	} {
		q, ok := names["nodewright/example/"+name]
		if !ok || !strings.Contains(q, placeholder) {
			t.Errorf("query %s = %q", name, q)
		}
	}
}
