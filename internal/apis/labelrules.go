package apis

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The label rules of Karpenter v1.14.1 for NodePool template labels and
// requirement keys. A NodePool is usable there only when it passes both
// layers, so nodewright rejects what either rejects:
//   - the CRD's CEL rules (karpenter-provider-aws v1.14.1
//     pkg/apis/crds/karpenter.sh_nodepools.yaml, spec.template.metadata.labels
//     and spec.template.spec.requirements[].key), whose messages are used
//     verbatim;
//   - the NodePool controller's RuntimeValidate (sigs.k8s.io/karpenter
//     v1.14.1 pkg/apis/v1/nodepool_validation.go validateLabels and
//     nodeclaim_validation.go ValidateRequirement), which fails the pool's
//     ValidationSucceeded condition, so the provisioner ignores it as not
//     ready: IsRestrictedLabel and validateWellKnownValues in
//     pkg/apis/v1/labels.go, with the provider's additions from its
//     pkg/apis/v1/labels.go init.
//
// Neither layer restricts the kubernetes.io or k8s.io domains any more
// (only kubernetes.io/hostname): nodepool_validation_cel_test.go "should
// allow kubernetes domains" / "should allow labels in kubernetes domains".
// Labels there that the kubelet may not set on itself reach the Node
// through registration (internal/aws NodeLabels, lifecycle RegistrationLabels).

// restrictedLabelDomains are Karpenter's RestrictedLabelDomains: core's
// karpenter.sh plus the provider's karpenter.k8s.aws.
var restrictedLabelDomains = []string{"karpenter.sh", AWSGroup}

// celKarpenterLabels are the karpenter.sh keys the CEL rule "label domain
// "karpenter.sh" is restricted" lets through.
var celKarpenterLabels = []string{CapacityTypeLabelKey, NodePoolLabelKey}

// celAWSLabels are the karpenter.k8s.aws keys the CEL rule "label domain
// "karpenter.k8s.aws" is restricted" lets through (the provider CRD's list).
var celAWSLabels = []string{
	"karpenter.k8s.aws/instance-tenancy", CapacityReservationTypeLabelKey, CapacityReservationIDLabelKey,
	CapacityReservationInterruptibleLabelKey, NodeClassLabelKey,
	"karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category",
	"karpenter.k8s.aws/instance-hypervisor", "karpenter.k8s.aws/instance-family",
	"karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-local-nvme",
	"karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-cpu",
	"karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
	"karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth",
	"karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name",
	"karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count",
	"karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name",
	"karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count",
	"karpenter.k8s.aws/instance-capability-flex", PlacementGroupIDLabelKey, PlacementGroupPartitionLabelKey,
}

// wellKnownLabels are Karpenter's WellKnownLabels as the AWS provider
// extends them: the CEL list above without karpenter.k8s.aws/ec2nodeclass,
// plus core's keys and topology.k8s.aws/zone-id. IsRestrictedLabel lets
// these through whatever their domain.
var wellKnownLabels = func() []string {
	out := []string{
		NodePoolLabelKey, corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelInstanceTypeStable,
		corev1.LabelArchStable, corev1.LabelOSStable, CapacityTypeLabelKey, corev1.LabelWindowsBuild,
		"topology.k8s.aws/zone-id",
	}
	for _, k := range celAWSLabels {
		if k != NodeClassLabelKey {
			out = append(out, k)
		}
	}
	return out
}()

// normalizedLabels are Karpenter's NormalizedLabels: the beta twins a
// requirement may name, validated (and scheduled) as their stable keys.
var normalizedLabels = map[string]string{
	corev1.LabelFailureDomainBetaZone:   corev1.LabelTopologyZone,
	"beta.kubernetes.io/arch":           corev1.LabelArchStable,
	"beta.kubernetes.io/os":             corev1.LabelOSStable,
	corev1.LabelInstanceType:            corev1.LabelInstanceTypeStable,
	corev1.LabelFailureDomainBetaRegion: corev1.LabelTopologyRegion,
}

