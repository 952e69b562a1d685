package costmodel

import (
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestMonthly(t *testing.T) {
	loads := []FunctionLoad{
		// 43,800 ticks of 0.5 s at 2 GiB: 43,800 GB-s.
		{Name: "provisioner", MemoryMB: 2048, Invocations: 43800, DurationSeconds: 0.5, RRU: 10, WRU: 2, SQSRequests: 0, LogBytes: 1 << 10},
		// 1M webhook calls of 10 ms at 256 MiB: 2,500 GB-s.
		{Name: "webhook", MemoryMB: 256, Invocations: 1e6, DurationSeconds: 0.01, SQSRequests: 0.1, LogBytes: 512},
	}
	b := Monthly(loads, Fixed{SQSPolls: 1e6, CustomMetrics: 10, Alarms: 13, Dashboards: 1}, USEast1)
	if !near(b.GBSeconds, 43800+2500) {
		t.Errorf("GB-s %v", b.GBSeconds)
	}
	if !near(b.LambdaCompute, (43800+2500)*0.0000133334) || !near(b.LambdaRequests, 1043800*0.2/1e6) {
		t.Errorf("lambda %v %v", b.LambdaCompute, b.LambdaRequests)
	}
	if !near(b.DynamoDB, 43800*(10*0.125+2*0.625)/1e6) {
		t.Errorf("dynamodb %v", b.DynamoDB)
	}
	if !near(b.SQS, (1e5+1e6)*0.4/1e6) {
		t.Errorf("sqs %v", b.SQS)
	}
	if !near(b.Logs, (43800*1024+1e6*512)/float64(1<<30)*0.5) {
		t.Errorf("logs %v", b.Logs)
	}
	if !near(b.Metrics, 10*0.3+13*0.1+3) {
		t.Errorf("metrics %v", b.Metrics)
	}
	sum := b.LambdaCompute + b.LambdaRequests + b.DynamoDB + b.SQS + b.EventBridge + b.Logs + b.Metrics
	if !near(b.Total, sum) {
		t.Errorf("total %v != %v", b.Total, sum)
	}
}

func TestAlternatives(t *testing.T) {
	k, err := Karpenter(USEast1, "m5.large")
	if err != nil || !near(k, 2*(0.096*730+1.6)) {
		t.Errorf("karpenter %v %v", k, err)
	}
	a, err := AutoMode(USEast1, 100, "m5.xlarge")
	if err != nil || !near(a, 100*0.192*0.12*730) {
		t.Errorf("auto mode %v %v", a, err)
	}
	if _, err := AutoMode(USEast1, 1, "x9.huge"); err == nil {
		t.Error("unknown type priced")
	}
	if _, err := Karpenter(USEast1, "x9.huge"); err == nil {
		t.Error("unknown type priced")
	}
}

func TestWriteMarkdown(t *testing.T) {
	var sb strings.Builder
	WriteMarkdown(&sb, []Row{{Nodes: 100, Nodewright: Breakdown{Total: 12.5}, Karpenter: 143.36, AutoMode: 1681.92}, {Nodes: 10, Nodewright: Breakdown{Total: 0.5}}},
		"m5.large", "m5.xlarge")
	out := sb.String()
	if !strings.Contains(out, "| 10 nodes | $0.500 |") || !strings.Contains(out, "| 100 nodes | $12.50 | $143 | $1682 |") ||
		strings.Index(out, "| 10 nodes") > strings.Index(out, "| 100 nodes") {
		t.Errorf("table:\n%s", out)
	}
}

func TestLinearFit(t *testing.T) {
	ms := []*measurement{{nodes: 10}, {nodes: 100}}
	f := linear(ms, func(m *measurement) float64 { return 0.1 + 0.002*float64(m.nodes) })
	if !near(f.at(1000), 0.1+2) {
		t.Errorf("fit at 1000: %v", f.at(1000))
	}
}
