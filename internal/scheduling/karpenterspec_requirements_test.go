package scheduling_test

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's "Custom Constraints", "Preferential Fallback" and "Instance
// Type Compatibility" (scheduling/suite_test.go). Karpenter's fake labels
// map onto the catalog's: its integer label onto instance-cpu, its
// instance size onto instance-size, its exotic (optional) label onto
// instance-gpu-count, which only GPU types carry. "Scheduling Logic" and
// "Well Known Labels" appear twice in Karpenter's file (lines 204/678,
// 501/952), once per NodePool flavour; each behaviour is ported once.

const testKey = "test-key"

func TestKarpenterSpecCustomConstraints(t *testing.T) { runSpec(t, customConstraintCases()) }

func TestKarpenterSpecWellKnownLabels(t *testing.T) { runSpec(t, wellKnownLabelCases()) }

func TestKarpenterSpecFallbackAndCompatibility(t *testing.T) {
	runSpec(t, append(fallbackCases(), compatibilityCases()...))
}

func one(name string, opts ...podOpt) []*corev1.Pod { return []*corev1.Pod{kpod(name, opts...)} }

func zoneIs(pod, zone string) func(r *specRun) error {
	return func(r *specRun) error { return r.hasLabel(pod, scheduling.LabelZone, zone) }
}

func sched(pods ...string) func(r *specRun) error {
	return func(r *specRun) error { return r.scheduled(pods...) }
}

func unsched(pods ...string) func(r *specRun) error {
	return func(r *specRun) error { return r.notScheduled(pods...) }
}

func testKeyPool(vals ...string) []*scheduling.NodePool {
	return []*scheduling.NodePool{specPool("default", req(testKey, in, vals...))}
}

func labelledPool() []*scheduling.NodePool {
	return []*scheduling.NodePool{withLabels(specPool("default"), testKey, "test-value")}
}

