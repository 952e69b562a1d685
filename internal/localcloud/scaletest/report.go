package scaletest

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"
)

// Report puts a pass's cost in a benchmark's custom metrics, per pass.
func (cost Cost) Report(b *testing.B, passes int) {
	n := float64(passes)
	b.ReportMetric(cost.Wall.Seconds()/n, "s/pass")
	b.ReportMetric(cost.CPU.Seconds()/n, "cpu-s/pass")
	b.ReportMetric(cost.CloudCPU.Seconds()/n, "cloud-cpu-s/pass")
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
		DynamoDBBusy: cost.DynamoDBBusy + o.DynamoDBBusy, SimBusy: cost.SimBusy + o.SimBusy,
		CloudCPU: cost.CloudCPU + o.CloudCPU, CloudCPUByProcess: mapPlus(cost.CloudCPUByProcess, o.CloudCPUByProcess),
		API: apiTraffic{Requests: cost.API.Requests + o.API.Requests, Bytes: cost.API.Bytes + o.API.Bytes,
			ByResource: mapPlus(cost.API.ByResource, o.API.ByResource), RequestsByResource: mapPlus(cost.API.RequestsByResource, o.API.RequestsByResource)}}
	return sum
}

// mapPlus is a+b.
func mapPlus[V float64 | time.Duration](a, b map[string]V) map[string]V {
	out := make(map[string]V, len(a))
	for _, m := range []map[string]V{a, b} {
		for k, v := range m {
			out[k] += v
		}
	}
	return out
}

// String is the cost in one line, with the largest reads.
func (cost Cost) String() string {
	reads := top(cost.API.ByResource, func(k string, v float64) string { return fmt.Sprintf("%s %.1f MiB", k, v/(1<<20)) })
	requests := top(cost.API.RequestsByResource, func(k string, v float64) string { return fmt.Sprintf("%s %.0f", k, v) })
	return fmt.Sprintf("%.2f s, %.2f cpu-s, peak +%.0f MiB (base %.0f MiB), api %d requests [%s] %.1f MiB [%s], "+
		"dynamodb %d (%s in flight), sqs %d, other aws %d (sqs and other %s in flight), local cloud %.2f cpu-s [%s]",
		cost.Wall.Seconds(), cost.CPU.Seconds(), MiB(cost.PeakHeap), MiB(cost.BaseHeap), int(cost.API.Requests), requests,
		cost.API.Bytes/(1<<20), reads, cost.Calls.DynamoDB, cost.DynamoDBBusy.Round(time.Millisecond),
		cost.Calls.SQS, cost.Calls.Other, cost.SimBusy.Round(time.Millisecond), cost.CloudCPU.Seconds(),
		top(cost.CloudCPUByProcess, func(k string, v time.Duration) string { return fmt.Sprintf("%s %.2f", k, v.Seconds()) }))
}

// top is m's four largest entries, largest first, each formatted by f.
func top[V float64 | time.Duration](m map[string]V, f func(k string, v V) string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	out := make([]string, 0, 4)
	for _, k := range keys[:min(len(keys), 4)] {
		out = append(out, f(k, m[k]))
	}
	return strings.Join(out, ", ")
}
