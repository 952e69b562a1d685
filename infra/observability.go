package infra

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// MetricDimension is the one dimension every EMF metric carries: the
// cluster name, so several stacks can share an account.
const MetricDimension = "cluster"

// MetricSpec is one metric the functions are expected to emit in Embedded
// Metric Format (namespace MetricsNamespace, dimension MetricDimension).
// Names follow Karpenter's Prometheus metrics without the karpenter_ prefix
// and _total suffix, so dashboards translate one to one.
type MetricSpec struct {
	Name    string
	Unit    string // CloudWatch unit
	Emitter string // function(s)
	Meaning string
}

// Metric names the dashboard and alarms use (the operator-experience issue
// emits them).
const (
	MetricPodsPending                 = "pods_pending"
	MetricOldestPendingPodAge         = "oldest_pending_pod_age_seconds"
	MetricSchedulingDuration          = "scheduling_duration_seconds"
	MetricNodeClaimsCreated           = "nodeclaims_created"
	MetricNodeClaimsLaunched          = "nodeclaims_launched"
	MetricNodeClaimsRegistered        = "nodeclaims_registered"
	MetricNodeClaimsInitialized       = "nodeclaims_initialized"
	MetricNodeClaimsTerminated        = "nodeclaims_terminated"
	MetricNodeClaimsDisrupted         = "nodeclaims_disrupted"
	MetricCloudProviderErrors         = "cloudprovider_errors"
	MetricInsufficientCapacityErrors  = "ice_offerings_marked"
	MetricInterruptionReceived        = "interruption_received_messages"
	MetricInterruptionDeleted         = "interruption_deleted_messages"
	MetricInterruptionMessageLatency  = "interruption_message_latency_seconds"
	MetricDisruptionDecisions         = "disruption_decisions"
	MetricDisruptionEligibleNodes     = "disruption_eligible_nodes"
	MetricDisruptionEvaluationSeconds = "disruption_evaluation_duration_seconds"
	MetricNodesTotalCostPerHour       = "nodes_cost_per_hour"
	MetricNodesCount                  = "nodes"
	MetricWebhookNudges               = "webhook_nudges"
)

// ExpectedMetrics documents every metric above.
var ExpectedMetrics = []MetricSpec{
	{MetricPodsPending, "Count", "provisioner", "pending (Unschedulable, provisionable) pods seen in the last pass"},
	{MetricOldestPendingPodAge, "Seconds", "provisioner", "age of the oldest provisionable pending pod (alarmed)"},
	{MetricSchedulingDuration, "Seconds", "provisioner, disruption", "one solver pass (p50/p99 on the dashboard)"},
	{MetricNodeClaimsCreated, "Count", "provisioner, interruption, disruption", "NodeClaims created, dimension-free reason in logs"},
	{MetricNodeClaimsLaunched, "Count", "provisioner, interruption, disruption", "CreateFleet succeeded"},
	{MetricNodeClaimsRegistered, "Count", "lifecycle", "Node appeared for a NodeClaim"},
	{MetricNodeClaimsInitialized, "Count", "lifecycle", "NodeClaim became Initialized"},
	{MetricNodeClaimsTerminated, "Count", "lifecycle", "instance terminated and claim tombstoned"},
	{MetricNodeClaimsDisrupted, "Count", "disruption, interruption", "claims marked for disruption"},
	{MetricCloudProviderErrors, "Count", "all controllers", "failed EC2/Pricing/SSM calls"},
	{MetricInsufficientCapacityErrors, "Count", "provisioner, interruption", "offerings marked unavailable (ICE, spot warnings)"},
	{MetricInterruptionReceived, "Count", "interruption", "SQS messages received"},
	{MetricInterruptionDeleted, "Count", "interruption", "SQS messages handled and deleted"},
	{MetricInterruptionMessageLatency, "Seconds", "interruption", "event time to handled"},
	{MetricDisruptionDecisions, "Count", "disruption", "decisions taken (delete/replace)"},
	{MetricDisruptionEligibleNodes, "Count", "disruption", "candidates considered"},
	{MetricDisruptionEvaluationSeconds, "Seconds", "disruption", "one disruption pass"},
	{MetricNodesTotalCostPerHour, "None", "provisioner", "sum of the hourly prices of nodewright's nodes (USD)"},
	{MetricNodesCount, "Count", "provisioner", "nodes nodewright manages"},
	{MetricWebhookNudges, "Count", "webhook", "provisioner invocations the webhook sent after coalescing"},
}

func (b *builder) metric(name, stat string, period awscdk.Duration) awscloudwatch.Metric {
	return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(MetricsNamespace),
		MetricName:    jsii.String(name),
		DimensionsMap: &map[string]*string{MetricDimension: jsii.String(b.cfg.ClusterName)},
		Statistic:     jsii.String(stat),
		Period:        period,
	})
}

