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
}
