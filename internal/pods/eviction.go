package pods

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

// Evictable reports whether the drain should call the Eviction API for a
// waiting pod now: not already terminating, and not annotated
// karpenter.sh/do-not-disrupt=true (those only go when the grace period
// forces them).
func Evictable(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Annotations[apis.DoNotDisruptAnnotKey] != "true"
}

// Priority groups of the drain, evicted in this order; a group starts only
// once every pod of the earlier ones is terminating (graceful node shutdown's
// order).
const (
	GroupNonCritical = iota
	GroupNonCriticalDaemon
	GroupCritical
	GroupCriticalDaemon
)

// EvictionGroup classifies a pod into its priority group.
func EvictionGroup(p *corev1.Pod) int {
	critical := p.Spec.PriorityClassName == "system-cluster-critical" || p.Spec.PriorityClassName == "system-node-critical"
	daemon := ownedBy(p, "DaemonSet")
	switch {
	case critical && daemon:
		return GroupCriticalDaemon
	case critical:
		return GroupCritical
	case daemon:
		return GroupNonCriticalDaemon
	default:
		return GroupNonCritical
	}
}

// ForcedDeletion reports whether a waiting pod must be deleted now so that
// it is gone by the claim's deadline, and with which grace period: a pod is
// deleted once its own terminationGracePeriodSeconds no longer fits before
// the deadline, with the time that is left (0 past the deadline). A pod
// already terminating is deleted again only if its own deletion would end
// after the deadline.
func ForcedDeletion(p *corev1.Pod, deadline, now time.Time) (graceSeconds int64, due bool) {
	// Kubernetes' default terminationGracePeriodSeconds.
	podGrace := 30 * time.Second
	if p.Spec.TerminationGracePeriodSeconds != nil {
		podGrace = time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	if now.Add(podGrace).Before(deadline) {
		return 0, false
	}
	left := max(deadline.Sub(now), 0)
	if p.DeletionTimestamp != nil && !p.DeletionTimestamp.After(deadline) {
		return 0, false
	}
	return int64(left / time.Second), true
}

// ToleratesDisrupted reports whether a pod tolerates
// karpenter.sh/disrupted:NoSchedule.
func ToleratesDisrupted(p *corev1.Pod) bool {
	for _, tol := range p.Spec.Tolerations {
		if tol.Effect != "" && tol.Effect != corev1.TaintEffectNoSchedule {
			continue
		}
		switch {
		case tol.Key == "" && tol.Operator == corev1.TolerationOpExists:
			return true // tolerates everything
		case tol.Key != apis.DisruptedTaintKey:
		case tol.Operator == corev1.TolerationOpExists:
			return true
		case tol.Operator == "" || tol.Operator == corev1.TolerationOpEqual:
			if tol.Value == "" { // the taint has no value
				return true
			}
		}
	}
	return false
}

// IsMirrorOrStatic reports whether a pod is a kubelet's own (a mirror pod
// or one owned by its Node): the drain never evicts those, they die with
// the node.
func IsMirrorOrStatic(p *corev1.Pod) bool {
	if _, ok := p.Annotations[corev1.MirrorPodAnnotationKey]; ok {
		return true
	}
	return ownedBy(p, "Node")
}

func ownedBy(p *corev1.Pod, kind string) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == kind {
			return true
		}
	}
	return false
}
