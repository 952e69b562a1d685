package demo

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// podCounts summarises the demo's pods.
type podCounts struct {
	Total, New, Unschedulable, Starting, Running, Terminating int
}

func countPods(pods []corev1.Pod) podCounts {
	var c podCounts
	for i := range pods {
		p := &pods[i]
		c.Total++
		switch {
		case p.DeletionTimestamp != nil:
			c.Terminating++
		case p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "":
			c.Running++
		case p.Spec.NodeName == "" && unschedulable(p):
			c.Unschedulable++
		case p.Spec.NodeName == "":
			c.New++
		default:
			c.Starting++
		}
	}
	return c
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

func (c podCounts) String() string {
	parts := []string{fmt.Sprintf("%d pods", c.Total)}
	if c.New > 0 {
		parts = append(parts, fmt.Sprintf("%d pending (not yet scheduled)", c.New))
	}
	if c.Unschedulable > 0 {
		parts = append(parts, fmt.Sprintf("%d pending (Unschedulable)", c.Unschedulable))
	}
	if c.Starting > 0 {
		parts = append(parts, fmt.Sprintf("%d bound, starting", c.Starting))
	}
	parts = append(parts, fmt.Sprintf("%d Running", c.Running))
	if c.Terminating > 0 {
		parts = append(parts, fmt.Sprintf("%d terminating", c.Terminating))
	}
	return strings.Join(parts, ", ")
}

// nodeReady reports the Ready condition of a Node.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
