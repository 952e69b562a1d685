package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/metrics"
)

// reservationLabels are the labels only nodes in a capacity reservation carry.
var reservationLabels = []string{apis.CapacityReservationIDLabelKey, apis.CapacityReservationTypeLabelKey,
	apis.CapacityReservationInterruptibleLabelKey}

// reservationEnded relabels a reserved claim whose instance is no longer in
// a capacity reservation (the reservation expired or was cancelled, or
// someone moved the instance out): as Karpenter does, its capacity type
// becomes on-demand and the reservation labels go, on the claim and on its
// Node, so pricing, consolidation and workloads see it for what it now is.
// The instance keeps running (EC2 bills it on demand); a capacity block's
// instances are terminated by EC2 instead and leave as vanished instances.
// It never settles the reconcile: the claim goes on to its next phase.
func (c *Controller) reservationEnded(ctx context.Context, s *claimState) (bool, error) {
	id := s.cl.Status.InstanceID
	if !s.launched || id == "" || s.cl.Labels[apis.CapacityTypeLabelKey] != apis.CapacityTypeReserved {
		return false, nil
	}
	inst, gone, err := s.v.instance(ctx, id)
	if err != nil {
		// Next look; a read error must not hold up the claim's other phases.
		s.log.WarnContext(ctx, "checking the instance's capacity reservation", "error", err)
		return false, nil
	}
	if gone || inst.Reservation != nil {
		return false, nil
	}
	s.log.InfoContext(ctx, "instance left its capacity reservation; relabelling it on-demand",
		"capacity-reservation-id", s.cl.Labels[apis.CapacityReservationIDLabelKey])
	set := map[string]string{apis.CapacityTypeLabelKey: apis.CapacityTypeOnDemand}
	cl, err := c.d.Store.MutateNodeClaim(ctx, s.cl.Name, func(x *apis.NodeClaim) error {
		if x.Labels == nil {
			x.Labels = map[string]string{}
		}
		x.Labels[apis.CapacityTypeLabelKey] = apis.CapacityTypeOnDemand
		for _, k := range reservationLabels {
			delete(x.Labels, k)
		}
		return nil
	})
	if err != nil {
		return true, fmt.Errorf("lifecycle: relabel nodeclaim %s on-demand: %w", s.cl.Name, err)
	}
	s.cl = cl
	if s.node != nil {
		if _, err := c.d.Cluster.PatchNodeLabels(ctx, s.node.Name, set, reservationLabels); err != nil {
			return true, fmt.Errorf("lifecycle: relabel node %s on-demand: %w", s.node.Name, err)
		}
	}
	return false, nil
}

// capacityBlockDrainLead is how long before a capacity block ends its
// nodes are drained: EC2 begins terminating its instances 30 minutes
// before the end, and Karpenter starts draining 10 minutes before that.
const capacityBlockDrainLead = 40 * time.Minute

// capacityBlockEnding drains and terminates a claim whose capacity block
// is about to end, before EC2 reclaims the instance, as Karpenter does. It
// is an interruption: forceful, like expiry, whatever the budgets say.
func (c *Controller) capacityBlockEnding(ctx context.Context, s *claimState) (bool, error) {
	v := s.cl.Annotations[nwaws.AnnotationCapacityBlockEnd]
	if !s.launched || v == "" {
		return false, nil
	}
	end, err := time.Parse(time.RFC3339, v)
	if err != nil || s.now.Before(end.Add(-capacityBlockDrainLead)) {
		return false, nil
	}
	id := s.cl.Labels[apis.CapacityReservationIDLabelKey]
	s.log.InfoContext(ctx, "capacity block ends soon; draining its node", "capacity-reservation-id", id, "ends", v)
	c.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": apis.DeletionReasonInterrupted, "nodepool": s.cl.NodePoolName()})
	return s.finish(c.markAndTerminate(ctx, s.cl, apis.DeletionReasonInterrupted, "capacity block "+id+" ends at "+v, ActionCapacityBlockEnding))
}
