package state

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/kube"
)

// SkippedPod is a listed pending pod the provisioner does not place, and why.
type SkippedPod struct {
	Pod    *corev1.Pod
	Reason string
}

// Provisionable reports whether a pending pod is the provisioner's to place
// (Karpenter's rules): unschedulable, unbound, not terminating, not waiting
// for a preemption (nominatedNodeName), not a DaemonSet or static pod.
// A non-empty reason says why not.
func Provisionable(p *corev1.Pod) (bool, string) {
	switch {
	case p.Spec.NodeName != "":
		return false, "already bound to node " + p.Spec.NodeName
	case p.DeletionTimestamp != nil:
		return false, "terminating"
	case p.Status.NominatedNodeName != "":
		return false, "preempting on node " + p.Status.NominatedNodeName
	}
	for _, o := range p.OwnerReferences {
		switch o.Kind {
		case "DaemonSet":
			return false, "owned by DaemonSet " + o.Name
		case "Node":
			return false, "static pod of node " + o.Name
		}
	}
	return true, ""
}

// addPending sorts the snapshot's pending pods into Pending and Skipped. A
// pod that is also among the bound pods was bound between the two reads
// (the provisioner takes its pending pods from the batch window's last
// listing, then the bound pods): its room is taken on its node already, and
// placing it again launched a second node for it.
func (c *Cluster) addPending(snap *kube.Snapshot) {
	bound := boundSince(snap)
	for _, p := range snap.PendingPods {
		if node, ok := bound[p.UID]; ok {
			c.Skipped = append(c.Skipped, SkippedPod{Pod: p, Reason: "bound to node " + node + " since it was listed pending"})
			continue
		}
		if ok, why := Provisionable(p); ok {
			c.Pending = append(c.Pending, p)
		} else {
			c.Skipped = append(c.Skipped, SkippedPod{Pod: p, Reason: why})
		}
	}
}

// boundSince maps each pending pod that the snapshot's bound pods also hold
// to its node. Only the pending pods are indexed: a burst is thousands of
// pods, the bound ones tens of thousands.
func boundSince(snap *kube.Snapshot) map[types.UID]string {
	if len(snap.PendingPods) == 0 || len(snap.PodsByNode) == 0 {
		return nil
	}
	pending := make(map[types.UID]bool, len(snap.PendingPods))
	for _, p := range snap.PendingPods {
		if p.UID != "" { // only a test's pod has none
			pending[p.UID] = true
		}
	}
	out := map[types.UID]string{}
	for node, pods := range snap.PodsByNode {
		for _, p := range pods {
			if pending[p.UID] {
				out[p.UID] = node
			}
		}
	}
	return out
}
