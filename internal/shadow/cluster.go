package shadow

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/kube"
)

// Cluster is a *kube.Client whose writes do nothing: reads go to the API
// server, Events are dropped (the provisioner's nominations are told to
// the Recorder), and every Node or Pod write returns ErrShadow.
type Cluster struct {
	*kube.Client
	Recorder *Recorder
}

// Clientset is not handed out: a caller could write with it.
func (c *Cluster) Clientset() kubernetes.Interface { return nil }

// Snapshot reads the cluster and tells the recorder what was pending.
func (c *Cluster) Snapshot(ctx context.Context, opts kube.SnapshotOptions) (*kube.Snapshot, error) {
	snap, err := c.Client.Snapshot(ctx, opts)
	if err == nil && c.Recorder != nil && (opts.Parts == 0 || opts.Parts&kube.PartPendingPods != 0) {
		c.Recorder.pending(snap)
	}
	return snap, err
}

// Event records nothing.
func (c *Cluster) Event(context.Context, corev1.ObjectReference, string, string, string) error {
	return nil
}

// PodEvent records nothing; a nomination onto a NodeClaim goes to the
// recorder.
func (c *Cluster) PodEvent(_ context.Context, p *corev1.Pod, _, reason, format string, args ...any) error {
	if c.Recorder != nil && reason == reasonNominated {
		c.Recorder.nominated(p, fmt.Sprintf(format, args...))
	}
	return nil
}

// NodeEvent records nothing.
func (c *Cluster) NodeEvent(context.Context, *corev1.Node, string, string, string, ...any) error {
	return nil
}

// AddNodeFinalizer refuses.
func (c *Cluster) AddNodeFinalizer(context.Context, string, string) (*corev1.Node, error) {
	return nil, ErrShadow
}

// ReleaseNode refuses.
func (c *Cluster) ReleaseNode(context.Context, string, types.UID) error { return ErrShadow }

// PatchNodeLabels refuses.
func (c *Cluster) PatchNodeLabels(context.Context, string, map[string]string, []string) (*corev1.Node, error) {
	return nil, ErrShadow
}

// PatchNodeAnnotations refuses.
func (c *Cluster) PatchNodeAnnotations(context.Context, string, map[string]string, []string) (*corev1.Node, error) {
	return nil, ErrShadow
}

// Cordon refuses.
func (c *Cluster) Cordon(context.Context, string) (*corev1.Node, error) { return nil, ErrShadow }

// Uncordon refuses.
func (c *Cluster) Uncordon(context.Context, string) (*corev1.Node, error) { return nil, ErrShadow }

// UpdateNodeTaints refuses.
func (c *Cluster) UpdateNodeTaints(context.Context, string, func([]corev1.Taint) ([]corev1.Taint, bool)) (*corev1.Node, error) {
	return nil, ErrShadow
}

// AddTaint refuses.
func (c *Cluster) AddTaint(context.Context, string, corev1.Taint) (*corev1.Node, error) {
	return nil, ErrShadow
}

// RemoveTaints refuses.
func (c *Cluster) RemoveTaints(context.Context, string, string, corev1.TaintEffect) (*corev1.Node, error) {
	return nil, ErrShadow
}

// Evict refuses.
func (c *Cluster) Evict(context.Context, *corev1.Pod, kube.EvictOptions) error { return ErrShadow }

// DeletePod refuses.
func (c *Cluster) DeletePod(context.Context, *corev1.Pod, *int64) error { return ErrShadow }

// DeleteNode refuses.
func (c *Cluster) DeleteNode(context.Context, string, types.UID) error { return ErrShadow }
