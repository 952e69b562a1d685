package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// gcInput is what instance garbage collection compares: this stack's live
// instances and the claims the table holds, with the records the listing
// could not decode.
type gcInput struct {
	instances []nwaws.Instance
	claims    []*apis.NodeClaim
	skipped   []store.Undecodable
}

// collectInstances removes this stack's instances that no live claim owns,
// once older than the GC grace (a launch records its instance on the claim
// within that time). The instances are listed by this stack's owner tag, so
// another stack's (or Karpenter's) are never seen. Three guards keep a
// wrong table from costing a fleet:
//   - a record the listing could not decode is an unknown claim, not a
//     missing one: its instance is kept;
//   - more orphans than the bounded share of the fleet means the table is
//     wrong, not the fleet: nothing is collected and GCRefused is raised;
//   - an orphan whose Node runs pods is adopted as a claim marked for
//     deletion and leaves through the PDB-respecting drain, never through a
//     bare TerminateInstances.
func (c *Controller) collectInstances(ctx context.Context, v *snapView, in gcInput, res *PassResult) error {
	orphans, why := c.orphans(in)
	if why != "" {
		c.refuseGC(ctx, res, why, len(orphans), len(in.instances))
		return nil
	}
	if len(orphans) == 0 {
		return nil
	}
	if limit := c.gcLimit(len(in.instances)); len(orphans) > limit {
		c.refuseGC(ctx, res, fmt.Sprintf("%d of %d instances have no claim, more than the %d one pass may collect", len(orphans), len(in.instances), limit),
			len(orphans), len(in.instances))
		return nil
	}
	nodes, err := c.orphansNodes(ctx, v, orphans)
	if err != nil {
		return err
	}
	var bare []string
	var errs []error
	for _, inst := range orphans {
		node := nodes[inst.ID]
		waiting, err := c.podsWaiting(ctx, v, node)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !waiting {
			bare = append(bare, inst.ID)
			continue
		}
		if err := c.adoptForDrain(ctx, inst, node); err != nil {
			errs = append(errs, err)
			continue
		}
		res.DrainedOrphans = append(res.DrainedOrphans, inst.ID)
	}
	if err := c.terminateOrphans(ctx, bare); err != nil {
		return errors.Join(append(errs, err)...)
	}
	res.TerminatedInstances = bare
	return errors.Join(errs...)
}

// orphans are the instances older than the grace that no claim owns. why
// is set when garbage collection must not act at all.
func (c *Controller) orphans(in gcInput) (out []nwaws.Instance, why string) {
	byName := map[string]bool{}
	byID := map[string]bool{}
	for _, cl := range in.claims {
		byName[cl.Name] = true
		if cl.Status.InstanceID != "" {
			byID[cl.Status.InstanceID] = true
		}
	}
	for _, u := range in.skipped {
		if u.Name == "" {
			return nil, "an undecodable nodeclaim record (" + u.Key + ") could own any instance"
		}
		byName[u.Name] = true
	}
	now := c.d.Now()
	for _, inst := range in.instances {
		if byID[inst.ID] || (inst.NodeClaim != "" && byName[inst.NodeClaim]) || instanceGone(inst.State) {
			continue
		}
		if inst.LaunchTime.IsZero() || now.Sub(inst.LaunchTime) < c.s.GCGrace {
			continue
		}
		out = append(out, inst)
	}
	return out, ""
}

// gcLimit is how many instances one pass may collect out of a fleet.
func (c *Controller) gcLimit(fleet int) int {
	return max(c.s.GCMaxInstances, int(math.Floor(c.s.GCMaxShare*float64(fleet))))
}

func (c *Controller) refuseGC(ctx context.Context, res *PassResult, why string, orphans, fleet int) {
	res.GCRefused = why
	c.d.Metrics.Add(metrics.GCRefused, 1, nil)
	c.log.WarnContext(ctx, "instance garbage collection refused: is this the stack's own NodeClaim table?",
		"reason", why, "orphans", orphans, "instances", fleet)
}

