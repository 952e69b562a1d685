package scaletest

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/store"
)

// settle waits until KWOK runs every seeded pod, then runs one lifecycle
// pass, which records every node's pod set (the first look at a node
// writes its claim once): what follows starts from the steady state.
func (c *Cluster) settle() {
	start := time.Now()
	cloudtest.Eventually(c.t, "seeded pods running", 20*time.Minute, func() (bool, string) {
		l, err := c.admin.CoreV1().Pods(c.Env.Namespace).List(c.ctx, metav1.ListOptions{
			FieldSelector: "spec.nodeName!=,status.phase=Pending", Limit: 1})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == 0, "pods still pending on their nodes"
	})
	c.t.Logf("KWOK ran every pod after %s", time.Since(start).Round(time.Second))
	if _, err := c.Invoke(Lifecycle); err != nil {
		c.t.Fatalf("first lifecycle pass: %v", err)
	}
}

// Burst creates n pending pods spread over the pools, each the size of a
// seeded pod (so none fits an existing node), marked unschedulable.
func (c *Cluster) Burst(n int) {
	start := time.Now()
	g, _ := errgroup.WithContext(c.ctx)
	g.SetLimit(c.Shape.Workers)
	suffix := time.Now().UnixNano() % 1e6
	for i := range n {
		sp := c.pools[i%len(c.pools)]
		g.Go(func() error { return c.createPod(sp, fmt.Sprintf("pending-%d-%d", suffix, i), "") })
	}
	if err := g.Wait(); err != nil {
		c.t.Fatalf("pending burst: %v", err)
	}
	c.t.Logf("created %d pending pods in %s", n, time.Since(start).Round(time.Second))
}

// DeleteBurst deletes the pending pods. The API server deletes thousands
// of pods past its request timeout, and goes on after answering with a
// timeout; then the harness waits until they are gone.
func (c *Cluster) DeleteBurst() {
	grace := int64(0)
	pods := c.admin.CoreV1().Pods(c.Env.Namespace)
	pending := metav1.ListOptions{FieldSelector: "spec.nodeName="}
	err := pods.DeleteCollection(c.ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, pending)
	if err != nil && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) {
		c.t.Fatalf("delete the pending burst: %v", err)
	}
	if err == nil {
		return
	}
	cloudtest.Eventually(c.t, "the pending burst deleted", 10*time.Minute, func() (bool, string) {
		l, err := pods.List(c.ctx, metav1.ListOptions{FieldSelector: pending.FieldSelector, Limit: 1})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == 0, "pending pods left"
	})
}

// Claims are the stack's live claims.
func (c *Cluster) Claims() []*apis.NodeClaim { return cloudtest.Claims(c.ctx, c.t, c.Env.Store) }

// Instances counts the simulator's instances that are not terminated or
// shutting down.
func (c *Cluster) Instances() int {
	n := 0
	for _, in := range c.Env.Cloud.AWS.EC2().Instances() {
		if s := in.State.Name; s == "pending" || s == "running" {
			n++
		}
	}
	return n
}

// Unlaunch undoes a provisioner pass: the claims named go (tombstoned) and
// their instances are terminated, so the next pass plans the same burst.
func (c *Cluster) Unlaunch(claims []string) {
	var errs []error
	for _, name := range claims {
		cl, err := c.Env.Store.GetNodeClaim(c.ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if id := cl.Status.InstanceID; id != "" {
			if err := c.Env.Cloud.AWS.EC2().Terminate(id, "scaletest"); err != nil {
				errs = append(errs, err)
			}
		}
		if err := c.Env.Store.DeleteNodeClaim(c.ctx, cl); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		c.t.Fatalf("undo the launches: %v", err)
	}
}
