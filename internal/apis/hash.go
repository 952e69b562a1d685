package apis

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Hash versions; bump one when the hashed field set changes so that stored
// hashes of another version are not mistaken for drift.
const (
	NodePoolHashVersion  = "v1"
	NodeClassHashVersion = "v1"
)

// Hash returns a stable hash of the NodePool fields whose change makes
// existing nodes drift ("static drift"). Like Karpenter it hashes only
// spec.template and leaves out:
//   - spec.disruption, spec.limits and spec.weight (they never change nodes);
//   - spec.template.spec.requirements (checked against each node's labels
//     separately, so widening requirements does not replace nodes).
//
// Taints and startupTaints are hashed as sets (order does not matter); map
// keys are ordered, so equal specs hash equally across processes.
func (np *NodePool) Hash() string {
	t := np.Spec.Template
	view := struct {
		Labels                 map[string]string   `json:"labels,omitempty"`
		Annotations            map[string]string   `json:"annotations,omitempty"`
		Taints                 []corev1.Taint      `json:"taints,omitempty"`
		StartupTaints          []corev1.Taint      `json:"startupTaints,omitempty"`
		NodeClassRef           *NodeClassReference `json:"nodeClassRef,omitempty"`
		ExpireAfter            NillableDuration    `json:"expireAfter,omitzero"`
		TerminationGracePeriod string              `json:"terminationGracePeriod,omitempty"`
	}{
		Labels:        t.ObjectMeta.Labels,
		Annotations:   t.ObjectMeta.Annotations,
		Taints:        sortedTaints(t.Spec.Taints),
		StartupTaints: sortedTaints(t.Spec.StartupTaints),
		NodeClassRef:  t.Spec.NodeClassRef,
		ExpireAfter:   t.Spec.ExpireAfter,
	}
	if t.Spec.TerminationGracePeriod != nil {
		view.TerminationGracePeriod = t.Spec.TerminationGracePeriod.Duration.String()
	}
	return hashOf(view)
}

// Hash returns a stable hash of the EC2NodeClass fields whose change makes
// existing nodes drift. It leaves out subnetSelectorTerms,
// securityGroupSelectorTerms, amiSelectorTerms and
// capacityReservationSelectorTerms: those drift by what they resolve to (a
// node's subnet, security groups, AMI, reservation), not by how they are
// written; Karpenter leaves ipPrefixCount out of its hash too. Everything else in spec (amiFamily, userData, role,
// instanceProfile, tags, kubelet, blockDeviceMappings, metadataOptions,
// detailedMonitoring, associatePublicIPAddress, instanceStorePolicy, context,
// placementGroupSelector, networkInterfaces, connectionTracking, cpuOptions)
// is hashed.
func (nc *EC2NodeClass) Hash() string {
	s := nc.Spec
	s.SubnetSelectorTerms = nil
	s.SecurityGroupSelectorTerms = nil
	s.AMISelectorTerms = nil
	s.CapacityReservationSelectorTerms = nil
	s.IPPrefixCount = nil
	// The family is hashed as resolved, so spelling it via amiFamily or via
	// an alias of the same family does not count as drift.
	if fam := nc.AMIFamily(); fam != "" {
		s.AMIFamily = &fam
	}
	return hashOf(s)
}

func sortedTaints(ts []corev1.Taint) []corev1.Taint {
	if len(ts) == 0 {
		return nil
	}
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b corev1.Taint) int {
		if c := cmpStr(a.Key, b.Key); c != 0 {
			return c
		}
		if c := cmpStr(string(a.Effect), string(b.Effect)); c != 0 {
			return c
		}
		return cmpStr(a.Value, b.Value)
	})
	return out
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// hashOf hashes the canonical JSON of v (encoding/json orders map keys).
func hashOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain data types reach here; a failure is a programming error.
		panic(fmt.Sprintf("apis: hash: %v", err))
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 10)
}
