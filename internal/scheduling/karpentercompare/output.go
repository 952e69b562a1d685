package main

import (
	"fmt"
	"math"
	"sort"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	kscheduler "sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling"
	kscheduling "sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/simulation"
)

// karpenterOutput renders Karpenter's results in the JSON shape of
// `nodewright simulate -o json`, so the two plans diff field by field.
func karpenterOutput(cat *catalog.Catalog, r *karpenterResult) simulation.Output {
	out := simulation.Output{
		NodeClaims:    []simulation.ClaimOutput{},
		ExistingNodes: []simulation.ExistingNodeOutput{},
		Unschedulable: []simulation.UnschedulableOutput{},
	}
	for i, n := range r.results.NewNodeClaims {
		co, err := claimOutput(cat, n, fmt.Sprintf("%s-%d", n.NodePoolName, i+1))
		if err != nil {
			for _, p := range n.Pods {
				out.Unschedulable = append(out.Unschedulable, simulation.UnschedulableOutput{Pod: podKey(p), Reason: err.Error()})
			}
			continue
		}
		out.NodeClaims = append(out.NodeClaims, co)
		out.CostPerHour += co.PricePerHour
		out.ExpectedCostPerHour += co.ExpectedPricePerHour
	}
	for _, n := range r.results.ExistingNodes {
		if len(n.Pods) > 0 {
			out.ExistingNodes = append(out.ExistingNodes, simulation.ExistingNodeOutput{Name: n.Name(), Pods: podKeys(n.Pods)})
		}
	}
	out.Unschedulable = append(out.Unschedulable, unschedulable(r.results.PodErrors)...)
	out.Unschedulable = append(out.Unschedulable, unschedulable(r.volumeErrors)...)
	for _, p := range r.unreached {
		out.Unschedulable = append(out.Unschedulable, simulation.UnschedulableOutput{Pod: podKey(p),
			Reason: fmt.Sprintf("not reached before Karpenter's %s solve timeout (the provisioner would retry it in its next loop)", r.timeout)})
	}
	sort.SliceStable(out.Unschedulable, func(i, j int) bool { return out.Unschedulable[i].Pod < out.Unschedulable[j].Pod })
	return out
}

func claimOutput(cat *catalog.Catalog, n *kscheduler.NodeClaim, name string) (simulation.ClaimOutput, error) {
	ct, ranked := launchChoice(n)
	if len(ranked) == 0 {
		return simulation.ClaimOutput{}, fmt.Errorf("karpenter claim for NodePool %s has no launchable offering", n.NodePoolName)
	}
	best := ranked[0]
	co := simulation.ClaimOutput{
		ClaimSummary: scheduling.ClaimSummary{
			Name: name, NodePool: n.NodePoolName, NodeClass: n.Spec.NodeClassRef.Name,
			InstanceType: best.it.Name, CapacityType: ct, Zone: best.offering.Zone(), PricePerHour: best.offering.Price,
		},
		Labels:      claimLabels(cat, n, best),
		Taints:      simulation.Taints(n.Spec.Taints),
		Allocatable: simulation.Quantities(best.it.Allocatable()),
		Requests:    simulation.NonZero(simulation.Quantities(n.Spec.Resources.Requests)),
		Pods:        podKeys(n.Pods),
	}
	for _, r := range ranked {
		co.InstanceTypeOptions = append(co.InstanceTypeOptions, r.it.Name)
	}
	co.ExpectedPricePerHour = expectedPrice(ct, ranked)
	if st := simulation.Taints(n.Spec.StartupTaints); len(st) > 0 {
		co.StartupTaints = st
	}
	if len(co.Requests) == 0 {
		co.Requests = nil
	}
	if it, ok := cat.Get(co.InstanceType); ok {
		if o, ok := it.Offering(co.Zone, ct); ok {
			co.PriceSource = o.PriceSource
		}
	}
	co.Requirements = requirements(n.Requirements)
	return co, nil
}

// expectedPrice is nodewright's launch price model applied to Karpenter's
// claim, so both plans' expected costs are computed alike.
func expectedPrice(ct string, ranked []rankedOption) float64 {
	prices := make([]float64, 0, len(ranked))
	for _, r := range ranked {
		prices = append(prices, r.offering.Price)
	}
	return scheduling.ExpectedLaunchPrice(ct, prices)
}

type rankedOption struct {
	it       *cloudprovider.InstanceType
	offering *cloudprovider.Offering
}

