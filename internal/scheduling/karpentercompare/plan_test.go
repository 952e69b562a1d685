package main

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/simulation"
)

var webTier = simulation.Sources{
	Config:   filepath.Join("testdata", "web-tier", "config.yaml"),
	Workload: filepath.Join("testdata", "web-tier", "workload.yaml"),
	Catalog:  "builtin",
	Region:   "us-east-1",
}

func planArgs(src simulation.Sources) []string {
	return []string{"--config", src.Config, "--workload", src.Workload, "--catalog", src.Catalog, "--region", src.Region}
}

func runKarpenterPlan(t *testing.T) (simulation.Output, []byte) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(append([]string{"plan"}, planArgs(webTier)...), &stdout, &stderr); err != nil {
		t.Fatalf("plan: %v\n%s", err, stderr.String())
	}
	var out simulation.Output
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("plan output is not simulate's JSON: %v", err)
	}
	return out, stdout.Bytes()
}

// TestPlanWebTier: Karpenter's plan accounts for every pod exactly once,
// each claim launches its cheapest option, and the total is the sum.
func TestPlanWebTier(t *testing.T) {
	out, _ := runKarpenterPlan(t)
	setup, err := simulation.Load(webTier)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	sum, expected := 0.0, 0.0
	for _, c := range out.NodeClaims {
		checkClaim(t, c)
		sum += c.PricePerHour
		expected += c.ExpectedPricePerHour
		for _, p := range c.Pods {
			seen[p]++
		}
	}
	for _, n := range out.ExistingNodes {
		for _, p := range n.Pods {
			seen[p]++
		}
	}
	for _, u := range out.Unschedulable {
		seen[u.Pod]++
	}
	for _, p := range setup.Input.Pods {
		if k := p.Namespace + "/" + p.Name; seen[k] != 1 {
			t.Errorf("pod %s appears %d times in the plan, want once", k, seen[k])
		}
	}
	if len(seen) != len(setup.Input.Pods) {
		t.Errorf("plan names %d pods, the workload has %d", len(seen), len(setup.Input.Pods))
	}
	if len(out.NodeClaims) == 0 || len(out.Unschedulable) != 0 {
		t.Errorf("want every pod on new claims: %d claims, %d unschedulable", len(out.NodeClaims), len(out.Unschedulable))
	}
	if math.Abs(out.CostPerHour-sum) > 1e-9 {
		t.Errorf("costPerHour %v, claims sum to %v", out.CostPerHour, sum)
	}
	// On-demand claims are expected to launch at their price.
	if math.Abs(out.ExpectedCostPerHour-expected) > 1e-9 || math.Abs(expected-sum) > 1e-9 {
		t.Errorf("expectedCostPerHour %v, claims' expected prices sum to %v, prices to %v", out.ExpectedCostPerHour, expected, sum)
	}
}

func checkClaim(t *testing.T, c simulation.ClaimOutput) {
	t.Helper()
	if c.PricePerHour <= 0 || c.Zone == "" || c.CapacityType != "on-demand" {
		t.Errorf("claim %s: price %v zone %q capacity %q", c.Name, c.PricePerHour, c.Zone, c.CapacityType)
	}
	if len(c.InstanceTypeOptions) == 0 || c.InstanceTypeOptions[0] != c.InstanceType || len(c.InstanceTypeOptions) > 60 {
		t.Errorf("claim %s launches %s, options %v", c.Name, c.InstanceType, c.InstanceTypeOptions)
	}
	if cat := c.Labels["karpenter.k8s.aws/instance-category"]; !strings.Contains("cmr", cat) || cat == "" {
		t.Errorf("claim %s: instance category %q outside the NodePool's c, m, r", c.Name, cat)
	}
	if c.Allocatable["cpu"] == "" || c.Labels["karpenter.sh/nodepool"] != "default" {
		t.Errorf("claim %s: allocatable %v labels %v", c.Name, c.Allocatable, c.Labels)
	}
}

// TestPlanDeterministic: the same input prints the same plan.
func TestPlanDeterministic(t *testing.T) {
	_, a := runKarpenterPlan(t)
	_, b := runKarpenterPlan(t)
	if !bytes.Equal(a, b) {
		t.Error("two runs of plan on the same input printed different plans")
	}
}

func TestCompareWebTier(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(append([]string{"compare"}, planArgs(webTier)...), &stdout, &stderr); err != nil {
		t.Fatalf("compare: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"NODEWRIGHT", "KARPENTER", "$/hour", "relative to Karpenter's"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("compare output lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestDiverseShape: the generated workload has Karpenter's benchmark groups.
func TestDiverseShape(t *testing.T) {
	pods := diversePods(103, 42)
	if len(pods) != 103 {
		t.Fatalf("%d pods, want 103", len(pods))
	}
	spread, affinity, anti := 0, 0, 0
	for _, p := range pods {
		switch {
		case len(p.Spec.TopologySpreadConstraints) > 0:
			spread++
		case p.Spec.Affinity != nil && p.Spec.Affinity.PodAffinity != nil:
			affinity++
		case p.Spec.Affinity != nil && p.Spec.Affinity.PodAntiAffinity != nil:
			anti++
		}
	}
	if spread != 40 || affinity != 20 || anti != 20 {
		t.Errorf("spread %d affinity %d anti-affinity %d, want 40 20 20", spread, affinity, anti)
	}
}
