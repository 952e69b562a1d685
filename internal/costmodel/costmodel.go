// Package costmodel computes what nodewright itself costs per month — Lambda
// GB-seconds and requests, DynamoDB on-demand request units, SQS requests,
// EventBridge, CloudWatch Logs ingestion and EMF custom metrics — from
// per-invocation figures measured on the local cloud (measure_test.go drives
// the real function handlers there), and sets it beside the two alternatives
// a user compares it with: Karpenter's in-cluster controller and EKS Auto
// Mode's per-node management fee.
//
// The model is pure arithmetic over stated prices and assumptions, so every
// figure in the infra/README.md table can be recomputed from the inputs printed with it.
package costmodel

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// HoursPerMonth is AWS's billing month (365 × 24 / 12).
const HoursPerMonth = 730

// Prices are us-east-1 list prices (USD), as published on the AWS pricing
// pages in 2025; other regions differ by a few percent.
type Prices struct {
	// Lambda arm64: $0.0000133334 per GB-second (first tier), $0.20 per
	// million requests (aws.amazon.com/lambda/pricing).
	LambdaArmGBSecond float64
	LambdaRequest     float64
	// DynamoDB on-demand since the November 2024 price cut: $0.625 per
	// million write request units, $0.125 per million read request units
	// (aws.amazon.com/dynamodb/pricing/on-demand).
	DynamoWRU float64
	DynamoRRU float64
	// SQS standard queues: $0.40 per million requests (64 KB chunks).
	SQSRequest float64
	// EventBridge: events from AWS services (EC2 state changes, spot
	// interruption warnings, Health) and scheduled rules are free; custom
	// events $1.00 per million. nodewright publishes none.
	EventBridgeCustomEvent float64
	// CloudWatch Logs ingestion (standard class) $0.50 per GB.
	LogsIngestGB float64
	// CloudWatch custom metrics (EMF-extracted metrics are custom metrics)
	// $0.30 per metric-month for the first 10,000; alarms $0.10 each
	// (standard resolution); dashboards $3.00 each beyond the first three.
	CustomMetricMonth float64
	AlarmMonth        float64
	DashboardMonth    float64
	// EC2 on-demand per hour, for the alternatives.
	EC2 map[string]float64
}

// USEast1 are the prices the infra/README.md table uses.
var USEast1 = Prices{
	LambdaArmGBSecond: 0.0000133334, LambdaRequest: 0.20 / 1e6,
	DynamoWRU: 0.625 / 1e6, DynamoRRU: 0.125 / 1e6,
	SQSRequest: 0.40 / 1e6, EventBridgeCustomEvent: 1.00 / 1e6,
	LogsIngestGB: 0.50, CustomMetricMonth: 0.30, AlarmMonth: 0.10, DashboardMonth: 3.00,
	EC2: map[string]float64{"t3.medium": 0.0416, "m5.large": 0.096, "m5.xlarge": 0.192},
}

// FunctionLoad is one function's monthly workload.
type FunctionLoad struct {
	Name     string
	MemoryMB int
	// Invocations per month and their mean billed duration.
	Invocations     float64
	DurationSeconds float64
	// Per invocation: DynamoDB request units, SQS requests the function
	// itself makes (sends, deletes; the event source's polling is in
	// Fixed), and log bytes (its JSON and EMF lines plus Lambda's
	// START/END/REPORT lines).
	RRU, WRU    float64
	SQSRequests float64
	LogBytes    float64
}

// Fixed are costs that do not scale with invocations.
type Fixed struct {
	// SQSPolls: Lambda's event source mappings long-poll each queue
	// (about five pollers, 20 s waits) whether or not messages arrive.
	SQSPolls      float64
	CustomMetrics int
	Alarms        int
	Dashboards    int
}

// Breakdown is a month's bill by service (USD).
type Breakdown struct {
	LambdaCompute  float64
	LambdaRequests float64
	DynamoDB       float64
	SQS            float64
	EventBridge    float64
	Logs           float64
	Metrics        float64 // custom metrics, alarms, dashboard
	Total          float64
	GBSeconds      float64
	Invocations    float64
}

// Monthly prices loads and fixed costs.
func Monthly(loads []FunctionLoad, fixed Fixed, p Prices) Breakdown {
	var b Breakdown
	var logBytes, sqs float64
	for _, l := range loads {
		gbs := l.Invocations * l.DurationSeconds * float64(l.MemoryMB) / 1024
		b.GBSeconds += gbs
		b.Invocations += l.Invocations
		b.DynamoDB += l.Invocations * (l.RRU*p.DynamoRRU + l.WRU*p.DynamoWRU)
		sqs += l.Invocations * l.SQSRequests
		logBytes += l.Invocations * l.LogBytes
	}
	b.LambdaCompute = b.GBSeconds * p.LambdaArmGBSecond
	b.LambdaRequests = b.Invocations * p.LambdaRequest
	b.SQS = (sqs + fixed.SQSPolls) * p.SQSRequest
	b.Logs = logBytes / (1 << 30) * p.LogsIngestGB
	dashboards := math.Max(0, float64(fixed.Dashboards))
	b.Metrics = float64(fixed.CustomMetrics)*p.CustomMetricMonth + float64(fixed.Alarms)*p.AlarmMonth + dashboards*p.DashboardMonth
	b.Total = b.LambdaCompute + b.LambdaRequests + b.DynamoDB + b.SQS + b.EventBridge + b.Logs + b.Metrics
	return b
}