func customConstraintCases() []specCase {
	const f = "scheduling/suite_test.go:"
	return []specCase{
		{name: "CustomConstraints/PoolLabels/UnconstrainedPodGetsLabel", src: f + "155", pools: labelledPool(), pods: one("p"),
			check: func(r *specRun) error { return r.hasLabel("p", testKey, "test-value") }},
		{name: "CustomConstraints/PoolLabels/ConflictingSelector", src: f + "163", pools: labelledPool(),
			pods: one("p", selector(testKey, "different-value")), check: unsched("p")},
		{name: "CustomConstraints/PoolLabels/SelectorWithUndefinedKey", src: f + "172",
			pods: one("p", selector(testKey, "test-value")), check: unsched("p")},
		{name: "CustomConstraints/PoolLabels/MatchingRequirement", src: f + "180", pools: labelledPool(),
			pods:  one("p", required(expr(testKey, in, "test-value", "another-value"))),
			check: func(r *specRun) error { return r.hasLabel("p", testKey, "test-value") }},
		{name: "CustomConstraints/PoolLabels/ConflictingRequirement", src: f + "192", pools: labelledPool(),
			pods: one("p", required(expr(testKey, in, "another-value"))), check: unsched("p")},
		{name: "CustomConstraints/Logic/InWithUndefinedKey", src: f + "509 (and 953)",
			pods: one("p", required(expr(testKey, in, "test-value"))), check: unsched("p")},
		{name: "CustomConstraints/Logic/NotInWithUndefinedKey", src: f + "518 (and 962)",
			pods:  one("p", required(expr(testKey, notIn, "test-value"))),
			check: func(r *specRun) error { return r.lacksLabel("p", testKey, "test-value") }},
		{name: "CustomConstraints/Logic/ExistsWithUndefinedKey", src: f + "528 (and 972)",
			pods: one("p", required(expr(testKey, exists))), check: unsched("p")},
		{name: "CustomConstraints/Logic/DoesNotExistWithUndefinedKey", src: f + "537 (and 981)",
			pods:  one("p", required(expr(testKey, dne))),
			check: func(r *specRun) error { return r.lacksLabel("p", testKey, "") }},
		{name: "CustomConstraints/Logic/UnconstrainedPodGetsRequirementValue", src: f + "547 (and 991)", pools: testKeyPool("test-value"),
			pods: one("p"), check: func(r *specRun) error { return r.hasLabel("p", testKey, "test-value") }},
		{name: "CustomConstraints/Logic/MatchingValueIn", src: f + "556 (and 1000)", pools: testKeyPool("test-value"),
			pods:  one("p", required(expr(testKey, in, "test-value"))),
			check: func(r *specRun) error { return r.hasLabel("p", testKey, "test-value") }},
		{name: "CustomConstraints/Logic/MatchingValueNotIn", src: f + "568 (and 1012)", pools: testKeyPool("test-value"),
			pods: one("p", required(expr(testKey, notIn, "test-value"))), check: unsched("p")},
		{name: "CustomConstraints/Logic/ExistsWithDefinedKey", src: f + "579 (and 1023)", pools: testKeyPool("test-value"),
			pods:  one("p", required(expr(testKey, exists))),
			check: func(r *specRun) error { return r.hasLabel("p", testKey, "test-value") }},
		{name: "CustomConstraints/Logic/DoesNotExistWithDefinedKey", src: f + "591 (and 1035)", pools: testKeyPool("test-value"),
			pods: one("p", required(expr(testKey, dne))), check: unsched("p")},
		{name: "CustomConstraints/Logic/DifferentValueIn", src: f + "603 (and 1047)", pools: testKeyPool("test-value"),
			pods: one("p", required(expr(testKey, in, "another-value"))), check: unsched("p")},
		{name: "CustomConstraints/Logic/DifferentValueNotIn", src: f + "614 (and 1058)", pools: testKeyPool("test-value"),
			pods:  one("p", required(expr(testKey, notIn, "another-value"))),
			check: func(r *specRun) error { return r.hasLabel("p", testKey, "test-value") }},
		{name: "CustomConstraints/Logic/CompatiblePodsShareANode", src: f + "626 (and 1070)", pools: testKeyPool("test-value", "another-value"),
			pods: []*corev1.Pod{kpod("a", required(expr(testKey, in, "test-value"))), kpod("b", required(expr(testKey, notIn, "another-value")))},
			check: func(r *specRun) error {
				return errors.Join(r.hasLabel("a", testKey, "test-value"), r.hasLabel("b", testKey, "test-value"), r.sameNode("a", "b"))
			}},
		{name: "CustomConstraints/Logic/IncompatiblePodsOnDifferentNodes", src: f + "646 (and 1090)", pools: testKeyPool("test-value", "another-value"),
			pods: []*corev1.Pod{kpod("a", required(expr(testKey, in, "test-value"))), kpod("b", required(expr(testKey, in, "another-value")))},
			check: func(r *specRun) error {
				return errors.Join(r.hasLabel("a", testKey, "test-value"), r.hasLabel("b", testKey, "another-value"), r.distinctNodes("a", "b"))
			}},
		{name: "CustomConstraints/Logic/ExistsDoesNotWidenIn", src: f + "666 (and 1111)",
			pods: one("p", required(expr(scheduling.LabelZone, in, "non-existent-zone"), expr(scheduling.LabelZone, exists))), check: unsched("p")},
		{name: "CustomConstraints/Validation/KubernetesDomainLabels", src: f + "453 (and 904)",
			pools: []*scheduling.NodePool{specPool("default", req("kubernetes.io/test", in, "test-value"), req("k8s.io/test", in, "test-value"))},
			pods:  one("p"), check: func(r *specRun) error {
				return errors.Join(r.hasLabel("p", "kubernetes.io/test", "test-value"), r.hasLabel("p", "k8s.io/test", "test-value"))
			}},
		{name: "CustomConstraints/Validation/KubernetesSubdomainLabels", src: f + "467 (and 918)",
			pools: []*scheduling.NodePool{specPool("default", req("subdomain.kubernetes.io/test", in, "test-value"), req("subdomain.k8s.io/test", in, "test-value"))},
			pods:  one("p"), check: func(r *specRun) error {
				return errors.Join(r.hasLabel("p", "subdomain.kubernetes.io/test", "test-value"), r.hasLabel("p", "subdomain.k8s.io/test", "test-value"))
			}},
		{name: "CustomConstraints/Validation/WellKnownLabelSelectors", src: f + "481 (and 932)",
			pods: []*corev1.Pod{kpod("zone", selector(scheduling.LabelZone, zone1)), kpod("type", selector(scheduling.LabelInstanceType, "m5.large")),
				kpod("arch", selector(scheduling.LabelArch, "arm64")), kpod("os", selector(scheduling.LabelOS, "linux")),
				kpod("ct", selector(scheduling.LabelCapacityType, "spot"))},
			check: sched("zone", "type", "arch", "os", "ct")},
		{name: "CustomConstraints/Validation/RestrictedLabels", src: f + "426 (and 882)", pods: restrictedLabelPods(), check: func(r *specRun) error {
			return r.notScheduled(names(r.in.Pods)...)
		}},
		{name: "CustomConstraints/Validation/RestrictedDomains", src: f + "442 (and 893)", pods: restrictedDomainPods(), check: func(r *specRun) error {
			return r.notScheduled(names(r.in.Pods)...)
		}},
	}
}