// launchChoice is what the AWS provider's CreateFleet call would launch for
// the claim, which Karpenter's scheduler leaves open: the capacity type by
// preference (reserved, then spot, then on-demand, among those the claim
// allows and some option offers, as the provider's getCapacityType), then
// the options that have such an offering, cheapest first, at most 60 (the
// provider's fleet override cap); the first is what the lowest-price
// allocation strategy launches. nodewright resolves its claims the same way.
func launchChoice(n *kscheduler.NodeClaim) (string, []rankedOption) {
	ctReq := n.Requirements.Get(karpv1.CapacityTypeLabelKey)
	for _, ct := range []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
		if !ctReq.Has(ct) {
			continue
		}
		var ranked []rankedOption
		for _, it := range n.InstanceTypeOptions {
			if o := cheapestOffering(it, n.Requirements, ct); o != nil {
				ranked = append(ranked, rankedOption{it: it, offering: o})
			}
		}
		if len(ranked) == 0 {
			continue
		}
		sort.SliceStable(ranked, func(a, b int) bool {
			if ranked[a].offering.Price != ranked[b].offering.Price {
				return ranked[a].offering.Price < ranked[b].offering.Price
			}
			return ranked[a].it.Name < ranked[b].it.Name
		})
		return ct, ranked[:min(len(ranked), scheduling.MaxInstanceTypeOptions)]
	}
	return "", nil
}

// cheapestOffering is the type's cheapest available offering of capacity
// type ct that the claim's requirements (zone, zone ID) allow; ties go to
// the first zone by name so the choice is stable.
func cheapestOffering(it *cloudprovider.InstanceType, reqs kscheduling.Requirements, ct string) *cloudprovider.Offering {
	var best *cloudprovider.Offering
	price := math.MaxFloat64
	for _, o := range it.Offerings.Available() {
		if o.CapacityType() != ct || !reqs.IsCompatible(o.Requirements, kscheduling.AllowUndefinedWellKnownLabels) {
			continue
		}
		if best == nil || o.Price < price || (o.Price == price && o.Zone() < best.Zone()) {
			best, price = o, o.Price
		}
	}
	return best
}

// claimLabels is the label set the node would carry: the catalog's labels
// for the chosen offering, the template's labels (NodePool, node class and
// the pool's own), and custom requirement keys narrowed to In values, which
// Karpenter copies onto the NodeClaim (it picks any allowed value; the
// smallest is taken here so the output is stable).
func claimLabels(cat *catalog.Catalog, n *kscheduler.NodeClaim, best rankedOption) map[string]string {
	out := map[string]string{}
	if it, ok := cat.Get(best.it.Name); ok {
		z, _ := cat.Zone(best.offering.Zone())
		o, found := it.Offering(best.offering.Zone(), best.offering.CapacityType())
		if !found {
			o = catalog.Offering{Zone: z.Name, ZoneID: z.ID, CapacityType: best.offering.CapacityType()}
		}
		out = it.NodeLabels(o)
	}
	for k, v := range n.Labels {
		out[k] = v
	}
	for key, r := range n.Requirements {
		if karpv1.WellKnownLabels.Has(key) || karpv1.RestrictedLabels.Has(key) || simulationKey(key) {
			continue
		}
		if r.Operator() == corev1.NodeSelectorOpIn {
			vals := r.Values()
			sort.Strings(vals)
			out[key] = vals[0]
		}
	}
	return out
}

// simulationKey marks the requirements Karpenter adds to templates only to
// match DaemonSets that select on registered/initialized nodes.
func simulationKey(key string) bool {
	return key == karpv1.NodeRegisteredLabelKey || key == karpv1.NodeInitializedLabelKey || key == corev1.LabelHostname
}

func requirements(reqs kscheduling.Requirements) []simulation.RequirementOutput {
	var out []simulation.RequirementOutput
	for _, r := range reqs.NodeSelectorRequirements() {
		if simulationKey(r.Key) {
			continue
		}
		vals := append([]string(nil), r.Values...)
		sort.Strings(vals)
		ro := simulation.RequirementOutput{Key: r.Key, Operator: string(r.Operator), Values: vals}
		if r.MinValues != nil {
			ro.MinValues = *r.MinValues
		}
		out = append(out, ro)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Key != out[j].Key {
			return out[i].Key < out[j].Key
		}
		return out[i].Operator < out[j].Operator
	})
	return out
}

func unschedulable(errs map[*corev1.Pod]error) []simulation.UnschedulableOutput {
	out := make([]simulation.UnschedulableOutput, 0, len(errs))
	for p, err := range errs {
		out = append(out, simulation.UnschedulableOutput{Pod: podKey(p), Reason: err.Error()})
	}
	return out
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

func podKeys(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, podKey(p))
	}
	return out
}
