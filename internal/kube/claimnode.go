package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

// ClaimNode returns the NodeClaim's Node, or nil while it has none: the Node
// the lifecycle recorded in status.nodeName, else the claim's pool's Node
// carrying its providerID (a node that registered but was never recorded).
func (c *Client) ClaimNode(ctx context.Context, cl *apis.NodeClaim) (*corev1.Node, error) {
	selector := ""
	if pool := cl.NodePoolName(); pool != "" {
		selector = apis.NodePoolLabelKey + "=" + pool
	}
	return c.NodeFor(ctx, cl.Status.NodeName, cl.Status.ProviderID, selector)
}