// Karpenter's v1.RestrictedLabels (sigs.k8s.io/karpenter
// pkg/apis/v1/labels.go): the hostname, which the kubelet sets.
func restrictedLabelPods() []*corev1.Pod {
	var out []*corev1.Pod
	for i, l := range []string{scheduling.LabelHostname} {
		out = append(out, kpod("restricted-"+strconv.Itoa(i), required(expr(l, in, "test"))))
	}
	return out
}

// Karpenter's v1.RestrictedLabelDomains (karpenter.sh) plus the AWS
// provider's (karpenter.k8s.aws, apis/v1/labels.go): keys under them
// that are not well known cannot be asked for.
func restrictedDomainPods() []*corev1.Pod {
	var out []*corev1.Pod
	for i, d := range []string{"karpenter.sh", "karpenter.k8s.aws", "sub.karpenter.sh"} {
		out = append(out, kpod("domain-"+strconv.Itoa(i), required(expr(d+"/test", in, "test"))))
	}
	return out
}

const cpuLabel = "karpenter.k8s.aws/instance-cpu"

func cpuLabelCheck(pod string, ok func(int) bool, want string) func(r *specRun) error {
	return func(r *specRun) error {
		v, _, err := r.label(pod, cpuLabel)
		if err != nil {
			return err
		}
		if n, perr := strconv.Atoi(v); perr != nil || !ok(n) {
			return fmt.Errorf("instance-cpu %q, want %s", v, want)
		}
		return nil
	}
}

func allZones() []string { return append([]string(nil), specZones...) }

