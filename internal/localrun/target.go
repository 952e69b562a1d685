package localrun

import (
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

// discoveryTag is the tag the simulator puts on its subnets and security
// groups, valued with the cluster's name, as EKS guides tag them.
const discoveryTag = "karpenter.sh/discovery"

// Target is the cloud a user's configuration expects: the cluster its
// EC2NodeClasses discover (by karpenter.sh/discovery), the region of the
// zones its NodePools name and the node role its EC2NodeClasses pass.
// Empty fields were not found (or disagree) and keep their defaults.
type Target struct {
	ClusterName, Region, NodeRole string
}

// TargetOf reads the Target from a loaded configuration, so that the
// simulator's subnets, zones and roles match what the user wrote.
func TargetOf(cfg *apis.Config) Target {
	var clusters, regions, roles []string
	for _, nc := range cfg.NodeClasses {
		for _, t := range nc.Spec.SubnetSelectorTerms {
			clusters = append(clusters, t.Tags[discoveryTag])
		}
		for _, t := range nc.Spec.SecurityGroupSelectorTerms {
			clusters = append(clusters, t.Tags[discoveryTag])
		}
		roles = append(roles, nc.Spec.Role)
	}
	for _, np := range cfg.NodePools {
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.Key != corev1.LabelTopologyZone || r.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			for _, z := range r.Values {
				if len(z) > 1 {
					regions = append(regions, strings.TrimRight(z[:len(z)-1], "-"))
				}
			}
		}
	}
	return Target{ClusterName: only(clusters), Region: only(regions), NodeRole: only(roles)}
}

// only returns the one non-empty value of vs, or "" when there is none or
// more than one.
func only(vs []string) string {
	one := ""
	for _, v := range vs {
		switch {
		case v == "" || v == one:
		case one == "":
			one = v
		default:
			return ""
		}
	}
	if strings.Contains(one, "${") { // an unexpanded envsubst placeholder
		return ""
	}
	return one
}
