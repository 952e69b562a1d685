package simulation

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/catalog"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// htmlFixture is a plan of two NodePools, an existing node and an
// unschedulable pod whose name would be markup if it were not escaped.
func htmlFixture() Output {
	return Output{
		NodeClaims: []ClaimOutput{
			htmlClaim("default-abc", "default", "m5.large", "on-demand", "us-east-1a", 0.096,
				map[string]string{"cpu": "1930m", "memory": "7Gi"}, map[string]string{"cpu": "1500m", "memory": "3584Mi"}, "a", "b"),
			htmlClaim("batch-def", "batch", "c6g.xlarge", "spot", "us-east-1b", 0.0512,
				map[string]string{"cpu": "3920m", "memory": "6525Mi"}, map[string]string{"cpu": "3920m"}, "c"),
		},
		ExistingNodes:       []ExistingNodeOutput{{Name: "ip-10-0-0-1", Pods: []string{"d"}}},
		Unschedulable:       []UnschedulableOutput{{Pod: "default/<script>alert(1)</script>", Reason: `NodePool "gpu": no instance type has "nvidia.com/gpu" & 8 CPUs`}},
		CostPerHour:         0.1472,
		LowerBoundPerHour:   0.12,
		CostOverLowerBound:  0.1472 / 0.12,
		ExpectedCostPerHour: 0.16,
	}
}

// htmlClaim sets the claim's identity field by field, whichever struct of
// ClaimOutput's the fields live in.
func htmlClaim(name, pool, typ, capacityType, zone string, price float64, allocatable, requests map[string]string, pods ...string) ClaimOutput {
	c := ClaimOutput{Allocatable: allocatable, Requests: requests, Pods: pods}
	c.Name, c.NodePool, c.InstanceType, c.CapacityType, c.Zone, c.PricePerHour = name, pool, typ, capacityType, zone, price
	return c
}

func renderFixture(t *testing.T) []byte {
	t.Helper()
	var b strings.Builder
	if err := WriteHTML(&b, htmlFixture(), &catalog.Catalog{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

func TestWriteHTML(t *testing.T) {
	got := renderFixture(t)
	page := string(got)
	for _, want := range []string{
		"<!DOCTYPE html>", "nodewright simulate (us-east-1)",
		`<div class="node" data-nodepool="default">`, `<div class="node" data-nodepool="batch">`,
		// Pools are coloured in name order: batch first.
		`<i class="swatch" style="background: #1f77b4"></i>batch (1)`, `<i class="swatch" style="background: #ff7f0e"></i>default (1)`,
		// 1.5 of 1.93 cores, 3.5 of 7 GiB; batch's memory request is zero.
		`style="width: 78%; background: #ff7f0e"`, "1.50 / 1.93 cores", `style="width: 50%; background: #ff7f0e"`, "3.5Gi / 7.0Gi",
		`style="width: 100%; background: #1f77b4"`, `style="width: 0%; background: #1f77b4"`,
		"m5.large · us-east-1a · on-demand · $0.0960/h", "c6g.xlarge · us-east-1b · spot · $0.0512/h",
		"$0.1472/h", "$107.46/month", "$0.1200/h</b>plan costs 1.23x the bound", "$0.1600/h",
		"default/&lt;script&gt;alert(1)&lt;/script&gt;", "no instance type has &#34;nvidia.com/gpu&#34; &amp; 8 CPUs",
		"<td>ip-10-0-0-1</td><td>1</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Self-contained: no scripts, no external assets, one file.
	for _, banned := range []string{"<script", "<link", "src=", "http://", "https://", "@import", "url("} {
		if strings.Contains(page, banned) {
			t.Errorf("page contains %q", banned)
		}
	}
	if n := strings.Count(page, `class="node"`); n != 2 {
		t.Errorf("%d node bars, want 2", n)
	}
	golden := filepath.Join("testdata", "plan.html.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/simulation -run TestWriteHTML -update)", err)
	}
	if string(got) != string(want) {
		t.Errorf("page differs from %s (run with -update and review the diff):\n%s", golden, got)
	}
}

// An empty plan (nothing to buy, nothing unschedulable) still renders.
func TestWriteHTMLEmptyPlan(t *testing.T) {
	var b strings.Builder
	empty := Output{NodeClaims: []ClaimOutput{}, ExistingNodes: []ExistingNodeOutput{}, Unschedulable: []UnschedulableOutput{}}
	if err := WriteHTML(&b, empty, &catalog.Catalog{Region: "us-west-2"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"new nodes<b>0</b>", "None: every pod fits", "<h2>Unschedulable pods</h2>\n<p>None.</p>"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("empty plan lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "lower bound<b>") || strings.Contains(b.String(), `class="legend"`) {
		t.Errorf("empty plan shows a bound or a legend:\n%s", b.String())
	}
}
