package main

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	kscheduling "sigs.k8s.io/karpenter/pkg/scheduling"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// The AWS provider registers its labels (karpenter.k8s.aws/*, zone-id, ...)
// as well-known in its apis package init; Karpenter core alone does not
// know them. Without this a pod selecting on instance-family would not be
// treated as well-known, and a NodePool requirement on one would be copied
// onto claims as a custom label. nodewright's catalog owns the same list.
func init() {
	for k := range catalog.WellKnownLabels {
		karpv1.WellKnownLabels.Insert(k)
	}
}

// instanceTypes converts nodewright's per-NodePool view of the catalog into
// the per-NodePool lists Karpenter's scheduler takes. Pools that share a
// prepared list in nodewright (same node class) share the converted list,
// as the AWS provider caches one list per node class.
func instanceTypes(in *scheduling.Input) map[string][]*cloudprovider.InstanceType {
	out := map[string][]*cloudprovider.InstanceType{}
	converted := map[*scheduling.InstanceType][]*cloudprovider.InstanceType{}
	for _, np := range in.NodePools {
		its, ok := in.InstanceTypes[np.Name]
		if !ok {
			its = in.DefaultInstanceTypes
		}
		if len(its) == 0 {
			continue
		}
		list, ok := converted[its[0]]
		if !ok {
			list = make([]*cloudprovider.InstanceType, 0, len(its))
			for _, t := range its {
				list = append(list, instanceType(t, in.Unavailable))
			}
			converted[its[0]] = list
		}
		out[np.Name] = list
	}
	return out
}

// instanceType builds what the AWS provider would hand Karpenter for one
// type: a requirement for every well-known key (DoesNotExist where the type
// lacks the label, as Karpenter requires), offerings keyed by capacity type,
// zone and zone ID, and a capacity and overhead whose difference is exactly
// nodewright's allocatable for the pool's node class.
func instanceType(t *scheduling.InstanceType, unavailable map[scheduling.OfferingKey]bool) *cloudprovider.InstanceType {
	offerings := offerings(t, unavailable)
	reqs := kscheduling.NewRequirements()
	for key := range catalog.TypeLevelLabels {
		if v, ok := t.Labels[key]; ok {
			reqs.Add(kscheduling.NewRequirement(key, corev1.NodeSelectorOpIn, v))
		} else {
			reqs.Add(kscheduling.NewRequirement(key, corev1.NodeSelectorOpDoesNotExist))
		}
	}
	for key, v := range t.Labels {
		if !catalog.TypeLevelLabels[key] {
			reqs.Add(kscheduling.NewRequirement(key, corev1.NodeSelectorOpIn, v))
		}
	}
	zones, zoneIDs, capacityTypes := offeringValues(offerings)
	reqs.Add(kscheduling.NewRequirement(corev1.LabelTopologyZone, corev1.NodeSelectorOpIn, zones...))
	if len(zoneIDs) > 0 {
		reqs.Add(kscheduling.NewRequirement(catalog.LabelTopologyZoneID, corev1.NodeSelectorOpIn, zoneIDs...))
	} else {
		reqs.Add(kscheduling.NewRequirement(catalog.LabelTopologyZoneID, corev1.NodeSelectorOpDoesNotExist))
	}
	reqs.Add(kscheduling.NewRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, capacityTypes...))
	return &cloudprovider.InstanceType{
		Name:         t.Name,
		Requirements: reqs,
		Offerings:    offerings,
		Capacity:     t.Capacity.DeepCopy(),
		Overhead:     &cloudprovider.InstanceTypeOverhead{KubeReserved: overhead(t.Capacity, t.Allocatable)},
	}
}

func offerings(t *scheduling.InstanceType, unavailable map[scheduling.OfferingKey]bool) cloudprovider.Offerings {
	out := make(cloudprovider.Offerings, 0, len(t.Offerings))
	for _, o := range t.Offerings {
		labels := map[string]string{karpv1.CapacityTypeLabelKey: o.CapacityType, corev1.LabelTopologyZone: o.Zone}
		if o.ZoneID != "" {
			labels[catalog.LabelTopologyZoneID] = o.ZoneID
		}
		key := scheduling.OfferingKey{InstanceType: t.Name, Zone: o.Zone, CapacityType: o.CapacityType}
		out = append(out, &cloudprovider.Offering{
			Requirements: kscheduling.NewLabelRequirements(labels),
			Price:        o.Price,
			Available:    o.Available && !unavailable[key],
		})
	}
	return out
}

// offeringValues lists the zones, zone IDs and capacity types the type's
// available offerings cover, sorted (the AWS provider derives the type's
// zone and capacity-type requirements the same way).
func offeringValues(offs cloudprovider.Offerings) (zones, zoneIDs, capacityTypes []string) {
	z, id, ct := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, o := range offs.Available() {
		z[o.Zone()] = true
		ct[o.CapacityType()] = true
		if v := o.Requirements.Get(catalog.LabelTopologyZoneID).Any(); v != "" {
			id[v] = true
		}
	}
	return slices.Sorted(maps.Keys(z)), slices.Sorted(maps.Keys(id)), slices.Sorted(maps.Keys(ct))
}

// overhead is capacity minus allocatable per resource: Karpenter computes
// allocatable as capacity minus overhead, so this makes its allocatable
// equal nodewright's whatever the node class's kubelet settings were. The
// split into kube-reserved, system-reserved and eviction threshold does not
// matter to the scheduler, so it is all reported as kube-reserved.
func overhead(capacity, allocatable corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, c := range capacity {
		a, ok := allocatable[name]
		if !ok {
			continue
		}
		d := c.DeepCopy()
		d.Sub(a)
		if d.Sign() > 0 {
			out[name] = d
		}
	}
	return out
}
