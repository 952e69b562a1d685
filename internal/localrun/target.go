package localrun

import (
	"strings"

	"github.com/nodewright/nodewright/internal/apis"
)

// discoveryTag is the tag the simulator puts on its subnets and security
// groups, valued with the cluster's name, as EKS guides tag them.
const discoveryTag = "karpenter.sh/discovery"

// Target is the cloud a user's configuration expects: the cluster its
// EC2NodeClasses discover (by karpenter.sh/discovery) and the node role
// they pass. Empty fields were not found (or disagree) and keep their
// defaults. (The region is simulation.ZoneRegion's.)
type Target struct {
	ClusterName, NodeRole string
}

// TargetOf reads the Target from a loaded configuration, so that the
// simulator's subnets, zones and roles match what the user wrote.
func TargetOf(cfg *apis.Config) Target {
	var clusters, roles []string
	for _, nc := range cfg.NodeClasses {
		for _, t := range nc.Spec.SubnetSelectorTerms {
			clusters = append(clusters, t.Tags[discoveryTag])
		}
		for _, t := range nc.Spec.SecurityGroupSelectorTerms {
			clusters = append(clusters, t.Tags[discoveryTag])
		}
		roles = append(roles, nc.Spec.Role)
	}
	return Target{ClusterName: only(clusters), NodeRole: only(roles)}
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
