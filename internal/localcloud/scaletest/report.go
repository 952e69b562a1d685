package scaletest

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// Report puts a pass's cost in a benchmark's custom metrics, per pass.
func (cost Cost) Report(b *testing.B, passes int) {
	n := float64(passes)
	b.ReportMetric(cost.Wall.Seconds()/n, "s/pass")
	b.ReportMetric(cost.CPU.Seconds()/n, "cpu-s/pass")
	b.ReportMetric(MiB(cost.PeakHeap), "MiB-peak")
	b.ReportMetric(cost.API.Requests/n, "apiserver-requests/pass")
	b.ReportMetric(cost.API.Bytes/n, "apiserver-bytes/pass")
	b.ReportMetric(float64(cost.Calls.DynamoDB)/n, "dynamodb-calls/pass")
	b.ReportMetric(float64(cost.Calls.SQS)/n, "sqs-calls/pass")
}

// Add sums two costs (the peak heap is the larger).
func (cost Cost) Add(o Cost) Cost {
	sum := Cost{Wall: cost.Wall + o.Wall, CPU: cost.CPU + o.CPU, PeakHeap: max(cost.PeakHeap, o.PeakHeap),
		BaseHeap: max(cost.BaseHeap, o.BaseHeap), Calls: cost.Calls.plus(o.Calls),
		API: apiTraffic{Requests: cost.API.Requests + o.API.Requests, Bytes: cost.API.Bytes + o.API.Bytes, ByResource: map[string]float64{}}}
	for _, m := range []map[string]float64{cost.API.ByResource, o.API.ByResource} {
		for k, v := range m {
			sum.API.ByResource[k] += v
		}
	}
	return sum
}

// String is the cost in one line, with the largest reads.
func (cost Cost) String() string {
	type kv struct {
		k string
		v float64
	}
	var top []kv
	for k, v := range cost.API.ByResource {
		top = append(top, kv{k, v})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].v > top[j].v })
	var reads []string
	for _, e := range top[:min(len(top), 4)] {
		reads = append(reads, fmt.Sprintf("%s %.1f MiB", e.k, e.v/(1<<20)))
	}
	return fmt.Sprintf("%.2f s, %.2f cpu-s, peak +%.0f MiB (base %.0f MiB), api %d requests %.1f MiB [%s], dynamodb %d, sqs %d, other aws %d",
		cost.Wall.Seconds(), cost.CPU.Seconds(), MiB(cost.PeakHeap), MiB(cost.BaseHeap), int(cost.API.Requests), cost.API.Bytes/(1<<20),
		strings.Join(reads, ", "), cost.Calls.DynamoDB, cost.Calls.SQS, cost.Calls.Other)
}
