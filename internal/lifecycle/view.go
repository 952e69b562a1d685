package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// view is what a reconcile knows about the world around one claim. The
// schedule's pass fills it from one snapshot and one instance listing; a
// work message's reconcile reads just what the claim needs.
type view interface {
	node(ctx context.Context, cl *apis.NodeClaim) (*corev1.Node, error)
	pods(ctx context.Context, node string) ([]*corev1.Pod, error)
	// instance reports the claim's instance; gone is true only when EC2
	// confirms it does not exist (or is terminated / shutting down).
	instance(ctx context.Context, id string) (inst nwaws.Instance, gone bool, err error)
	poolClaims(ctx context.Context, pool string) ([]*apis.NodeClaim, error)
	nodeReady(ctx context.Context, cl *apis.NodeClaim) bool
	// impaired are the instances failing an EC2 status check, with since
	// when (nil when the controller reads none).
	impaired(ctx context.Context) (map[string]time.Time, error)
}

// lazyView reads only what one claim needs.
type lazyView struct {
	c *Controller
}

func (v *lazyView) node(ctx context.Context, cl *apis.NodeClaim) (*corev1.Node, error) {
	return v.c.d.Cluster.ClaimNode(ctx, cl)
}

func (v *lazyView) pods(ctx context.Context, node string) ([]*corev1.Pod, error) {
	return v.c.d.Cluster.PodsOnNode(ctx, node)
}

func (v *lazyView) instance(ctx context.Context, id string) (nwaws.Instance, bool, error) {
	inst, err := v.c.d.Cloud.GetInstance(ctx, id)
	if errors.Is(err, nwaws.ErrInstanceNotFound) {
		return nwaws.Instance{}, true, nil
	}
	if err != nil {
		return nwaws.Instance{}, false, fmt.Errorf("describe instance %s: %w", id, err)
	}
	return inst, instanceGone(inst.State), nil
}

func (v *lazyView) impaired(ctx context.Context) (map[string]time.Time, error) {
	if v.c.d.ImpairedInstances == nil {
		return nil, nil
	}
	out, err := v.c.d.ImpairedInstances(ctx)
	if err != nil {
		return nil, fmt.Errorf("instance status checks: %w", err)
	}
	return out, nil
}

func instanceGone(state string) bool { return state == "terminated" || state == "shutting-down" }

func (v *lazyView) poolClaims(ctx context.Context, pool string) ([]*apis.NodeClaim, error) {
	all, err := v.c.d.Store.ListNodeClaims(ctx)
	if err != nil {
		return nil, err
	}
	var out []*apis.NodeClaim
	for _, cl := range all {
		if cl.NodePoolName() == pool {
			out = append(out, cl)
		}
	}
	return out, nil
}

func (v *lazyView) nodeReady(ctx context.Context, cl *apis.NodeClaim) bool {
	n, err := v.node(ctx, cl)
	return err == nil && n != nil && ready(n)
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