func wellKnownLabelCases() []specCase {
	const f = "scheduling/suite_test.go:"
	zonePool := func(zs ...string) []*scheduling.NodePool {
		return []*scheduling.NodePool{specPoolOnly("default", req(scheduling.LabelZone, in, zs...))}
	}
	everyZoneAnd := func(extra ...string) []string { return append(allZones(), extra...) }
	return []specCase{
		{name: "WellKnownLabels/PoolConstraints", src: f + "205 (and 679)", pools: zonePool(zone2), pods: one("p"), check: zoneIs("p", zone2)},
		{name: "WellKnownLabels/NodeSelectors", src: f + "214 (and 688)", pools: zonePool(zone1, zone2),
			pods: one("p", selector(scheduling.LabelZone, zone2)), check: zoneIs("p", zone2)},
		{name: "WellKnownLabels/NoHostnameSelector", src: f + "225 (and 699)", pods: one("p", selector(scheduling.LabelHostname, "red-node")), check: unsched("p")},
		{name: "WellKnownLabels/UnknownSelectorValue", src: f + "233 (and 707)", pools: zonePool(zone1),
			pods: one("p", selector(scheduling.LabelZone, "unknown")), check: unsched("p")},
		{name: "WellKnownLabels/SelectorOutsidePool", src: f + "243 (and 717)", pools: zonePool(zone1),
			pods: one("p", selector(scheduling.LabelZone, zone2)), check: unsched("p")},
		{name: "WellKnownLabels/RequirementIn", src: f + "253 (and 727)", pods: one("p", required(expr(scheduling.LabelZone, in, zone3))), check: zoneIs("p", zone3)},
		{name: "WellKnownLabels/PoolGt", src: f + "264 (and 738)", pools: []*scheduling.NodePool{specPoolOnly("default", req(cpuLabel, gt, "8"))},
			pods: one("p"), check: cpuLabelCheck("p", func(n int) bool { return n > 8 }, "> 8")},
		{name: "WellKnownLabels/PoolLt", src: f + "273 (and 747)", pools: []*scheduling.NodePool{specPoolOnly("default", req(cpuLabel, lt, "8"))},
			pods: one("p"), check: cpuLabelCheck("p", func(n int) bool { return n < 8 }, "< 8")},
		{name: "WellKnownLabels/PoolGte", src: f + "282", pools: []*scheduling.NodePool{specPoolOnly("default", req(cpuLabel, gt, "15"))},
			pods: one("p"), check: cpuLabelCheck("p", func(n int) bool { return n >= 16 }, ">= 16")},
		{name: "WellKnownLabels/PoolLte", src: f + "291", pools: []*scheduling.NodePool{specPoolOnly("default", req(cpuLabel, lt, "3"))},
			pods: one("p"), check: cpuLabelCheck("p", func(n int) bool { return n <= 2 }, "<= 2")},
		{name: "WellKnownLabels/IncompatibleIn", src: f + "300 (and 756)", pods: one("p", required(expr(scheduling.LabelZone, in, "unknown"))), check: unsched("p")},
		{name: "WellKnownLabels/RequirementNotIn", src: f + "310 (and 766)",
			pods: one("p", required(expr(scheduling.LabelZone, notIn, zone1, zone2, "unknown"))), check: zoneIs("p", zone3)},
		{name: "WellKnownLabels/IncompatibleNotIn", src: f + "321 (and 777)",
			pods: one("p", required(expr(scheduling.LabelZone, notIn, everyZoneAnd("unknown")...))), check: unsched("p")},
		{name: "WellKnownLabels/CompatiblePreferenceIn", src: f + "332 (and 788)",
			pods:  one("p", required(expr(scheduling.LabelZone, in, everyZoneAnd("unknown")...)), preferred(1, expr(scheduling.LabelZone, in, zone2, "unknown"))),
			check: zoneIs("p", zone2)},
		{name: "WellKnownLabels/IncompatiblePreferenceIn", src: f + "346 (and 802)",
			pods:  one("p", required(expr(scheduling.LabelZone, in, everyZoneAnd("unknown")...)), preferred(1, expr(scheduling.LabelZone, in, "unknown"))),
			check: sched("p")},
		{name: "WellKnownLabels/CompatiblePreferenceNotIn", src: f + "359 (and 815)",
			pods:  one("p", required(expr(scheduling.LabelZone, in, everyZoneAnd("unknown")...)), preferred(1, expr(scheduling.LabelZone, notIn, zone1, zone3))),
			check: zoneIs("p", zone2)},
		{name: "WellKnownLabels/IncompatiblePreferenceNotIn", src: f + "373 (and 829)",
			pods:  one("p", required(expr(scheduling.LabelZone, in, everyZoneAnd("unknown")...)), preferred(1, expr(scheduling.LabelZone, notIn, allZones()...))),
			check: sched("p")},
		{name: "WellKnownLabels/SelectorPreferenceAndRequirement", src: f + "386 (and 842)",
			pods: one("p", selector(scheduling.LabelZone, zone3), required(expr(scheduling.LabelZone, in, allZones()...)),
				preferred(1, expr(scheduling.LabelZone, in, allZones()...))),
			check: zoneIs("p", zone3)},
		{name: "WellKnownLabels/MultidimensionalConstraints", src: f + "401 (and 857)",
			pods: one("p", selector(scheduling.LabelZone, zone3, scheduling.LabelInstanceType, "m6g.large"),
				required(expr(scheduling.LabelZone, in, zone1, zone3), expr(scheduling.LabelInstanceType, in, "m5.large", "m6g.large")),
				preferred(1, expr(scheduling.LabelZone, notIn, "unknown"), expr(scheduling.LabelInstanceType, notIn, "unknown"))),
			check: func(r *specRun) error {
				return errors.Join(r.hasLabel("p", scheduling.LabelZone, zone3), r.hasLabel("p", scheduling.LabelInstanceType, "m6g.large"))
			}},
	}
}

