package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// observeNode reads the claim's Node (nil while none has registered);
// the phases after it work on that copy.
func (c *Controller) observeNode(ctx context.Context, s *claimState) (bool, error) {
	node, err := s.v.node(ctx, s.cl)
	if err != nil {
		return true, fmt.Errorf("lifecycle: nodeclaim %s: %w", s.cl.Name, err)
	}
	s.node = node
	return false, nil
}

// registration registers a launched claim once its Node appears: the
// claim's labels and taints go onto the Node and the claim records it.
// Until the Node appears the claim waits, up to the registration TTL
// (awaitRegistration).
func (c *Controller) registration(ctx context.Context, s *claimState) (bool, error) {
	if s.cl.IsTrue(apis.ConditionRegistered) {
		return false, nil
	}
	if s.node == nil {
		return c.awaitRegistration(ctx, s)
	}
	cl, err := c.register(ctx, s.log, s.cl, s.node)
	if err != nil {
		return true, err
	}
	s.cl, s.out.Action = cl, ActionRegistered
	// The node object changed; re-read it for initialization.
	if s.node, err = s.v.node(ctx, s.cl); err != nil || s.node == nil {
		s.out.RequeueAfter = c.s.Poll
		return true, err
	}
	return false, nil
}

// RegistrationLabels are the labels registration puts on the Node: the
// claim's labels (NodePool template labels, the nodepool, the launched
// instance type / zone / capacity type), its single-valued In requirements,
// and karpenter.sh/registered.
func RegistrationLabels(cl *apis.NodeClaim) map[string]string {
	labels := nwaws.NodeLabels(cl, cl.Labels[apis.CapacityTypeLabelKey])
	maps.Copy(labels, cl.Labels)
	labels[apis.NodeRegisteredLabel] = "true"
	return labels
}

// keepFinalizer puts the termination finalizer on a registered Node that
// lacks it: one registered by a nodewright from before the finalizer, or
// whose finalizer someone removed. Without it `kubectl delete node` would
// drop the pods instead of draining them.
func (c *Controller) keepFinalizer(ctx context.Context, s *claimState) (bool, error) {
	if s.node == nil || s.node.DeletionTimestamp != nil || slices.Contains(s.node.Finalizers, apis.TerminationFinalizer) {
		return false, nil
	}
	node, err := c.d.Cluster.AddNodeFinalizer(ctx, s.node.Name, apis.TerminationFinalizer)
	if err != nil {
		return true, fmt.Errorf("lifecycle: nodeclaim %s: finalizer on node %s: %w", s.cl.Name, s.node.Name, err)
	}
	s.node = node
	return false, nil
}

// RegistrationAnnotations are the annotations registration puts on the
// Node, as Karpenter does: the claim's annotations (the NodePool
// template's, karpenter.sh/nodepool-hash, karpenter.k8s.aws/ec2nodeclass-hash)
// but not nodewright's own bookkeeping (nodewright.io/...), which lives on
// the claim and means nothing on a Node.
func RegistrationAnnotations(cl *apis.NodeClaim) map[string]string {
	out := map[string]string{}
	for k, v := range cl.Annotations {
		if !strings.HasPrefix(k, apis.NodewrightPrefix) {
			out[k] = v
		}
	}
	return out
}

// register puts Karpenter's termination finalizer on the claim's Node,
// syncs the claim's annotations, labels and taints onto it, removes the
// unregistered taint and records the registration. Labels go first: the
// unregistered taint is what keeps pods off a node whose labels are not yet
// the claim's, so it is removed only once they are.
func (c *Controller) register(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, node *corev1.Node) (*apis.NodeClaim, error) {
	// Registration finished earlier only if the unregistered taint is gone
	// too (a crash between the two writes leaves the label without it).
	finished := node.Labels[apis.NodeRegisteredLabel] == "true" && !hasTaint(node, apis.UnregisteredTaintKey)
	// The finalizer first: from here on a `kubectl delete node` waits for
	// the graceful drain (nodeDeleting) instead of dropping the pods.
	if !slices.Contains(node.Finalizers, apis.TerminationFinalizer) {
		if _, err := c.d.Cluster.AddNodeFinalizer(ctx, node.Name, apis.TerminationFinalizer); err != nil {
			return nil, fmt.Errorf("lifecycle: register node %s: finalizer: %w", node.Name, err)
		}
	}
	if ann := RegistrationAnnotations(cl); len(ann) > 0 {
		if _, err := c.d.Cluster.PatchNodeAnnotations(ctx, node.Name, ann, nil); err != nil {
			return nil, fmt.Errorf("lifecycle: register node %s: annotations: %w", node.Name, err)
		}
	}
	if _, err := c.d.Cluster.PatchNodeLabels(ctx, node.Name, RegistrationLabels(cl), nil); err != nil {
		return nil, fmt.Errorf("lifecycle: register node %s: labels: %w", node.Name, err)
	}
	taints, startup := RegistrationTaints(node, cl)
	_, err := c.d.Cluster.UpdateNodeTaints(ctx, node.Name, func(cur []corev1.Taint) ([]corev1.Taint, bool) {
		return MergeRegistrationTaints(cur, taints, startup, finished)
	})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: register node %s: taints: %w", node.Name, err)
	}
	now := metav1.NewTime(c.d.Now())
	updated, err := c.d.Store.MutateNodeClaim(ctx, cl.Name, func(x *apis.NodeClaim) error {
		x.Status.NodeName = node.Name
		if x.Status.ProviderID == "" {
			x.Status.ProviderID = node.Spec.ProviderID
		}
		x.SetCondition(apis.ConditionRegistered, metav1.ConditionTrue, "Registered", "node "+node.Name, now)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: record registration of nodeclaim %s: %w", cl.Name, err)
	}
	log.InfoContext(ctx, "node registered", "node", node.Name, "after-launch",
		now.Sub(cl.Condition(apis.ConditionLaunched).LastTransitionTime.Time).Round(time.Millisecond).String())
	return updated, nil
}

// RegistrationTaints are the claim's taints and startup taints that
// registration puts on the node: none on a node labelled
// karpenter.sh/do-not-sync-taints, whose kubelet registered them itself
// (every AMI family but Custom): a startup taint its agent removed before
// registration ran must not come back (kubernetes-sigs/karpenter #1772).
func RegistrationTaints(node *corev1.Node, cl *apis.NodeClaim) (taints, startup []corev1.Taint) {
	if node.Labels[nwaws.LabelDoNotSyncTaints] == "true" {
		return nil, nil
	}
	return cl.Spec.Taints, cl.Spec.StartupTaints
}

// MergeRegistrationTaints is the node's taint list after registration:
// karpenter.sh/unregistered removed, and the claim's taints added when
// missing (same key and effect). Startup taints are added only while the
// node is not yet labelled registered: afterwards its agent may have removed
// them on purpose.
func MergeRegistrationTaints(cur, taints, startup []corev1.Taint, alreadyRegistered bool) ([]corev1.Taint, bool) {
	out := make([]corev1.Taint, 0, len(cur)+len(taints)+len(startup))
	changed := false
	for _, t := range cur {
		if t.Key == apis.UnregisteredTaintKey {
			changed = true
			continue
		}
		out = append(out, t)
	}
	want := taints
	if !alreadyRegistered {
		want = append(append([]corev1.Taint(nil), taints...), startup...)
	}
	for _, w := range want {
		found := false
		for _, t := range out {
			if t.Key == w.Key && t.Effect == w.Effect {
				found = true
				break
			}
		}
		if !found {
			out = append(out, w)
			changed = true
		}
	}
	return out, changed
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
