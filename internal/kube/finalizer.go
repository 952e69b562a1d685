package kube

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
)

// AddNodeFinalizer puts finalizer on the node if it is missing. A strategic
// merge patch unions the finalizer list on the server, so a finalizer
// another controller adds meanwhile is never lost.
func (c *Client) AddNodeFinalizer(ctx context.Context, node, finalizer string) (*corev1.Node, error) {
	return c.strategicPatchNode(ctx, node, map[string]any{"metadata": map[string]any{"finalizers": []string{finalizer}}}, "add finalizer to")
}

// ReleaseNode deletes a Node nodewright has finished with (drained, or its
// instance gone): it takes nodewright's termination finalizer off, then
// deletes the Node (uid, when set, guards against a Node re-created under
// the same name). Only for nodewright's own Nodes: the finalizer has
// Karpenter's name, and another autoscaler's Node keeps its own. A Node
// already gone counts as released.
func (c *Client) ReleaseNode(ctx context.Context, name string, uid types.UID) error {
	patch := map[string]any{"metadata": map[string]any{"$deleteFromPrimitiveList/finalizers": []string{apis.TerminationFinalizer}}}
	if _, err := c.strategicPatchNode(ctx, name, patch, "remove finalizer from"); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return c.DeleteNode(ctx, name, uid)
}

// strategicPatchNode: a strategic merge patch unions or prunes list items
// (finalizers) on the server, where a merge patch would replace the list.
func (c *Client) strategicPatchNode(ctx context.Context, node string, patch map[string]any, what string) (*corev1.Node, error) {
	return c.patchNode(ctx, node, types.StrategicMergePatchType, patch, what)
}