func fallbackCases() []specCase {
	const f = "scheduling/suite_test.go:"
	zoneIn := func(z ...string) corev1.NodeSelectorRequirement { return expr(scheduling.LabelZone, in, z...) }
	return []specCase{
		{name: "PreferentialFallback/Required/FinalTermNotRelaxed", src: f + "1128",
			pools: []*scheduling.NodePool{specPoolOnly("default", req(scheduling.LabelZone, in, zone1), req(scheduling.LabelInstanceType, in, "m5.large"))},
			pods:  one("p", required(zoneIn("invalid"))), check: unsched("p")},
		{name: "PreferentialFallback/Required/RelaxMultipleTerms", src: f + "1144",
			pods:  one("p", required(zoneIn("invalid")), required(zoneIn("invalid")), required(zoneIn(zone1)), required(zoneIn(zone2))),
			check: zoneIs("p", zone1)},
		{name: "PreferentialFallback/Preferred/RelaxAllTerms", src: f + "1168",
			pods:  one("p", preferred(1, zoneIn("invalid")), preferred(1, expr(scheduling.LabelInstanceType, in, "invalid"))),
			check: sched("p")},
		{name: "PreferentialFallback/Preferred/LighterWeights", src: f + "1187",
			pools: []*scheduling.NodePool{specPoolOnly("default", req(scheduling.LabelZone, in, zone1, zone2))},
			pods: one("p", preferred(100, expr(scheduling.LabelInstanceType, in, zone3)), preferred(50, zoneIn(zone2)),
				preferred(1, zoneIn(zone1))),
			check: zoneIs("p", zone2)},
		{name: "PreferentialFallback/Preferred/ConflictsWithRequirement", src: f + "1214",
			pods:  one("p", preferred(1, expr(scheduling.LabelZone, notIn, zone3)), required(zoneIn(zone3))),
			check: zoneIs("p", zone3)},
		{name: "PreferentialFallback/Preferred/SelfConflictingPreference", src: f + "1235",
			pods:  one("p", preferred(1, zoneIn("invalid"), expr(scheduling.LabelZone, notIn, "invalid"))),
			check: sched("p")},
	}
}

// withResource copies the catalog and gives the named types an extended
// resource, as Karpenter's tests add fake GPUs to fake types.
func withResource(res string, qty string, types ...string) func(t *testing.T, in *scheduling.Input) {
	return func(t *testing.T, in *scheduling.Input) {
		for _, it := range in.DefaultInstanceTypes {
			for _, name := range types {
				if it.Name == name {
					it.Allocatable[corev1.ResourceName(res)] = qtyOf(qty)
					it.Capacity[corev1.ResourceName(res)] = qtyOf(qty)
				}
			}
		}
	}
}