// adoptForDrain records an orphan whose Node runs pods as a claim marked
// for deletion, named after its instance (a re-run finds it and does not
// adopt twice), and starts its termination workflow at once.
func (c *Controller) adoptForDrain(ctx context.Context, inst nwaws.Instance, node *corev1.Node) error {
	cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "gc-" + inst.ID, Labels: map[string]string{}}}
	if inst.NodePool != "" {
		cl.Labels[apis.NodePoolLabelKey] = inst.NodePool
	}
	cl.Status.InstanceID, cl.Status.ProviderID, cl.Status.NodeName = inst.ID, node.Spec.ProviderID, node.Name
	cl.MarkForDeletion(ReasonGarbageCollected, fmt.Sprintf("instance %s (nodeclaim tag %q) has no claim in this stack's table", inst.ID, inst.NodeClaim),
		metav1.NewTime(c.d.Now()))
	if err := c.d.Store.CreateNodeClaim(ctx, cl); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return fmt.Errorf("lifecycle: adopt orphaned instance %s for draining: %w", inst.ID, err)
	}
	c.log.InfoContext(ctx, "orphaned instance runs pods: draining it before termination", "instance-id", inst.ID,
		"node", node.Name, "nodeclaim", cl.Name, "nodepool", inst.NodePool, "launched", inst.LaunchTime.UTC().Format(time.RFC3339))
	return c.requeue(ctx, cl.Name, "gc:adopted", 0)
}

func (c *Controller) terminateOrphans(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	for _, id := range ids {
		c.log.InfoContext(ctx, "garbage collecting instance without a nodeclaim", "instance-id", id)
	}
	// The ids come from this pass's listing: one EC2 no longer shows is gone.
	if err := c.d.Cloud.Terminate(ctx, ids...); err != nil && !onlyNotVisible(err) {
		c.d.Metrics.Add(metrics.CloudProviderErrors, 1, metrics.Dimensions{"method": "Terminate"})
		return fmt.Errorf("lifecycle: terminate orphaned instances %s: %w", strings.Join(ids, ","), err)
	}
	return nil
}

// onlyNotVisible reports an error of Terminate that says no more than
// that some ids are not visible (errors.Join keeps each cause apart).
func onlyNotVisible(err error) bool {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			if !errors.Is(e, nwaws.ErrInstanceNotVisible) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, nwaws.ErrInstanceNotVisible)
}

// nodesByInstance maps instance IDs to the Nodes whose providerID names them.
func nodesByInstance(nodes []*corev1.Node) map[string]*corev1.Node {
	out := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		if _, id, err := nwaws.ParseProviderID(n.Spec.ProviderID); err == nil {
			out[id] = n
		}
	}
	return out
}

// orphansNodes maps instance IDs to their Nodes. The pass's node list may
// come from the watch cache; an orphan it shows without a Node would be
// terminated without a drain, so the nodes are then listed fresh.
func (c *Controller) orphansNodes(ctx context.Context, v *snapView, orphans []nwaws.Instance) (map[string]*corev1.Node, error) {
	nodes := nodesByInstance(v.snap.Nodes)
	for _, inst := range orphans {
		if nodes[inst.ID] != nil {
			continue
		}
		fresh, err := c.d.Cluster.Snapshot(ctx, kube.SnapshotOptions{Parts: kube.PartNodes})
		if err != nil {
			return nil, fmt.Errorf("lifecycle: nodes of orphaned instances: %w", err)
		}
		return nodesByInstance(fresh.Nodes), nil
	}
	return nodes, nil
}

// podsWaiting reports whether node has pods a drain must move. The
// snapshot's pods may come from the watch cache or an earlier pass, so a
// node they show bare is confirmed with a fresh read before its instance
// is terminated without a drain.
func (c *Controller) podsWaiting(ctx context.Context, v *snapView, node *corev1.Node) (bool, error) {
	if node == nil {
		return false, nil
	}
	if len(termination.WaitingPods(v.snap.PodsByNode[node.Name], c.d.Now())) > 0 {
		return true, nil
	}
	fresh, err := c.d.Cluster.PodsOnNode(ctx, node.Name)
	if err != nil {
		return false, fmt.Errorf("lifecycle: pods of node %s: %w", node.Name, err)
	}
	return len(termination.WaitingPods(fresh, c.d.Now())) > 0, nil
}