func (b *builder) observability() {
	st := b.Stack.Stack
	var topic awssns.ITopic
	switch {
	case b.cfg.AlarmTopicArn != "":
		topic = awssns.Topic_FromTopicArn(st, jsii.String("AlarmTopic"), jsii.String(b.cfg.AlarmTopicArn))
	case b.cfg.AlarmEmail != "":
		t := awssns.NewTopic(st, jsii.String("AlarmTopic"), &awssns.TopicProps{
			DisplayName: jsii.String("nodewright " + b.cfg.ClusterName + " alarms"),
			EnforceSSL:  jsii.Bool(true),
		})
		t.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(b.cfg.AlarmEmail), nil))
		topic = t
	}
	alarm := func(id, desc string, m awscloudwatch.IMetric, threshold float64, periods, datapoints float64) {
		a := awscloudwatch.NewAlarm(st, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(fmt.Sprintf("nodewright %s: %s", b.cfg.ClusterName, desc)),
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			EvaluationPeriods:  jsii.Number(periods),
			DatapointsToAlarm:  jsii.Number(datapoints),
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		if topic != nil {
			a.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
		}
	}
	five := awscdk.Duration_Minutes(jsii.Number(5))
	for _, q := range []struct {
		id, what string
		queue    awssqs.Queue
	}{
		{"InterruptionDLQNotEmpty", "interruption messages failed 3 times (see the interruption function's logs for the message IDs)", b.InterruptionDLQ},
		{"WorkDLQNotEmpty", "lifecycle work items failed repeatedly and were parked", b.WorkDLQ},
	} {
		alarm(q.id, q.what, q.queue.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Statistic: jsii.String("Maximum"), Period: five,
		}), 1, 1, 1)
	}
	for _, fn := range Functions {
		f := b.Functions[fn]
		// Errors in 2 of 3 five-minute periods: one transient failure is
		// retried by the next tick and not worth a page.
		alarm(exportID(fn)+"Errors", fn+" function errors", f.MetricErrors(&awscloudwatch.MetricOptions{
			Statistic: jsii.String("Sum"), Period: five,
		}), 1, 3, 2)
		// The singletons throttle by design (reserved concurrency 1 is how
		// they are serialized); only the others alarm on throttles.
		if Sizing[fn].ReservedConcurrency == 0 && fn != "webhookregistrar" {
			alarm(exportID(fn)+"Throttles", fn+" function throttled (account concurrency exhausted?)", f.MetricThrottles(&awscloudwatch.MetricOptions{
				Statistic: jsii.String("Sum"), Period: five,
			}), 1, 1, 1)
		}
	}
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	alarm("OldestPendingPod", fmt.Sprintf("a pod has been pending for more than %d s", b.cfg.OldestPendingPodAlarmSeconds),
		b.metric(MetricOldestPendingPodAge, "Maximum", minute), float64(b.cfg.OldestPendingPodAlarmSeconds), 3, 3)

	b.dashboard()
}

func (b *builder) dashboard() {
	five := awscdk.Duration_Minutes(jsii.Number(5))
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	graph := func(title string, left ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &left, Width: jsii.Number(8), Height: jsii.Number(6),
		})
	}
	var errs, durations []awscloudwatch.IMetric
	for _, fn := range Functions {
		f := b.Functions[fn]
		errs = append(errs, f.MetricErrors(&awscloudwatch.MetricOptions{Statistic: jsii.String("Sum"), Period: five, Label: jsii.String(fn)}))
		durations = append(durations, f.MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("p99"), Period: five, Label: jsii.String(fn)}))
	}
	qdepth := func(q awssqs.Queue, label string) awscloudwatch.IMetric {
		return q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: minute, Label: jsii.String(label)})
	}
	m := b.metric
	awscloudwatch.NewDashboard(b.Stack.Stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(dnsName("nodewright-", b.cfg.ClusterName)),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				graph("Pending pods", m(MetricPodsPending, "Maximum", minute), m(MetricOldestPendingPodAge, "Maximum", minute)),
				graph("NodeClaims", m(MetricNodeClaimsCreated, "Sum", five), m(MetricNodeClaimsLaunched, "Sum", five),
					m(MetricNodeClaimsInitialized, "Sum", five), m(MetricNodeClaimsTerminated, "Sum", five)),
				graph("Nodes and cost ($/h)", m(MetricNodesCount, "Maximum", five), m(MetricNodesTotalCostPerHour, "Maximum", five)),
			},
			{
				graph("Scheduling duration (s)", m(MetricSchedulingDuration, "p50", five), m(MetricSchedulingDuration, "p99", five)),
				graph("Interruption", m(MetricInterruptionReceived, "Sum", five), m(MetricInterruptionDeleted, "Sum", five),
					m(MetricInterruptionMessageLatency, "p99", five)),
				graph("Disruption", m(MetricDisruptionDecisions, "Sum", five), m(MetricNodeClaimsDisrupted, "Sum", five),
					m(MetricDisruptionEvaluationSeconds, "p99", five)),
			},
			{
				graph("Function errors", errs...),
				graph("Function duration p99 (ms)", durations...),
				graph("Queues", qdepth(b.InterruptionQueue, "interruption"), qdepth(b.WorkQueue, "work"),
					qdepth(b.InterruptionDLQ, "interruption DLQ"), qdepth(b.WorkDLQ, "work DLQ"),
					m(MetricCloudProviderErrors, "Sum", five), m(MetricInsufficientCapacityErrors, "Sum", five)),
			},
		},
	})
}
