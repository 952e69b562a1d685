package pods

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

// Reschedulable reports whether a bound pod would be recreated elsewhere if
// its node went away.
func Reschedulable(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" || o.Kind == "Node" {
			return false
		}
	}
	return true
}

// Empty reports whether a node has no pods that would need a new home:
// DaemonSet, static/mirror, terminating and finished pods do not count, so a
// node running only daemons is empty (Karpenter's rule).
func Empty(pods []*corev1.Pod) bool {
	for _, p := range pods {
		if Reschedulable(p) {
			return false
		}
	}
	return true
}

// LastPodEvent is when the claim's node last saw a pod come or go:
// status.lastPodEventTime, else when it was initialized, else when it was
// created.
func LastPodEvent(cl *apis.NodeClaim) time.Time {
	if !cl.Status.LastPodEventTime.IsZero() {
		return cl.Status.LastPodEventTime.Time
	}
	if c := cl.Condition(apis.ConditionInitialized); c != nil && c.Status == "True" {
		return c.LastTransitionTime.Time
	}
	return cl.CreationTimestamp.Time
}

// DoNotDisrupt reports whether karpenter.sh/do-not-disrupt protects the
// node: on the claim, on the Node, or on any of its non-terminal pods.
// Karpenter accepts "true"; a duration value (Karpenter's grace form)
// protects while the pod is younger than it.
func DoNotDisrupt(cl *apis.NodeClaim, node *corev1.Node, pods []*corev1.Pod, now time.Time) (bool, string) {
	if cl != nil && cl.Annotations[apis.DoNotDisruptAnnotKey] == "true" {
		return true, "the NodeClaim is annotated " + apis.DoNotDisruptAnnotKey
	}
	if node != nil && node.Annotations[apis.DoNotDisruptAnnotKey] == "true" {
		return true, "the node is annotated " + apis.DoNotDisruptAnnotKey
	}
	for _, p := range pods {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || p.DeletionTimestamp != nil {
			continue
		}
		v, ok := p.Annotations[apis.DoNotDisruptAnnotKey]
		if !ok {
			continue
		}
		if v == "true" {
			return true, fmt.Sprintf("pod %s/%s is annotated %s", p.Namespace, p.Name, apis.DoNotDisruptAnnotKey)
		}
		if d, err := time.ParseDuration(v); err == nil {
			start := p.CreationTimestamp.Time
			if p.Status.StartTime != nil {
				start = p.Status.StartTime.Time
			}
			if now.Before(start.Add(d)) {
				return true, fmt.Sprintf("pod %s/%s is annotated %s=%s", p.Namespace, p.Name, apis.DoNotDisruptAnnotKey, v)
			}
		}
	}
	return false, ""
}
