package pods

import (
	"fmt"
	"math"
	"strconv"
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

// EvictionCost is Karpenter's cost of evicting one pod: 1, plus its
// controller.kubernetes.io/pod-deletion-cost / 2^27, plus its priority /
// 2^25, clamped to [-10, 10].
func EvictionCost(p *corev1.Pod) float64 {
	cost := 1.0
	if v, ok := p.Annotations["controller.kubernetes.io/pod-deletion-cost"]; ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			cost += f / math.Pow(2, 27)
		}
	}
	if p.Spec.Priority != nil {
		cost += float64(*p.Spec.Priority) / math.Pow(2, 25)
	}
	return math.Max(-10, math.Min(10, cost))
}

// DisruptionCost is Karpenter's cost of disrupting a node: its pods'
// eviction costs, scaled by the fraction of the claim's lifetime left (a
// node about to expire costs little to disrupt now).
func DisruptionCost(pods []*corev1.Pod, cl *apis.NodeClaim, now time.Time) float64 {
	sum := 0.0
	for _, p := range pods {
		sum += EvictionCost(p)
	}
	if ttl, ok := cl.Spec.ExpireAfter.Get(); ok && ttl > 0 && !cl.CreationTimestamp.IsZero() {
		left := 1 - float64(now.Sub(cl.CreationTimestamp.Time))/float64(ttl)
		sum *= math.Max(0, math.Min(1, left))
	}
	return sum
}
