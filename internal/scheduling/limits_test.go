package scheduling_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// poolNode is an existing node of NodePool "default" with no room for
// pods (pods: 0), so it only counts against the pool's limits.
func poolNode(name string, capacity ...string) *scheduling.ExistingNode {
	c := rl(capacity...)
	alloc := c.DeepCopy()
	alloc["pods"] = rl("pods", "0")["pods"]
	return &scheduling.ExistingNode{Name: name, Initialized: true,
		Labels:      map[string]string{scheduling.LabelNodePool: "default", scheduling.LabelZone: "zone-a", scheduling.LabelHostname: name},
		Allocatable: alloc, Capacity: c}
}

// limitCase solves pods pods of podCPU (default 1) against pool "default"
// limited by limits, with the given existing nodes, over two types:
// s (2 cpu, 8Gi) and l (4 cpu, 16Gi).
type limitCase struct {
	name    string
	limits  []string
	nodes   []*scheduling.ExistingNode
	pods    int
	podCPU  string
	claims  int      // new claims planned
	options []string // options of the first claim, when claims > 0
	reason  string   // substring of the first unschedulable reason, when any
	unsched int
}

func runLimitCases(t *testing.T, cases []limitCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pool := odOnly(&scheduling.NodePool{Name: "default", Limits: rl(c.limits...)})
			cpu := c.podCPU
			if cpu == "" {
				cpu = "1"
			}
			in := input(pods(c.pods, podOpts{cpu: cpu}), pool)
			in.DefaultInstanceTypes = []*scheduling.InstanceType{mkType("s", 2, 8, 20, "amd64", 0.10), mkType("l", 4, 16, 40, "amd64", 0.20)}
			in.Nodes = c.nodes
			plan := mustSolve(t, in)
			if len(plan.NodeClaims) != c.claims || len(plan.Unschedulable) != c.unsched {
				t.Fatalf("want %d claims and %d unschedulable, got %v", c.claims, c.unsched, summary(plan))
			}
			if c.claims > 0 && c.options != nil && !reflect.DeepEqual(plan.NodeClaims[0].InstanceTypeOptions, c.options) {
				t.Errorf("options %v, want %v", plan.NodeClaims[0].InstanceTypeOptions, c.options)
			}
			if c.reason != "" && (len(plan.Unschedulable) == 0 || !strings.Contains(plan.Unschedulable[0].Reason, c.reason)) {
				t.Errorf("reasons %v, want one containing %q", plan.Unschedulable, c.reason)
			}
		})
	}
}

// TestNodesLimitExhaustedByExistingNodes: existing nodes of the pool count
// against limits.nodes; once they reach or pass it, nothing more launches
// (the reported bug: limit 1 with two existing nodes planned a new claim).
func TestNodesLimitExhaustedByExistingNodes(t *testing.T) {
	nodes := func(n int) []*scheduling.ExistingNode {
		var out []*scheduling.ExistingNode
		for i := 0; i < n; i++ {
			out = append(out, poolNode(fmt.Sprintf("old-%d", i), "cpu", "2", "memory", "8Gi"))
		}
		return out
	}
	runLimitCases(t, []limitCase{
		{name: "limit 1, none existing", limits: []string{"nodes", "1"}, pods: 1, claims: 1},
		{name: "limit 1, one existing", limits: []string{"nodes", "1"}, nodes: nodes(1), pods: 1, unsched: 1, reason: "node limit"},
		{name: "limit 1, two existing", limits: []string{"nodes", "1"}, nodes: nodes(2), pods: 1, unsched: 1, reason: "node limit"},
		{name: "limit 0, one existing", limits: []string{"nodes", "0"}, nodes: nodes(1), pods: 1, unsched: 1, reason: "node limit"},
		{name: "limit 2, five existing", limits: []string{"nodes", "2"}, nodes: nodes(5), pods: 3, unsched: 3, reason: "node limit"},
		// 3-cpu pods need an l each: limit 3 minus 1 existing leaves 2 claims.
		{name: "limit 3, one existing", limits: []string{"nodes", "3"}, nodes: nodes(1), pods: 3, podCPU: "3", claims: 2, unsched: 1, reason: "node limit"},
	})
}

