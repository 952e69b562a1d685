package termination

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/pods"
)

// attachedVolumes counts the node's VolumeAttachments the drain must wait
// for: those of volumes used by pods that stay on the node (tolerating or
// static pods, which are never evicted) are ignored, as Karpenter does.
func (t *Terminator) attachedVolumes(ctx context.Context, node *corev1.Node) (int, error) {
	vas, err := t.d.Cluster.VolumeAttachmentsOnNode(ctx, node.Name)
	if err != nil {
		return 0, fmt.Errorf("volume attachments of node %s: %w", node.Name, err)
	}
	if len(vas) == 0 {
		return 0, nil
	}
	onNode, err := t.d.Cluster.PodsOnNode(ctx, node.Name)
	if err != nil {
		return 0, fmt.Errorf("pods of node %s: %w", node.Name, err)
	}
	staying, err := t.stayingVolumes(ctx, onNode)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, va := range vas {
		if pv := va.Spec.Source.PersistentVolumeName; pv != nil && staying[*pv] {
			continue
		}
		n++
	}
	return n, nil
}

// stayingVolumes are the PersistentVolumes claimed by the pods that stay on
// the node to the end.
func (t *Terminator) stayingVolumes(ctx context.Context, onNode []*corev1.Pod) (map[string]bool, error) {
	staying := map[string]bool{}
	for _, p := range onNode {
		if !pods.ToleratesDisrupted(p) && !pods.IsMirrorOrStatic(p) {
			continue
		}
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			pv, err := t.d.Cluster.PVCVolumeName(ctx, p.Namespace, v.PersistentVolumeClaim.ClaimName)
			if errors.Is(err, kube.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if pv != "" {
				staying[pv] = true
			}
		}
	}
	return staying, nil
}