// SQSPollsPerQueue is the monthly ReceiveMessage count of one idle queue
// under a Lambda event source mapping: 5 pollers × one 20 s long poll each.
const SQSPollsPerQueue = 5 * 3 * 60 * HoursPerMonth

// Karpenter is the monthly cost of running Karpenter's controller in the
// cluster: its 2 replicas on a dedicated 2-node managed node group of
// instanceType (Karpenter cannot run on nodes it manages), each node with a
// 20 GiB gp3 root volume ($0.08/GiB-month). The controller's own usage is
// free; the nodes hosting it are not.
func Karpenter(p Prices, instanceType string) (float64, error) {
	h, ok := p.EC2[instanceType]
	if !ok {
		return 0, fmt.Errorf("no price for %s", instanceType)
	}
	return 2 * (h*HoursPerMonth + 20*0.08), nil
}

// AutoModeFeeShare is EKS Auto Mode's management fee as a share of the
// instance's on-demand price: the per-instance fees on the EKS pricing page
// are about 12% of on-demand (m5.large $0.01152/h vs $0.096/h), charged on
// top of EC2, for spot instances too.
const AutoModeFeeShare = 0.12

// AutoMode is the monthly management fee for nodes instances of
// instanceType.
func AutoMode(p Prices, nodes int, instanceType string) (float64, error) {
	h, ok := p.EC2[instanceType]
	if !ok {
		return 0, fmt.Errorf("no price for %s", instanceType)
	}
	return float64(nodes) * h * AutoModeFeeShare * HoursPerMonth, nil
}

// Row is one cluster size of the infra/README.md table.
type Row struct {
	Nodes      int
	Nodewright Breakdown
	Karpenter  float64
	AutoMode   float64
}

// WriteMarkdown prints the comparison table and the per-service breakdown.
func WriteMarkdown(w io.Writer, rows []Row, karpenterType, nodeType string) {
	sort.Slice(rows, func(i, j int) bool { return rows[i].Nodes < rows[j].Nodes })
	fmt.Fprintf(w, "| Cluster | nodewright / month | Karpenter controller (2 × %s MNG) | EKS Auto Mode fee (%s, 12%%) |\n", karpenterType, nodeType)
	fmt.Fprintln(w, "|---:|---:|---:|---:|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %d nodes | %s | %s | %s |\n", r.Nodes, money(r.Nodewright.Total), money(r.Karpenter), money(r.AutoMode))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| nodewright breakdown | "+joinNodes(rows)+" |")
	fmt.Fprintln(w, "|---"+strings.Repeat("|---:", len(rows))+"|")
	line := func(name string, f func(Breakdown) string) {
		cells := make([]string, len(rows))
		for i, r := range rows {
			cells[i] = f(r.Nodewright)
		}
		fmt.Fprintf(w, "| %s | %s |\n", name, strings.Join(cells, " | "))
	}
	line("Lambda invocations", func(b Breakdown) string { return fmt.Sprintf("%.0f", b.Invocations) })
	line("Lambda GB-seconds", func(b Breakdown) string { return fmt.Sprintf("%.0f", b.GBSeconds) })
	line("Lambda compute (arm64)", func(b Breakdown) string { return money(b.LambdaCompute) })
	line("Lambda requests", func(b Breakdown) string { return money(b.LambdaRequests) })
	line("DynamoDB on-demand", func(b Breakdown) string { return money(b.DynamoDB) })
	line("SQS", func(b Breakdown) string { return money(b.SQS) })
	line("EventBridge", func(b Breakdown) string { return money(b.EventBridge) })
	line("CloudWatch Logs ingestion", func(b Breakdown) string { return money(b.Logs) })
	line("EMF custom metrics, alarms, dashboard", func(b Breakdown) string { return money(b.Metrics) })
	line("**Total**", func(b Breakdown) string { return "**" + money(b.Total) + "**" })
}

func joinNodes(rows []Row) string {
	s := make([]string, len(rows))
	for i, r := range rows {
		s[i] = fmt.Sprintf("%d nodes", r.Nodes)
	}
	return strings.Join(s, " | ")
}

func money(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("$%.0f", v)
	case v >= 1:
		return fmt.Sprintf("$%.2f", v)
	default:
		return fmt.Sprintf("$%.3f", v)
	}
}
