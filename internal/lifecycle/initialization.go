package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/store"
)

// initialization records a registered claim's initialization once its
// Node is (Initialized); until then the claim is looked at again on the
// poll schedule counted from registration.
func (c *Controller) initialization(ctx context.Context, s *claimState) (bool, error) {
	if s.cl.IsTrue(apis.ConditionInitialized) {
		return false, nil
	}
	if ok, why := Initialized(s.cl, s.node); !ok {
		s.log.DebugContext(ctx, "waiting for initialization", "node", s.node.Name, "why", why)
		if s.out.Action == "" {
			s.out.Action = ActionWaiting
		}
		since := s.launchedAt
		if r := s.cl.Condition(apis.ConditionRegistered); r != nil {
			since = r.LastTransitionTime.Time
		}
		s.out.RequeueAfter = c.poll(since, s.now)
		return true, nil
	}
	cl, err := c.initialize(ctx, s.log, s.cl, s.node)
	if err != nil {
		return true, err
	}
	s.cl, s.out.Action = cl, ActionInitialized
	return false, nil
}

// Initialized reports whether a registered claim's node is initialized
// (Karpenter's rules): Ready, none of the claim's startup taints left, none
// of the taints a node carries while coming up (karpenter.sh/unregistered,
// not-ready and the like: the node lifecycle controller removes not-ready a
// moment after Ready, and a node initialized before that would look tainted
// to the provisioner), and every extended resource the claim asked for
// registered in allocatable. why says what is missing.
func Initialized(cl *apis.NodeClaim, node *corev1.Node) (bool, string) {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return false, "node not Ready"
	}
	for _, t := range node.Spec.Taints {
		if t.Key == apis.UnregisteredTaintKey {
			return false, "unregistered taint present"
		}
		if scheduling.IsEphemeralTaint(t) {
			return false, "taint " + t.Key + " present"
		}
		for _, st := range cl.Spec.StartupTaints {
			if t.Key == st.Key && t.Effect == st.Effect {
				return false, "startup taint " + st.Key + " present"
			}
		}
	}
	for name, q := range cl.Spec.Resources.Requests {
		if !extended(name) || q.IsZero() {
			continue
		}
		if alloc, ok := node.Status.Allocatable[name]; !ok || alloc.IsZero() {
			return false, "extended resource " + string(name) + " not registered"
		}
	}
	return true, ""
}

func extended(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, corev1.ResourcePods, corev1.ResourceStorage:
		return false
	}
	return true
}

// initialize records initialization, labels the node and stores its
// measured allocatable for the instance type.
func (c *Controller) initialize(ctx context.Context, log *slog.Logger, cl *apis.NodeClaim, node *corev1.Node) (*apis.NodeClaim, error) {
	if node.Labels[apis.NodeInitializedLabel] != "true" {
		if _, err := c.d.Cluster.PatchNodeLabels(ctx, node.Name, map[string]string{apis.NodeInitializedLabel: "true"}, nil); err != nil {
			return nil, fmt.Errorf("lifecycle: label node %s initialized: %w", node.Name, err)
		}
	}
	now := metav1.NewTime(c.d.Now())
	updated, err := c.d.Store.MutateNodeClaim(ctx, cl.Name, func(x *apis.NodeClaim) error {
		x.SetCondition(apis.ConditionInitialized, metav1.ConditionTrue, "Initialized", "node "+node.Name, now)
		if len(node.Status.Allocatable) > 0 {
			x.Status.Allocatable = node.Status.Allocatable.DeepCopy()
		}
		if len(node.Status.Capacity) > 0 {
			x.Status.Capacity = node.Status.Capacity.DeepCopy()
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lifecycle: record initialization of nodeclaim %s: %w", cl.Name, err)
	}
	if typ := node.Labels[corev1.LabelInstanceTypeStable]; typ != "" && len(node.Status.Allocatable) > 0 {
		err := c.d.Store.RecordObservedCapacity(ctx, store.ObservedCapacity{
			InstanceType: typ, Variant: cl.NodeClassHash, Capacity: node.Status.Capacity, Allocatable: node.Status.Allocatable,
			NodeName: node.Name, ObservedAt: now.Time,
		})
		if err != nil {
			log.WarnContext(ctx, "recording observed allocatable", "instance-type", typ, "error", err)
		}
	}
	log.InfoContext(ctx, "node initialized", "node", node.Name, "after-launch",
		now.Sub(cl.Condition(apis.ConditionLaunched).LastTransitionTime.Time).Round(time.Millisecond).String())
	return updated, nil
}
