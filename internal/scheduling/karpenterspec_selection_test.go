package scheduling_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's "Instance Type Selection" (scheduling/
// instance_selection_test.go) and the Strict MinValuesPolicy cases of
// the provisioning suite (nodewright has no BestEffort policy: minValues
// is always strict, Karpenter's default). Karpenter's integer label
// becomes instance-cpu, its instance types the catalog's.

func TestKarpenterSpecInstanceSelection(t *testing.T) {
	runSpec(t, append(append(cheapestCases(), minValuesCases()...), poolFilteringCases()...))
}

// offer is a filter on (type, offering): Karpenter's "one of the
// cheapest instances" among those the constraints allow.
type offer func(it *scheduling.InstanceType, o scheduling.Offering) bool

func labelIs(k, v string) offer {
	return func(it *scheduling.InstanceType, _ scheduling.Offering) bool { return it.Labels[k] == v }
}
func zoneOf(z string) offer {
	return func(_ *scheduling.InstanceType, o scheduling.Offering) bool { return o.Zone == z }
}
func ctOf(ct string) offer {
	return func(_ *scheduling.InstanceType, o scheduling.Offering) bool { return o.CapacityType == ct }
}

// cheapestAmong: p's claim costs the least any allowed offering costs.
func cheapestAmong(filters ...offer) func(r *specRun) error {
	return func(r *specRun) error {
		c, err := claimOf(r, "p")
		if err != nil {
			return err
		}
		best := math.Inf(1)
		for _, it := range r.in.DefaultInstanceTypes {
			for _, o := range it.Offerings {
				ok := o.Available
				for _, f := range filters {
					ok = ok && f(it, o)
				}
				if ok && o.Price < best {
					best = o.Price
				}
			}
		}
		if math.Abs(c.PricePerHour-best) > 1e-9 {
			return fmt.Errorf("claim %s %s/%s at %.5f/h, the cheapest allowed offering costs %.5f/h", c.InstanceType, c.Zone, c.CapacityType, c.PricePerHour, best)
		}
		return nil
	}
}

func cheapestCases() []specCase {
	const f = "scheduling/instance_selection_test.go:"
	arch, zone, ct := scheduling.LabelArch, scheduling.LabelZone, scheduling.LabelCapacityType
	pool := func(reqs ...scheduling.Requirement) []*scheduling.NodePool {
		return []*scheduling.NodePool{specPool("default", reqs...)}
	}
	return []specCase{
		{name: "InstanceTypeSelection/Cheapest", src: f + "82", pods: one("p"), check: cheapestAmong()},
		{name: "InstanceTypeSelection/Cheapest/PodArchAmd64", src: f + "89", pods: one("p", selector(arch, "amd64")), check: cheapestAmong(labelIs(arch, "amd64"))},
		{name: "InstanceTypeSelection/Cheapest/PodArchArm64", src: f + "103", pods: one("p", selector(arch, "arm64")), check: cheapestAmong(labelIs(arch, "arm64"))},
		{name: "InstanceTypeSelection/Cheapest/PoolArchAmd64", src: f + "116", pools: pool(req(arch, in, "amd64")), pods: one("p"),
			check: cheapestAmong(labelIs(arch, "amd64"))},
		{name: "InstanceTypeSelection/Cheapest/PoolArchArm64", src: f + "131", pools: pool(req(arch, in, "arm64")), pods: one("p"),
			check: cheapestAmong(labelIs(arch, "arm64"))},
		{name: "InstanceTypeSelection/Cheapest/PodOSLinux", src: f + "189 (and 202)", pods: one("p", selector(scheduling.LabelOS, "linux")), check: cheapestAmong()},
		{name: "InstanceTypeSelection/Cheapest/PoolZone", src: f + "215", pools: pool(req(zone, in, zone2)), pods: one("p"), check: cheapestAmong(zoneOf(zone2))},
		{name: "InstanceTypeSelection/Cheapest/PodZone", src: f + "230", pods: one("p", selector(zone, zone2)), check: cheapestAmong(zoneOf(zone2))},
		{name: "InstanceTypeSelection/Cheapest/PoolSpot", src: f + "243", pools: pool(req(ct, in, "spot")), pods: one("p"), check: cheapestAmong(ctOf("spot"))},
		{name: "InstanceTypeSelection/Cheapest/PodSpot", src: f + "258", pods: one("p", selector(ct, "spot")), check: cheapestAmong(ctOf("spot"))},
		{name: "InstanceTypeSelection/Cheapest/PoolOnDemandZone", src: f + "271", pools: pool(req(ct, in, "on-demand"), req(zone, in, zone1)),
			pods: one("p"), check: cheapestAmong(ctOf("on-demand"), zoneOf(zone1))},
		{name: "InstanceTypeSelection/Cheapest/PodSpotZone", src: f + "291", pods: one("p", selector(ct, "spot", zone, zone1)),
			check: cheapestAmong(ctOf("spot"), zoneOf(zone1))},
		{name: "InstanceTypeSelection/Cheapest/PoolSpotPodZone", src: f + "310", pools: pool(req(ct, in, "spot")), pods: one("p", selector(zone, zone2)),
			check: cheapestAmong(ctOf("spot"), zoneOf(zone2))},
		{name: "InstanceTypeSelection/Cheapest/PoolSpotZonePodAmd64Linux", src: f + "362", pools: pool(req(ct, in, "spot"), req(zone, in, zone2)),
			pods: one("p", selector(arch, "amd64", scheduling.LabelOS, "linux")), check: cheapestAmong(ctOf("spot"), zoneOf(zone2), labelIs(arch, "amd64"))},
		{name: "InstanceTypeSelection/Cheapest/PodSpotZoneAmd64Linux", src: f + "396",
			pods:  one("p", selector(ct, "spot", zone, zone2, arch, "amd64", scheduling.LabelOS, "linux")),
			check: cheapestAmong(ctOf("spot"), zoneOf(zone2), labelIs(arch, "amd64"))},
		// Karpenter's arm type has no offering in the zone; here the pool
		// takes amd64 only and the pod asks for arm64.
		{name: "InstanceTypeSelection/NoTypeMatchesSelector", src: f + "428 (and 448, 477)", pools: pool(req(arch, in, "amd64")),
			pods: one("p", selector(arch, "arm64", zone, zone2)), check: unsched("p")},
		{name: "InstanceTypeSelection/EnoughResources", src: f + "509", pods: one("p", requests("cpu", "3", "memory", "10Gi")),
			check: func(r *specRun) error {
				return allocatableAtLeast("p", "cpu", "3", "memory", "10Gi")(r)
			}},
	}
}

