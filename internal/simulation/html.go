package simulation

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"sort"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/catalog"
)

//go:embed plan.html.tmpl
var planHTML string

// planTemplate renders `simulate -o html`. html/template escapes every
// name taken from the input (pods, pools, reasons).
var planTemplate = template.Must(template.New("plan").Parse(planHTML))

// poolColours are the NodePools' bar colours, by the pools' sorted order.
// They are constants, hence safe as template.CSS.
var poolColours = []template.CSS{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

// htmlPlan is what the template shows.
type htmlPlan struct {
	Region        string
	Pools         []htmlPool
	Nodes         []htmlNode
	ExistingNodes []ExistingNodeOutput
	Unschedulable []UnschedulableOutput
	PodsOnNew     int
	PodsExisting  int
	CostPerHour   float64
	CostPerMonth  float64
	// LowerBound is set when the plan buys nodes and has a bound.
	LowerBound          float64
	CostOverLowerBound  float64
	ExpectedCostPerHour float64
}

type htmlPool struct {
	Name   string
	Colour template.CSS
	Nodes  int
}

type htmlNode struct {
	ClaimOutput
	Colour      template.CSS
	CPU, Memory htmlBar
}

// htmlBar is one resource of a node: requested against allocatable.
type htmlBar struct {
	Used, Allocatable string
	Percent           int
}

// WriteHTML writes the plan as a self-contained HTML page (inline CSS, no
// scripts, no external assets): one bar per new node with its CPU and memory
// requests against allocatable, coloured by NodePool, its type, zone,
// capacity type and price; the unschedulable pods with their reasons; the
// totals and the lower bound.
func WriteHTML(w io.Writer, out Output, cat *catalog.Catalog) error {
	page := htmlPlan{
		Region: cat.Region, ExistingNodes: out.ExistingNodes, Unschedulable: out.Unschedulable,
		CostPerHour: out.CostPerHour, CostPerMonth: out.CostPerHour * 730,
	}
	colours := map[string]template.CSS{}
	for _, c := range out.NodeClaims {
		colours[c.NodePool] = ""
	}
	pools := make([]string, 0, len(colours))
	for p := range colours {
		pools = append(pools, p)
	}
	sort.Strings(pools)
	for i, p := range pools {
		colours[p] = poolColours[i%len(poolColours)]
		page.Pools = append(page.Pools, htmlPool{Name: p, Colour: colours[p]})
	}
	for _, c := range out.NodeClaims {
		page.Nodes = append(page.Nodes, htmlNode{
			ClaimOutput: c, Colour: colours[c.NodePool],
			CPU:    bar(c.Requests["cpu"], c.Allocatable["cpu"], cores),
			Memory: bar(c.Requests["memory"], c.Allocatable["memory"], gibibytes),
		})
		page.PodsOnNew += len(c.Pods)
		page.Pools[sort.SearchStrings(pools, c.NodePool)].Nodes++
	}
	for _, n := range out.ExistingNodes {
		page.PodsExisting += len(n.Pods)
	}
	if len(out.NodeClaims) > 0 && out.LowerBoundPerHour > 0 {
		page.LowerBound, page.CostOverLowerBound = out.LowerBoundPerHour, out.CostOverLowerBound
	}
	if out.ExpectedCostPerHour > out.CostPerHour+1e-9 {
		page.ExpectedCostPerHour = out.ExpectedCostPerHour
	}
	if err := planTemplate.Execute(w, page); err != nil {
		return fmt.Errorf("render the plan as html: %w", err)
	}
	return nil
}

// bar compares two quantities as printed by Quantities ("" is zero).
func bar(used, allocatable string, format func(float64) string) htmlBar {
	u, a := parseQuantity(used), parseQuantity(allocatable)
	b := htmlBar{Used: format(u), Allocatable: format(a)}
	if a > 0 {
		b.Percent = min(100, max(0, int(u/a*100+0.5)))
	}
	return b
}

func parseQuantity(s string) float64 {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0
	}
	return q.AsApproximateFloat64()
}

func cores(v float64) string     { return fmt.Sprintf("%.2f", v) }
func gibibytes(v float64) string { return fmt.Sprintf("%.1fGi", v/(1<<30)) }