// NormalizedLabelKey returns the stable key Karpenter reads a beta label
// key as (NormalizedLabels), or key itself.
func NormalizedLabelKey(key string) string {
	if n, ok := normalizedLabels[key]; ok {
		return n
	}
	return key
}

// wellKnownValues are Karpenter's WellKnownValuesForRequirements (core's
// capacity types, the provider's tenancies): an In requirement on one of
// these keys needs at least one of them.
var wellKnownValues = map[string][]string{
	CapacityTypeLabelKey:                 {CapacityTypeOnDemand, CapacityTypeReserved, CapacityTypeSpot},
	"karpenter.k8s.aws/instance-tenancy": {"dedicated", "default"},
}

// labelKeyProblems returns every rule a template label key or requirement
// key breaks, CEL's first (with its messages), then the runtime rule when
// CEL let the key through.
func labelKeyProblems(key string) []string {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return []string{fmt.Sprintf("%q is not a valid label key: %s", key, strings.Join(errs, "; "))}
	}
	// CEL's x.find("^([^/]+)"): the prefix, or the whole key without one.
	domain, _, _ := strings.Cut(key, "/")
	var out []string
	if !slices.Contains(celKarpenterLabels, key) && strings.HasSuffix(domain, "karpenter.sh") {
		out = append(out, `label domain "karpenter.sh" is restricted`)
	}
	if key == NodePoolLabelKey {
		out = append(out, `label "karpenter.sh/nodepool" is restricted`)
	}
	if key == corev1.LabelHostname {
		out = append(out, `label "kubernetes.io/hostname" is restricted`)
	}
	if !slices.Contains(celAWSLabels, key) && strings.HasSuffix(domain, AWSGroup) {
		out = append(out, `label domain "karpenter.k8s.aws" is restricted`)
	}
	if len(out) == 0 && runtimeRestricted(NormalizedLabelKey(key)) {
		out = append(out, fmt.Sprintf("using label %s is not allowed as it might interfere with the internal provisioning logic; "+
			"specify a well known label, or a custom label that does not use a restricted domain: %s",
			key, strings.Join(restrictedLabelDomains, ", ")))
	}
	return out
}

// runtimeRestricted is Karpenter's IsRestrictedLabel: a key that is not
// well known, in (or under) a restricted domain, or a restricted label.
func runtimeRestricted(key string) bool {
	if slices.Contains(wellKnownLabels, key) {
		return false
	}
	domain, _, ok := strings.Cut(key, "/")
	if ok {
		for _, d := range restrictedLabelDomains {
			if domain == d || strings.HasSuffix(domain, "."+d) {
				return true
			}
		}
	}
	return key == corev1.LabelHostname
}

// wellKnownValueProblem is Karpenter's validateWellKnownValues for an In
// requirement: it fails when none of its values is one the key takes, or
// fewer than its minValues are. Some unknown values beside known ones are
// only logged there (lintNodePool warns about them).
func wellKnownValueProblem(r NodeSelectorRequirementWithMinValues) string {
	key := NormalizedLabelKey(r.Key)
	known, ok := wellKnownValues[key]
	if !ok || r.Operator != corev1.NodeSelectorOpIn {
		return ""
	}
	valid := 0
	for _, v := range r.Values {
		if slices.Contains(known, v) {
			valid++
		}
	}
	switch {
	case valid == 0:
		return fmt.Sprintf("no valid values found in %s for %s, expected one of: %s", quoteList(r.Values), key, strings.Join(known, ", "))
	case r.MinValues != nil && valid < *r.MinValues:
		return fmt.Sprintf("not enough valid values found in %s for %s, expected at least %d valid values from: %s, got: %d",
			quoteList(r.Values), key, *r.MinValues, strings.Join(known, ", "), valid)
	}
	return ""
}