// distinctAtLeast: p's claim's options carry at least n values of key,
// and the claim records the minValues.
func distinctAtLeast(key string, n int) func(r *specRun) error {
	return func(r *specRun) error {
		c, err := claimOf(r, "p")
		if err != nil {
			return err
		}
		byName := map[string]*scheduling.InstanceType{}
		for _, it := range r.in.DefaultInstanceTypes {
			byName[it.Name] = it
		}
		vals := map[string]bool{}
		for _, o := range c.InstanceTypeOptions {
			vals[byName[o].Labels[key]] = true
		}
		if len(vals) < n || c.MinValues[key] < n {
			return fmt.Errorf("options %v carry %d values of %s (minValues %v), want at least %d", c.InstanceTypeOptions, len(vals), key, c.MinValues, n)
		}
		return nil
	}
}

func withMin(r scheduling.Requirement, n int) scheduling.Requirement {
	r.MinValues = n
	return r
}

func minValuesCases() []specCase {
	const f = "scheduling/instance_selection_test.go:"
	const p = "suite_test.go:"
	fam, typ := "karpenter.k8s.aws/instance-family", scheduling.LabelInstanceType
	pool := func(reqs ...scheduling.Requirement) []*scheduling.NodePool {
		return []*scheduling.NodePool{specPool("default", reqs...)}
	}
	pod := one("p", requests("cpu", "900m"))
	t3 := []string{"t3.small", "t3.medium", "t3.large"}
	return []specCase{
		{name: "InstanceTypeSelection/MinValues/InstanceTypeIn", src: f + "621", pools: pool(withMin(req(typ, in, t3...), 2)), pods: pod,
			check: distinctAtLeast(typ, 2)},
		{name: "InstanceTypeSelection/MinValues/Gt", src: f + "693", pools: pool(withMin(req(cpuLabel, gt, "8"), 2)), pods: pod,
			check: distinctAtLeast(cpuLabel, 2)},
		{name: "InstanceTypeSelection/MinValues/GtNotSatisfied", src: f + "784", pools: pool(withMin(req(cpuLabel, gt, "100"), 2)), pods: pod,
			check: unsched("p")},
		{name: "InstanceTypeSelection/MinValues/Lt", src: f + "870", pools: pool(withMin(req(cpuLabel, lt, "8"), 2)), pods: pod,
			check: distinctAtLeast(cpuLabel, 2)},
		{name: "InstanceTypeSelection/MinValues/LtNotSatisfied", src: f + "961", pools: pool(withMin(req(cpuLabel, lt, "4"), 2)), pods: pod,
			check: unsched("p")},
		{name: "InstanceTypeSelection/MinValues/MaxOfInAndNotIn", src: f + "1029 (and 1331)",
			pools: pool(withMin(req(typ, in, t3...), 1), withMin(req(typ, notIn, "t3.large"), 2)), pods: pod, check: distinctAtLeast(typ, 2)},
		{name: "InstanceTypeSelection/MinValues/MaxOfGtAndLt", src: f + "1121",
			pools: pool(withMin(req(cpuLabel, gt, "2"), 1), withMin(req(cpuLabel, lt, "16"), 2)), pods: pod, check: distinctAtLeast(cpuLabel, 2)},
		{name: "InstanceTypeSelection/MinValues/NotEnoughTypes", src: f + "1234", pools: pool(withMin(req(fam, in, "m5"), 2)), pods: pod,
			check: unsched("p")},
		{name: "InstanceTypeSelection/MinValues/MultipleKeys", src: f + "1410",
			pools: pool(withMin(req(fam, in, "m5", "m6i", "c6i"), 2), withMin(req(cpuLabel, in, "2", "4", "8"), 3)), pods: pod,
			check: func(r *specRun) error {
				return errors.Join(distinctAtLeast(fam, 2)(r), distinctAtLeast(cpuLabel, 3)(r))
			}},
		{name: "MinValuesPolicy/Strict/InstanceTypesNotMet", src: p + "2911",
			pools: pool(withMin(req(typ, in, "m5.large", "m5.xlarge", "no-such-type"), 3)), pods: pod, check: unsched("p")},
		{name: "MinValuesPolicy/Strict/ZonesNotMet", src: p + "3216",
			pools: pool(withMin(req(scheduling.LabelZone, in, zone1, zone2, "us-east-1d"), 3)), pods: pod, check: unsched("p")},
		{name: "MinValuesPolicy/Strict/ZonesMet", src: p + "3216",
			pools: pool(withMin(req(scheduling.LabelZone, in, zone1, zone2, zone3), 3)), pods: pod, check: sched("p")},
	}
}