func compatibilityCases() []specCase {
	const f = "scheduling/suite_test.go:"
	archPool := func(archs ...string) []*scheduling.NodePool {
		return []*scheduling.NodePool{specPoolOnly("default", req(scheduling.LabelArch, in, archs...))}
	}
	const gpu1, gpu2 = "karpenter.sh/super-great-gpu", "karpenter.sh/even-better-gpu"
	gpus := func(t *testing.T, in *scheduling.Input) {
		withResource(gpu1, "25", "m5.large")(t, in)
		withResource(gpu2, "25", "m5.xlarge")(t, in)
	}
	const size, gpuCount = "karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-gpu-count"
	return []specCase{
		{name: "InstanceTypeCompatibility/MoreThanAnyTypeHas", src: f + "1248", pods: one("p", requests("cpu", "512")), check: unsched("p")},
		{name: "InstanceTypeCompatibility/DifferentArchsDifferentNodes", src: f + "1259", pools: archPool("arm64", "amd64"),
			pods:  []*corev1.Pod{kpod("amd", selector(scheduling.LabelArch, "amd64")), kpod("arm", selector(scheduling.LabelArch, "arm64"))},
			check: func(r *specRun) error { return r.distinctNodes("amd", "arm") }},
		{name: "InstanceTypeCompatibility/PodInstanceTypeOutsidePoolArch", src: f + "1284", pools: archPool("amd64"),
			pods: one("p", required(expr(scheduling.LabelInstanceType, in, "m6g.large"))), check: unsched("p")},
		{name: "InstanceTypeCompatibility/PodOperatingSystemUnknown", src: f + "1305", pools: archPool("amd64"),
			pods: one("p", required(expr(scheduling.LabelOS, in, "ios"))), check: unsched("p")},
		// Karpenter: only the arm type is big enough; here only amd64 types
		// have more than 64 vCPUs, and the pool allows arm64 only.
		{name: "InstanceTypeCompatibility/ProviderArchExcludesTheOnlyFit", src: f + "1327", pools: archPool("arm64"),
			pods: one("p", limits("cpu", "70")), check: unsched("p")},
		{name: "InstanceTypeCompatibility/DifferentOSDifferentNodes", src: f + "1342", pools: archPool("arm64", "amd64"),
			pods: []*corev1.Pod{kpod("linux", selector(scheduling.LabelOS, "linux")), kpod("windows", selector(scheduling.LabelOS, "windows"))},
			// Deliberately different: see deliberateDifferences.
			check: func(r *specRun) error { return errors.Join(r.scheduled("linux"), r.notScheduled("windows")) }},
		// The first pod uses the beta instance-type label, which Karpenter
		// normalizes (v1.NormalizedLabels).
		{name: "InstanceTypeCompatibility/DifferentInstanceTypeSelectors", src: f + "1367", pools: archPool("arm64", "amd64"),
			pods: []*corev1.Pod{kpod("small", selector(corev1.LabelInstanceType, "t3.small")),
				kpod("default", selector(scheduling.LabelInstanceType, "m5.large"))},
			check: func(r *specRun) error {
				return errors.Join(r.distinctNodes("small", "default"), r.hasLabel("small", scheduling.LabelInstanceType, "t3.small"))
			}},
		{name: "InstanceTypeCompatibility/DifferentZoneSelectors", src: f + "1392", pools: archPool("arm64", "amd64"),
			pods:  []*corev1.Pod{kpod("z1", selector(scheduling.LabelZone, zone1)), kpod("z2", selector(scheduling.LabelZone, zone2))},
			check: func(r *specRun) error { return r.distinctNodes("z1", "z2") }},
		{name: "InstanceTypeCompatibility/ResourcesOnDifferentTypes", src: f + "1417", edit: gpus,
			pods:  []*corev1.Pod{kpod("g1", limits(gpu1, "1")), kpod("g2", limits(gpu2, "1"))},
			check: func(r *specRun) error { return r.distinctNodes("g1", "g2") }},
		{name: "InstanceTypeCompatibility/ResourcesNotOnOneType", src: f + "1446", edit: gpus,
			pods: one("p", limits(gpu1, "1", gpu2, "1")), check: unsched("p")},
		{name: "InstanceTypeCompatibility/ProviderLabels/FilterBySize", src: f + "1465",
			pods: []*corev1.Pod{kpod("large", selector(size, "large")), kpod("small", selector(size, "small"))},
			check: func(r *specRun) error {
				return errors.Join(r.hasLabel("large", size, "large"), r.hasLabel("small", size, "small"))
			}},
		{name: "InstanceTypeCompatibility/ProviderLabels/IncompatibleLabels", src: f + "1478",
			pods: []*corev1.Pod{kpod("a", selector(size, "large", scheduling.LabelInstanceType, "t3.small")),
				kpod("b", selector(size, "small", scheduling.LabelInstanceType, "m5.xlarge"))},
			check: unsched("a", "b")},
		{name: "InstanceTypeCompatibility/ProviderLabels/OptionalLabelExists", src: f + "1495",
			pods: one("p", required(expr(gpuCount, exists))), check: func(r *specRun) error {
				_, has, err := r.label("p", gpuCount)
				if err == nil && !has {
					err = fmt.Errorf("node lacks %s", gpuCount)
				}
				return err
			}},
		{name: "InstanceTypeCompatibility/ProviderLabels/OptionalLabelDisallowed", src: f + "1507",
			pods: one("p", required(expr(gpuCount, dne))), check: func(r *specRun) error { return r.lacksLabel("p", gpuCount, "") }},
	}
}
