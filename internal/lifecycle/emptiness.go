package lifecycle

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/pods"
)

// AnnotationPodSet holds a digest of the pods bound to a claim's node the
// last time the lifecycle looked. When the digest changes the lifecycle
// moves status.lastPodEventTime to that moment, which is Karpenter's
// "consolidateAfter since the last pod event" clock without watching pods:
// an observed change is never earlier than the real one, so a node is never
// found consolidatable too soon.
const AnnotationPodSet = "nodewright.io/pod-set"

// PodSetDigest is the digest AnnotationPodSet holds: the UIDs of the node's
// non-terminal pods, order-independent.
func PodSetDigest(pods []*corev1.Pod) string {
	uids := make([]string, 0, len(pods))
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		uids = append(uids, string(p.UID))
	}
	sort.Strings(uids)
	h := sha256.New()
	for _, u := range uids {
		h.Write([]byte(u))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// EmptinessCheck is the outcome of EmptyCandidate.
type EmptinessCheck struct {
	// Candidate: the node may be deleted for emptiness now (budgets aside).
	Candidate bool
	// Reason says why not (empty string when Candidate).
	Reason string
	// Wait, when > 0, is how long until the node becomes a candidate if
	// nothing changes (consolidateAfter still running).
	Wait time.Duration
}

// EmptyCandidate decides whether an initialized claim's node is an
// emptiness candidate at now under its NodePool's disruption settings:
// the pool consolidates (any policy; emptiness is part of both) and is not
// static, consolidateAfter is not Never and has elapsed since the last pod
// event, the node is empty, and nothing says do-not-disrupt. Budgets are checked
// separately (AllowedDisruptions), since they depend on the whole pool.
func EmptyCandidate(cl *apis.NodeClaim, np *apis.NodePool, node *corev1.Node, nodePods []*corev1.Pod, now time.Time) EmptinessCheck {
	switch {
	case np == nil:
		return EmptinessCheck{Reason: "its NodePool is not configured"}
	case np.Static():
		// Karpenter never consolidates a static pool (spec.replicas): its
		// nodes stay, empty or not.
		return EmptinessCheck{Reason: "its NodePool is static"}
	case cl.Deleting():
		return EmptinessCheck{Reason: "already deleting"}
	case cl.IsTrue(apis.ConditionDisrupting):
		// The disruption controller is replacing it and deletes it itself.
		return EmptinessCheck{Reason: "already being disrupted"}
	case !cl.IsTrue(apis.ConditionInitialized):
		return EmptinessCheck{Reason: "not initialized"}
	case node == nil:
		return EmptinessCheck{Reason: "no node"}
	}
	after, ok := np.Spec.Disruption.ConsolidateAfter.Get()
	if !ok {
		return EmptinessCheck{Reason: "consolidateAfter is Never"}
	}
	if !pods.Empty(nodePods) {
		return EmptinessCheck{Reason: "not empty"}
	}
	if blocked, why := pods.DoNotDisrupt(cl, node, nodePods, now); blocked {
		return EmptinessCheck{Reason: why}
	}
	if wait := pods.LastPodEvent(cl).Add(after).Sub(now); wait > 0 {
		return EmptinessCheck{Reason: "consolidateAfter has not elapsed", Wait: wait}
	}
	return EmptinessCheck{Candidate: true}
}

// AllowedDisruptions is how many more of a pool's nodes may be disrupted for
// reason right now: the minimum of its active budgets over the pool's
// nodes, minus the nodes already being deleted, those the disruption
// controller is replacing (Disrupting: they go once their replacement is
// up) and the NotReady ones, as Karpenter counts all three against the
// budget. claims are the pool's live claims, ready tells whether a claim's
// node is Ready.
func AllowedDisruptions(np *apis.NodePool, claims []*apis.NodeClaim, ready func(*apis.NodeClaim) bool, reason apis.DisruptionReason, now time.Time) (int, error) {
	total := len(claims)
	allowed, err := np.Spec.Disruption.AllowedDisruptions(now, reason, total)
	if err != nil {
		return 0, fmt.Errorf("nodepool %s: %w", np.Name, err)
	}
	for _, cl := range claims {
		if cl.Deleting() || cl.IsTrue(apis.ConditionDisrupting) || (cl.IsTrue(apis.ConditionInitialized) && !ready(cl)) {
			allowed--
		}
	}
	return max(allowed, 0), nil
}
