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

	"github.com/nodewright/nodewright/internal/metrics"
)

// The functions emit Embedded Metric Format through internal/metrics with the
// dimensions {cluster, function} (plus per-metric ones such as nodepool), so
// the alarm names the emitting function and the dashboard uses SEARCH, which
// matches every dimension set of a metric.
const (
	dimCluster  = "cluster"
	dimFunction = "function"
)

// DashboardMetrics are the EMF metrics the dashboard plots (names from
// internal/metrics: Karpenter's v1 names where the meaning is the same).
var DashboardMetrics = []string{
	metrics.PodsPending, metrics.OldestPendingPodSeconds, metrics.PodsUnschedulable, metrics.PodsNominated,
	metrics.NodeClaimsCreated, metrics.NodeClaimsTerminated, metrics.NodeClaimsDisrupted, metrics.ClusterCostPerHour,
	metrics.SchedulingDuration, metrics.ProvisionerBatchSize, metrics.WebhookNudges,
	metrics.InterruptionMessages, metrics.InterruptionMessageLatency,
	metrics.DisruptionDecisions, metrics.DisruptionEligibleNodes, metrics.DisruptionActions,
	metrics.EvictionRequests, metrics.CloudProviderErrors,
	metrics.NodePoolUsage, metrics.NodePoolLimit, metrics.Nodes,
}

// search plots every series of an EMF metric for this cluster.
func (b *builder) search(name, stat string, period awscdk.Duration) awscloudwatch.IMetric {
	expr := fmt.Sprintf(`SEARCH('Namespace="%s" MetricName="%s" %s="%s"', '%s', %d)`,
		MetricsNamespace, name, dimCluster, b.cfg.ClusterName, stat, int(*period.ToSeconds(nil)))
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(expr),
		Label:      jsii.String(""),
		Period:     period,
	})
}

func (b *builder) observability() {
	st := b.scope
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
	newAlarm := func(id, desc string, p *awscloudwatch.AlarmProps) {
		p.AlarmDescription = jsii.String(fmt.Sprintf("nodewright %s: %s", b.cfg.ClusterName, desc))
		a := awscloudwatch.NewAlarm(st, jsii.String(id), p)
		if topic != nil {
			a.AddAlarmAction(awscloudwatchactions.NewSnsAction(topic))
		}
	}
	// alarm pages when m reaches threshold; no data means nothing happened.
	alarm := func(id, desc string, m awscloudwatch.IMetric, threshold float64, periods, datapoints float64) {
		newAlarm(id, desc, &awscloudwatch.AlarmProps{
			Metric:             m,
			Threshold:          jsii.Number(threshold),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			EvaluationPeriods:  jsii.Number(periods),
			DatapointsToAlarm:  jsii.Number(datapoints),
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
	}
	five := awscdk.Duration_Minutes(jsii.Number(5))
	for _, q := range []struct {
		id, what string
		queue    awssqs.Queue
	}{
		{"InterruptionDLQNotEmpty", "interruption messages failed 3 times (see the interruption function's logs for the message IDs)", b.InterruptionDLQ},
		{"WorkDLQNotEmpty", "lifecycle work items failed repeatedly and were parked", b.WorkDLQ},
		{"ProvisionDLQNotEmpty", "provisioner nudges failed repeatedly (the schedule still provisions; see the provisioner's errors)", b.ProvisionDLQ},
		{"DisruptionDLQNotEmpty", "disruption wake-ups were malformed or failed repeatedly (the schedule still disrupts; see the disruption function's errors)", b.DisruptionDLQ},
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
		// Disruption throttles by design (reserved concurrency 1 serializes
		// it) and the webhook by its cap (harmless under failurePolicy
		// Ignore: the schedule still provisions); neither pages.
		if fn != "disruption" && fn != "webhook" && fn != "webhookregistrar" {
			alarm(exportID(fn)+"Throttles", fn+" function throttled (account concurrency exhausted?)", f.MetricThrottles(&awscloudwatch.MetricOptions{
				Statistic: jsii.String("Sum"), Period: five,
			}), 1, 1, 1)
		}
	}
	// The provisioner reports the oldest provisionable pending pod on every
	// pass; three minutes above the threshold pages.
	oldest := awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace:     jsii.String(MetricsNamespace),
		MetricName:    jsii.String(metrics.OldestPendingPodSeconds),
		DimensionsMap: &map[string]*string{dimCluster: jsii.String(b.cfg.ClusterName), dimFunction: jsii.String("provisioner")},
		Statistic:     jsii.String("Maximum"),
		Period:        awscdk.Duration_Minutes(jsii.Number(1)),
	})
	alarm("OldestPendingPod", fmt.Sprintf("a pod has been pending for more than %d s", b.cfg.OldestPendingPodAlarmSeconds),
		oldest, float64(b.cfg.OldestPendingPodAlarmSeconds), 3, 3)
	b.livenessAlarms(newAlarm, alarm)

	b.dashboard()
	b.savedQueries()
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
	m := b.search
	awscloudwatch.NewDashboard(b.scope, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(dnsName("nodewright-", b.cfg.ClusterName)),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				graph("Pending pods", m(metrics.PodsPending, "Maximum", minute), m(metrics.OldestPendingPodSeconds, "Maximum", minute),
					m(metrics.PodsUnschedulable, "Maximum", minute)),
				graph("NodeClaims", m(metrics.NodeClaimsCreated, "Sum", five), m(metrics.NodeClaimsTerminated, "Sum", five),
					m(metrics.NodeClaimsDisrupted, "Sum", five)),
				graph("Cluster cost ($/h)", m(metrics.ClusterCostPerHour, "Maximum", five)),
			},
			{
				graph("NodePool usage and limits", m(metrics.NodePoolUsage, "Maximum", five), m(metrics.NodePoolLimit, "Maximum", five)),
				graph("Nodes by NodePool and capacity type", m(metrics.Nodes, "Maximum", five)),
			},
			{
				graph("Scheduling", m(metrics.SchedulingDuration, "p99", five), m(metrics.ProvisionerBatchSize, "Maximum", five),
					m(metrics.PodsNominated, "Sum", five), m(metrics.WebhookNudges, "Sum", five)),
				graph("Interruption", m(metrics.InterruptionMessages, "Sum", five), m(metrics.InterruptionMessageLatency, "p99", five)),
				graph("Disruption", m(metrics.DisruptionDecisions, "Sum", five), m(metrics.DisruptionActions, "Sum", five),
					m(metrics.DisruptionEligibleNodes, "Maximum", five), m(metrics.EvictionRequests, "Sum", five)),
			},
			{
				graph("Function errors", errs...),
				graph("Function duration p99 (ms)", durations...),
				graph("Queues and cloud errors", qdepth(b.InterruptionQueue, "interruption"), qdepth(b.WorkQueue, "work"), qdepth(b.ProvisionQueue, "provision"),
					qdepth(b.DisruptionQueue, "disruption"),
					qdepth(b.InterruptionDLQ, "interruption DLQ"), qdepth(b.WorkDLQ, "work DLQ"), qdepth(b.ProvisionDLQ, "provision DLQ"),
					qdepth(b.DisruptionDLQ, "disruption DLQ"),
					m(metrics.CloudProviderErrors, "Sum", five)),
			},
		},
	})
}