// filteredOut: the pods are unschedulable and their reason says the
// pool has no instance type left (Karpenter: "nodepool requirements
// filtered out all available instance types").
func filteredOut(pods ...string) func(r *specRun) error {
	return func(r *specRun) error {
		var errs []error
		for _, p := range pods {
			if why := reasonOf(r.plan, p); !strings.Contains(why, "no launchable instance types") {
				errs = append(errs, fmt.Errorf("pod %s: reason %q, want the pool's instance types filtered out", p, why))
			}
		}
		return errors.Join(append(errs, r.notScheduled(pods...))...)
	}
}

func poolFilteringCases() []specCase {
	const f = "scheduling/suite_test.go:"
	only := func(reqs ...scheduling.Requirement) []*scheduling.NodePool {
		return []*scheduling.NodePool{specPoolOnly("default", reqs...)}
	}
	return []specCase{
		{name: "PoolRequirementFiltering/NoInstanceTypeLeft", src: f + "5197", pools: only(req(scheduling.LabelInstanceType, in, "non-existent-instance-type")),
			pods: one("p", requests("cpu", "32", "memory", "256Gi")), check: filteredOut("p")},
		{name: "PoolRequirementFiltering/MultiplePods", src: f + "5242", pools: only(req(scheduling.LabelArch, in, "non-existent-arch")),
			pods: kpods(3, "p"), check: filteredOut("p-0", "p-1", "p-2")},
		// Both arch values required: no type can be both. The pod is
		// unschedulable with a reason; the solve itself must not fail.
		{name: "PoolRequirementFiltering/ConflictingRequirements", src: f + "5273",
			pools: only(req(scheduling.LabelArch, in, "amd64"), req(scheduling.LabelArch, in, "arm64")),
			pods:  one("p"), check: func(r *specRun) error {
				if reasonOf(r.plan, "p") == "" {
					return fmt.Errorf("pod p: no reason given")
				}
				return r.notScheduled("p")
			}},
		{name: "PoolRequirementFiltering/ZoneFiltersAll", src: f + "5302", pools: only(req(scheduling.LabelZone, in, "non-existent-zone")),
			pods: one("p"), check: filteredOut("p")},
	}
}