// TestCPULimitExhaustedByExistingNodes: limit 8 cpu.
func TestCPULimitExhaustedByExistingNodes(t *testing.T) {
	cpuNode := func(name, cpu string) *scheduling.ExistingNode { return poolNode(name, "cpu", cpu, "memory", "8Gi") }
	runLimitCases(t, []limitCase{
		// 8 - 6 = 2 cpu left: s (2) fits, l (4) does not.
		{name: "2 cpu left", limits: []string{"cpu", "8"}, nodes: []*scheduling.ExistingNode{cpuNode("a", "6")}, pods: 1, claims: 1, options: []string{"s"}},
		// One s reserves the 2 left; the second 1.5-cpu pod cannot share it
		// (2 cpu < 3) and finds nothing left.
		{name: "2 cpu left, two pods", limits: []string{"cpu", "8"}, nodes: []*scheduling.ExistingNode{cpuNode("a", "6")}, pods: 2, podCPU: "1500m", claims: 1, unsched: 1, reason: "limits exhausted"},
		{name: "exactly spent", limits: []string{"cpu", "8"}, nodes: []*scheduling.ExistingNode{cpuNode("a", "4"), cpuNode("b", "4")}, pods: 1, unsched: 1, reason: "limits exhausted"},
		{name: "overspent", limits: []string{"cpu", "8"}, nodes: []*scheduling.ExistingNode{cpuNode("a", "8"), cpuNode("b", "4")}, pods: 1, unsched: 1, reason: "limits exhausted"},
	})
}

// TestMemoryLimitExhaustedByExistingNodes: limit 32Gi.
func TestMemoryLimitExhaustedByExistingNodes(t *testing.T) {
	memNode := func(name, mem string) *scheduling.ExistingNode { return poolNode(name, "cpu", "2", "memory", mem) }
	runLimitCases(t, []limitCase{
		// 32 - 24 = 8Gi left: s (8Gi) fits, l (16Gi) does not.
		{name: "8Gi left", limits: []string{"memory", "32Gi"}, nodes: []*scheduling.ExistingNode{memNode("a", "24Gi")}, pods: 1, claims: 1, options: []string{"s"}},
		{name: "exactly spent", limits: []string{"memory", "32Gi"}, nodes: []*scheduling.ExistingNode{memNode("a", "16Gi"), memNode("b", "16Gi")}, pods: 1, unsched: 1, reason: "limits exhausted"},
		{name: "overspent", limits: []string{"memory", "32Gi"}, nodes: []*scheduling.ExistingNode{memNode("a", "40Gi")}, pods: 1, unsched: 1, reason: "limits exhausted"},
	})
}

// TestExtendedLimitExhaustedByExistingNodes: a GPU limit used up exactly
// still lets CPU-only types launch (they use none of it, as in Karpenter);
// a GPU limit exceeded stops the pool altogether (Karpenter's ExceededBy).
func TestExtendedLimitExhaustedByExistingNodes(t *testing.T) {
	gpuNode := func(name, gpus string) *scheduling.ExistingNode {
		return poolNode(name, "cpu", "2", "memory", "8Gi", "nvidia.com/gpu", gpus)
	}
	runLimitCases(t, []limitCase{
		{name: "exactly spent", limits: []string{"nvidia.com/gpu", "1"}, nodes: []*scheduling.ExistingNode{gpuNode("a", "1")}, pods: 1, claims: 1},
		{name: "overspent", limits: []string{"nvidia.com/gpu", "1"}, nodes: []*scheduling.ExistingNode{gpuNode("a", "2")}, pods: 1, unsched: 1, reason: "limits exhausted"},
	})
}