// livenessAlarms page when nodewright stops doing its job, which the
// error alarms cannot see: a function that no longer runs emits no errors.
func (b *builder) livenessAlarms(newAlarm func(string, string, *awscloudwatch.AlarmProps), alarm func(string, string, awscloudwatch.IMetric, float64, float64, float64)) {
	five := awscdk.Duration_Minutes(jsii.Number(5))
	// Heartbeats (metrics.FunctionRuns, one per successful invocation) of
	// the scheduled functions: missing data is breaching, so a function
	// that stopped running, or stopped succeeding, pages.
	for _, fn := range []string{"provisioner", "lifecycle", "disruption"} {
		newAlarm(exportID(fn)+"Heartbeat", fn+" has not completed a run for 15 minutes (schedule disabled, function broken or failing)", &awscloudwatch.AlarmProps{
			Metric: awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
				Namespace: jsii.String(MetricsNamespace), MetricName: jsii.String(metrics.FunctionRuns),
				DimensionsMap: &map[string]*string{dimCluster: jsii.String(b.cfg.ClusterName), dimFunction: jsii.String(fn)},
				Statistic:     jsii.String("Sum"), Period: five,
			}),
			Threshold:          jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
			EvaluationPeriods:  jsii.Number(3),
			DatapointsToAlarm:  jsii.Number(3),
			TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
		})
	}
	// Spot warnings give two minutes: a message waiting one is already late.
	alarm("InterruptionQueueBacklog", "an interruption message has waited 60 s or more (interruption function not consuming?)",
		b.InterruptionQueue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{
			Statistic: jsii.String("Maximum"), Period: awscdk.Duration_Minutes(jsii.Number(1)),
		}), 60, 1, 1)
	for _, fn := range Functions {
		timeout := b.cfg.Sized(fn).TimeoutSeconds
		limit := 0.8 * float64(timeout) * 1000
		alarm(exportID(fn)+"NearTimeout", fmt.Sprintf("a %s run took 80%% of its %d s timeout", fn, timeout),
			b.Functions[fn].MetricDuration(&awscloudwatch.MetricOptions{Statistic: jsii.String("Maximum"), Period: five}), limit, 1, 1)
	}
	alarm("GarbageCollectionRefused", "instance garbage collection refused to take more than its bounded share of the fleet: is the NodeClaim table the stack's own?",
		b.search(metrics.GCRefused, "Sum", five), 1, 1, 1)
	// A lifecycle failure does not fail its invocation (one bad claim must
	// not fail the pass for the others, nor page as a missing heartbeat),
	// so a claim that keeps failing pages here: in each of three
	// five-minute periods, about fifteen passes; a transient one does not.
	alarm("LifecycleFailing", "lifecycle steps (a claim, a work item or garbage collection) have failed for 15 minutes (see the lifecycle function's ERROR logs)",
		b.search(metrics.LifecycleFailures, "Sum", five), 1, 3, 3)
	alarm("UndecodableNodeClaims", "NodeClaim records could not be decoded and are skipped (see the WARN logs for their keys)",
		b.search(metrics.NodeClaimsUndecodable, "Sum", five), 1, 1, 1)
}
