package simulation

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// The JSON shape of `simulate -o json`, kept separate from the solver's
// types so the documented shape holds whatever the solver adds.
type Output struct {
	NodeClaims    []ClaimOutput         `json:"nodeClaims"`
	ExistingNodes []ExistingNodeOutput  `json:"existingNodes"`
	Unschedulable []UnschedulableOutput `json:"unschedulable"`
	CostPerHour   float64               `json:"costPerHour"`
	// LowerBoundPerHour is the cheapest fractional cover of the new
	// claims' pods; CostOverLowerBound is costPerHour over it.
	LowerBoundPerHour  float64 `json:"lowerBoundPerHour"`
	CostOverLowerBound float64 `json:"costOverLowerBound"`
	// ExpectedCostPerHour sums the claims' expected launch prices.
	ExpectedCostPerHour float64 `json:"expectedCostPerHour"`
	// CurrentFleet is what the cluster's nodes cost now, when the plan is
	// a from-scratch plan for their pods (`simulate --repack`).
	CurrentFleet *FleetOutput `json:"currentFleet,omitempty"`
}

type ClaimOutput struct {
	scheduling.ClaimSummary `json:",inline"`
	PriceSource             string              `json:"priceSource,omitempty"`
	InstanceTypeOptions     []string            `json:"instanceTypeOptions"`
	Labels                  map[string]string   `json:"labels"`
	Taints                  []TaintOutput       `json:"taints"`
	StartupTaints           []TaintOutput       `json:"startupTaints,omitempty"`
	Allocatable             map[string]string   `json:"allocatable"`
	Requests                map[string]string   `json:"requests,omitempty"`
	Requirements            []RequirementOutput `json:"requirements,omitempty"`
	Pods                    []string            `json:"pods"`
}

type TaintOutput struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect"`
}

type RequirementOutput struct {
	Key       string   `json:"key"`
	Operator  string   `json:"operator"`
	Values    []string `json:"values,omitempty"`
	MinValues int      `json:"minValues,omitempty"`
}

type ExistingNodeOutput struct {
	Name string   `json:"name"`
	Pods []string `json:"pods"`
}

type UnschedulableOutput struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

func NewOutput(cat *catalog.Catalog, plan *scheduling.Plan) Output {
	out := Output{
		NodeClaims:    []ClaimOutput{},
		ExistingNodes: []ExistingNodeOutput{},
		Unschedulable: []UnschedulableOutput{},
	}
	for _, c := range plan.NodeClaims {
		co := ClaimOutput{
			ClaimSummary:        c.ClaimSummary,
			InstanceTypeOptions: nonNil(c.InstanceTypeOptions),
			Labels:              claimLabels(cat, c),
			Taints:              Taints(c.Taints),
			StartupTaints:       Taints(c.StartupTaints),
			Allocatable:         Quantities(c.Allocatable),
			Requests:            NonZero(Quantities(c.Requests)),
			Pods:                nonNil(c.Pods),
		}
		if len(co.StartupTaints) == 0 {
			co.StartupTaints = nil
		}
		if len(co.Requests) == 0 {
			co.Requests = nil
		}
		if it, ok := cat.Get(c.InstanceType); ok {
			if o, ok := it.Offering(c.Zone, c.CapacityType); ok {
				co.PriceSource = o.PriceSource
			}
		}
		for _, r := range c.Requirements {
			co.Requirements = append(co.Requirements, RequirementOutput{Key: r.Key, Operator: string(r.Operator), Values: r.Values, MinValues: c.MinValues[r.Key]})
		}
		out.NodeClaims = append(out.NodeClaims, co)
		out.CostPerHour += c.PricePerHour
	}
	out.LowerBoundPerHour = plan.LowerBoundPerHour
	out.ExpectedCostPerHour = plan.ExpectedCostPerHour
	out.CostOverLowerBound = plan.CostOverLowerBound()
	for _, n := range plan.ExistingNodes {
		out.ExistingNodes = append(out.ExistingNodes, ExistingNodeOutput{Name: n.Name, Pods: nonNil(n.Pods)})
	}
	for _, u := range plan.Unschedulable {
		out.Unschedulable = append(out.Unschedulable, UnschedulableOutput{Pod: u.Pod, Reason: u.Reason})
	}
	return out
}

