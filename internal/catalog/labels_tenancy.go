package catalog

import "strings"

// Labels of the launch (tenancy) and of the type's name (flex) that
// Karpenter-AWS v1.14.1 sets on every type and node.
const (
	LabelInstanceTenancy        = "karpenter.k8s.aws/instance-tenancy"
	LabelInstanceCapabilityFlex = "karpenter.k8s.aws/instance-capability-flex"
)

// TenancyDefault is the tenancy nodewright launches with (the launch
// template's Placement.Tenancy, internal/aws). Karpenter-AWS offers every
// type with instance-tenancy In [default, dedicated]
// (instancetype/types.go computeRequirements), launches "default" unless a
// claim allows only "dedicated" (instance/instance.go getTenancyType) and
// labels the node with the tenancy launched (cloudprovider.go
// instanceToNodeClaim). nodewright launches shared-tenancy instances only,
// so every type carries "default"; a NodePool requiring "dedicated" finds
// no type rather than getting a shared instance labelled dedicated.
const TenancyDefault = "default"

// addLaunchLabels sets the tenancy and capability-flex labels of a type:
// flex is "true" when the family (the name before the ".") contains
// "-flex" (c7i-flex.large), "false" otherwise, as computeRequirements
// decides it.
func addLaunchLabels(l map[string]string, it *InstanceType) {
	l[LabelInstanceTenancy] = TenancyDefault
	family, _, _ := strings.Cut(it.Name, ".")
	l[LabelInstanceCapabilityFlex] = "false"
	if strings.Contains(family, "-flex") {
		l[LabelInstanceCapabilityFlex] = "true"
	}
}
