package simulation

import (
	"fmt"
	"io"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/catalog"
)

// FleetOutput is what a cluster's nodes cost now, next to a from-scratch
// plan for their pods (`simulate --kubeconfig --repack`).
type FleetOutput struct {
	Nodes       []FleetNodeOutput `json:"nodes"`
	CostPerHour float64           `json:"costPerHour"`
	// PendingPods are the pods the current nodes leave pending; the
	// plan places them too.
	PendingPods int `json:"pendingPods"`
	// Unpriced names the nodes whose instance type the catalog does not
	// hold (or that carry no instance-type label); they count $0.
	Unpriced []string `json:"unpriced,omitempty"`
}

type FleetNodeOutput struct {
	Name         string  `json:"name"`
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	Zone         string  `json:"zone"`
	PricePerHour float64 `json:"pricePerHour"`
	Pods         int     `json:"pods"`
}

// eksCapacityTypeLabel is how EKS managed node groups mark spot nodes
// (ON_DEMAND, SPOT, CAPACITY_BLOCK); Karpenter's nodes carry karpenter.sh/capacity-type.
const eksCapacityTypeLabel = "eks.amazonaws.com/capacityType"

// Fleet prices nodes at their offering in the catalog: instance type, zone
// and capacity type from their well-known labels (on-demand unless a label
// says spot). pods counts each node's pods, by node name.
func Fleet(cat *catalog.Catalog, nodes []*corev1.Node, pods map[string]int) *FleetOutput {
	f := &FleetOutput{Nodes: []FleetNodeOutput{}}
	for _, n := range nodes {
		fn := FleetNodeOutput{
			Name: n.Name, InstanceType: n.Labels[catalog.LabelInstanceType], CapacityType: nodeCapacityType(n.Labels),
			Zone: n.Labels[catalog.LabelTopologyZone], Pods: pods[n.Name],
		}
		price, ok := cat.NodePrice(fn.InstanceType, fn.Zone, fn.CapacityType)
		if !ok {
			f.Unpriced = append(f.Unpriced, n.Name)
		}
		fn.PricePerHour = price
		f.CostPerHour += price
		f.Nodes = append(f.Nodes, fn)
	}
	return f
}

func nodeCapacityType(labels map[string]string) string {
	if ct := labels[catalog.LabelCapacityType]; ct != "" {
		return ct
	}
	if labels[eksCapacityTypeLabel] == "SPOT" {
		return "spot"
	}
	return "on-demand"
}

// writeFleet prints the current fleet and how the plan above compares.
func writeFleet(w io.Writer, f *FleetOutput, planCost float64, unschedulable int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CURRENT NODE\tINSTANCE TYPE\tCAPACITY\tZONE\t$/HOUR\tPODS")
	for _, n := range f.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%d\n", n.Name, n.InstanceType, n.CapacityType, n.Zone, n.PricePerHour, n.Pods)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ncurrent fleet: %d node(s), $%.4f/hour ($%.2f/month); from-scratch plan: $%.4f/hour ($%.2f/month)",
		len(f.Nodes), f.CostPerHour, f.CostPerHour*730, planCost, planCost*730)
	switch {
	case f.CostPerHour <= 0:
	case planCost <= f.CostPerHour:
		fmt.Fprintf(w, ", %.0f%% less", 100*(f.CostPerHour-planCost)/f.CostPerHour)
	default:
		fmt.Fprintf(w, ", %.0f%% more", 100*(planCost-f.CostPerHour)/f.CostPerHour)
	}
	fmt.Fprintln(w)
	if f.PendingPods > 0 {
		fmt.Fprintf(w, "note: the current nodes leave %d pod(s) pending that the plan places\n", f.PendingPods)
	}
	if unschedulable > 0 {
		fmt.Fprintf(w, "note: the plan leaves out %d pod(s) its NodePools cannot hold, so it is not the cost of the whole workload\n", unschedulable)
	}
	if len(f.Unpriced) > 0 {
		fmt.Fprintf(w, "note: %d node(s) count $0, their instance type is not in the catalog: %s\n", len(f.Unpriced), summarize(f.Unpriced, 6))
	}
	return nil
}