// NonZero drops zero quantities (a claim's requests list every resource the
// solver tracks, most of them unused).
func NonZero(m map[string]string) map[string]string {
	for k, v := range m {
		if v == "0" {
			delete(m, k)
		}
	}
	return m
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Taints is the output shape of taints.
func Taints(ts []corev1.Taint) []TaintOutput {
	out := make([]TaintOutput, 0, len(ts))
	for _, t := range ts {
		out = append(out, TaintOutput{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	return out
}

// Quantities prints a resource list as simulate does.
func Quantities(l corev1.ResourceList) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

func WriteTable(w io.Writer, out Output, cat *catalog.Catalog) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	placedNew, placedExisting := 0, 0
	if len(out.NodeClaims) > 0 {
		fmt.Fprintln(tw, "NODECLAIM\tNODEPOOL\tINSTANCE TYPE\tCAPACITY\tZONE\t$/HOUR\tPRICE SOURCE\tPODS\tCPU\tMEMORY\tOPTIONS")
		for _, c := range out.NodeClaims {
			placedNew += len(c.Pods)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.4f\t%s\t%d\t%s\t%s\t%s\n", c.Name, c.NodePool, c.InstanceType, c.CapacityType,
				c.Zone, c.PricePerHour, c.PriceSource, len(c.Pods), c.Allocatable["cpu"], c.Allocatable["memory"], summarizeOptions(c.InstanceTypeOptions))
		}
		fmt.Fprintln(tw)
	}
	if len(out.ExistingNodes) > 0 {
		fmt.Fprintln(tw, "EXISTING NODE\tNEW PODS")
		for _, n := range out.ExistingNodes {
			placedExisting += len(n.Pods)
			fmt.Fprintf(tw, "%s\t%s\n", n.Name, summarize(n.Pods, 6))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(out.Unschedulable) > 0 {
		fmt.Fprintln(w, "UNSCHEDULABLE POD  REASON")
		for _, u := range out.Unschedulable {
			fmt.Fprintf(w, "%s  %s\n", u.Pod, u.Reason)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d new node(s), $%.4f/hour ($%.2f/month) in %s; %d pod(s) on new nodes, %d on existing nodes, %d unschedulable\n",
		len(out.NodeClaims), out.CostPerHour, out.CostPerHour*730, cat.Region, placedNew, placedExisting, len(out.Unschedulable))
	if len(out.NodeClaims) > 0 {
		fmt.Fprintf(w, "lower bound $%.4f/hour: the plan costs %.2fx the lower bound (no plan putting these pods on new nodes costs less)\n",
			out.LowerBoundPerHour, out.CostOverLowerBound)
	}
	if out.ExpectedCostPerHour > out.CostPerHour+1e-9 {
		fmt.Fprintf(w, "expected $%.4f/hour: spot claims may launch as any of their cheapest options (CreateFleet's price-capacity-optimized choice), averaged over the cheapest few\n",
			out.ExpectedCostPerHour)
	}
	if n := derivedPrices(out); n > 0 {
		fmt.Fprintf(w, "note: %d claim(s) are priced from a derived spot price (%s): the catalog has no spot price feed, so their cost is an estimate\n",
			n, catalog.PriceSourceDerivedSpot)
	}
	if out.CurrentFleet != nil {
		fmt.Fprintln(w)
		return writeFleet(w, out.CurrentFleet, out.CostPerHour, len(out.Unschedulable))
	}
	return nil
}

// derivedPrices counts the claims whose price is not a published one.
func derivedPrices(out Output) int {
	n := 0
	for _, c := range out.NodeClaims {
		if c.PriceSource == catalog.PriceSourceDerivedSpot {
			n++
		}
	}
	return n
}

func summarizeOptions(opts []string) string {
	if len(opts) <= 3 {
		return strings.Join(opts, ",")
	}
	return fmt.Sprintf("%s,... (%d)", strings.Join(opts[:3], ","), len(opts))
}

func summarize(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ",")
	}
	return fmt.Sprintf("%s,... (%d)", strings.Join(items[:n], ","), len(items))
}
