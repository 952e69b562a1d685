package aws

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/aws/userdata"
)

// NodeLabels are the labels the kubelet registers the node with: the
// claim's labels, its single-valued In requirements and the capacity type,
// minus labels the kubelet may not set on itself (it refuses to start with them).
func NodeLabels(claim *apis.NodeClaim, capacityType string) map[string]string {
	labels := map[string]string{}
	for k, v := range claim.Labels {
		labels[k] = v
	}
	for _, r := range claim.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	labels[labelCapacityType] = capacityType
	for k, v := range labels {
		// The solver rejects invalid requirements; this keeps anything that
		// slipped through from reaching --node-labels, where a "," or "="
		// in a value would smuggle in labels of its own.
		if !kubeletMaySet(k) || len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			delete(labels, k)
		}
	}
	return labels
}

// kubeletMaySet mirrors the NodeRestriction rules for self-set labels.
func kubeletMaySet(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	restricted := func(d string) bool {
		return d == "kubernetes.io" || strings.HasSuffix(d, ".kubernetes.io") || d == "k8s.io" || strings.HasSuffix(d, ".k8s.io")
	}
	if !restricted(domain) {
		return true
	}
	if domain == "kubelet.kubernetes.io" || domain == "node.kubernetes.io" ||
		strings.HasSuffix(domain, ".kubelet.kubernetes.io") || strings.HasSuffix(domain, ".node.kubernetes.io") {
		return true
	}
	switch key {
	case "kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
		"beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
		"failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
		"topology.kubernetes.io/region", "topology.kubernetes.io/zone":
		return true
	}
	return false
}

// RegisterTaints are the taints a node registers with: the NodePool's taints,
// its startup taints, and karpenter.sh/unregistered:NoExecute (removed when
// the lifecycle function registers the node).
func RegisterTaints(claim *apis.NodeClaim) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(claim.Spec.Taints)+len(claim.Spec.StartupTaints)+1)
	for _, t := range append(slices.Clone(claim.Spec.Taints), claim.Spec.StartupTaints...) {
		if !userdata.HasTaint(out, t) {
			out = append(out, t)
		}
	}
	unregistered := corev1.Taint{Key: apis.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}
	if !userdata.HasTaint(out, unregistered) {
		out = append(out, unregistered)
	}
	return out
}

// Tags are the tags of the claim's fleet, instance and volumes: the tags
// CreateFleet puts on what an instant fleet can tag.
func (p *Provider) Tags(claim *apis.NodeClaim, nc *apis.EC2NodeClass) map[string]string {
	tags := p.PoolTags(claim.NodePoolName(), nc)
	tags[TagNodeClaim] = claim.Name
	if _, ok := nc.Spec.Tags[TagName]; !ok {
		tags[TagName] = claim.Name
	}
	return tags
}

// PoolTags are the launch tags every claim of one NodePool and EC2NodeClass
// shares: the class's spec.tags under the cluster, ownership, NodePool and
// class tags. The launch templates give them to the network interfaces and
// spot instance requests their launches create: an instant fleet cannot tag
// those (CreateFleet's TagSpecifications take only fleet, instance and
// volume), and IAM authorizes the fleet's RunInstances against the request
// tags the template gives them (aws/karpenter-provider-aws #4550, PR #4911).
// They leave out the claim's own tags, so one template serves a NodePool.
func (p *Provider) PoolTags(nodePool string, nc *apis.EC2NodeClass) map[string]string {
	tags := map[string]string{}
	for k, v := range nc.Spec.Tags {
		tags[k] = v
	}
	tags[ClusterTagKey(p.opts.ClusterName)] = "owned"
	tags[TagManagedBy] = ManagedBy
	tags[TagOwner] = p.opts.Owner
	tags[TagEKSClusterName] = p.opts.ClusterName
	tags[TagNodePool] = nodePool
	tags[TagInstanceNodeClass] = nc.Name
	return tags
}

// ClientToken is the CreateFleet idempotency token of a claim's attempt:
// the same claim and attempt always send the same token, so a retried call
// after a lost response returns the instance already launched. Launch moves
// to attempt n+1 only after attempt n's response showed no instance; see
// the package doc for the one-instance-per-claim rule.
//
// It is 35 ASCII characters whatever the names (EKS allows cluster names
// of 100 characters, Kubernetes object names of 253): EC2 takes client
// tokens of "up to 64 ASCII characters" (EC2 API reference, "Ensuring
// idempotency"). Its format must not change: a claim launching across an
// upgrade would send a new token for an attempt already made and could
// launch a second instance.
func ClientToken(cluster, nodeClaim string, attempt int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", cluster, nodeClaim, attempt))
	return "nw-" + hex.EncodeToString(sum[:16])
}
