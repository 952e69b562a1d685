package shadow

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

// Owners of a node, as the report names them.
const (
	OwnerNodewright = "nodewright"
	OwnerKarpenter  = "karpenter"
	OwnerOther      = "other"
)

// ForeignClaimPrefix starts the names of the claims foreignClaims makes up.
const ForeignClaimPrefix = "foreign-"

// foreignClaims makes up, in memory, a NodeClaim for every node no claim of
// this stack names, so disruption's own decision can weigh it: the
// NodePool its karpenter.sh/nodepool label names when configured, else the
// first configured pool (by weight, then name) whose requirements its
// labels meet. Nodes no pool fits get none: they are priced, not
// consolidated. owner maps every node to who launched it.
func foreignClaims(nodes []*corev1.Node, claims []*apis.NodeClaim, cfg *apis.Config) (out []*apis.NodeClaim, owner map[string]string) {
	ours := map[string]bool{}
	for _, cl := range claims {
		ours[cl.Status.ProviderID] = cl.Status.ProviderID != ""
		ours[cl.Status.NodeName] = cl.Status.NodeName != ""
	}
	owner = map[string]string{}
	pools := byWeight(cfg.NodePools)
	for _, n := range nodes {
		if ours[n.Spec.ProviderID] || ours[n.Name] {
			owner[n.Name] = OwnerNodewright
			continue
		}
		owner[n.Name] = OwnerOther
		if _, ok := n.Labels[apis.NodePoolLabelKey]; ok {
			owner[n.Name] = OwnerKarpenter
		}
		if np := poolFor(n, cfg, pools); np != nil {
			out = append(out, foreignClaim(n, np, cfg.NodeClassFor(np)))
		}
	}
	return out, owner
}

func byWeight(pools []*apis.NodePool) []*apis.NodePool {
	out := append([]*apis.NodePool(nil), pools...)
	weight := func(np *apis.NodePool) int32 {
		if np.Spec.Weight == nil {
			return 0
		}
		return *np.Spec.Weight
	}
	sort.SliceStable(out, func(i, j int) bool {
		if weight(out[i]) != weight(out[j]) {
			return weight(out[i]) > weight(out[j])
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func poolFor(n *corev1.Node, cfg *apis.Config, pools []*apis.NodePool) *apis.NodePool {
	if np := cfg.NodePool(n.Labels[apis.NodePoolLabelKey]); np != nil {
		return np
	}
	for _, np := range pools {
		if labelsMeet(n.Labels, np.Spec.Template.Spec.Requirements) {
			return np
		}
	}
	return nil
}

// labelsMeet reports whether labels satisfy every requirement on a key
// they carry (a requirement on a label the node lacks is not held against
// it: other autoscalers label less than Karpenter does).
func labelsMeet(labels map[string]string, reqs []apis.NodeSelectorRequirementWithMinValues) bool {
	for _, r := range reqs {
		v, has := labels[r.Key]
		in := false
		for _, want := range r.Values {
			in = in || want == v
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			if has && !in {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if has && in {
				return false
			}
		case corev1.NodeSelectorOpDoesNotExist:
			if has {
				return false
			}
		}
	}
	return true
}

// foreignClaim is a registered, initialized claim for node n in pool np,
// its hashes the pool's and class's current ones (a node nodewright did not
// launch has no template of its own to drift from).
func foreignClaim(n *corev1.Node, np *apis.NodePool, nc *apis.EC2NodeClass) *apis.NodeClaim {
	labels := map[string]string{}
	for k, v := range n.Labels {
		labels[k] = v
	}
	labels[apis.NodePoolLabelKey] = np.Name
	annotations := map[string]string{apis.NodePoolHashAnnotKey: np.Hash()}
	tmpl := np.Spec.Template.Spec
	cl := &apis.NodeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: apis.NodePoolAPIV1, Kind: apis.NodeClaimKind},
		ObjectMeta: metav1.ObjectMeta{Name: ForeignClaimPrefix + n.Name, Labels: labels, Annotations: annotations, CreationTimestamp: n.CreationTimestamp},
		Spec: apis.NodeClaimSpec{NodeClassRef: tmpl.NodeClassRef, ExpireAfter: tmpl.ExpireAfter,
			TerminationGracePeriod: tmpl.TerminationGracePeriod},
		NodePoolHash: np.Hash(),
	}
	if nc != nil {
		annotations[apis.NodeClassHashAnnotKey] = nc.Hash()
		cl.NodeClassHash = nc.Hash()
	}
	cl.Status.ProviderID = n.Spec.ProviderID
	cl.Status.NodeName = n.Name
	cl.Status.Capacity = n.Status.Capacity
	cl.Status.Allocatable = n.Status.Allocatable
	for _, c := range []string{apis.ConditionLaunched, apis.ConditionRegistered, apis.ConditionInitialized} {
		cl.SetCondition(c, metav1.ConditionTrue, c, "a node nodewright did not launch", n.CreationTimestamp)
	}
	return cl
}
