package interruption

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// Phase 1 of a batch: what a message means, recorded on its claim.

// acknowledge handles an owned instance's message that needs no action:
// an event on the node says it arrived.
func (c *Controller) acknowledge(ctx context.Context, w *work) {
	if w.item.Msg.Kind == RebalanceRecommended {
		w.log.InfoContext(ctx, "rebalance recommendation acknowledged (rebalance policy ignore)")
		c.event(ctx, w, kube.EventNormal, ReasonRebalance, "Spot rebalance recommendation was triggered")
		return
	}
	w.log.DebugContext(ctx, "interruption message needs no action")
}

// markICE keeps the offering an interruption takes away out of launches
// for the ICE TTL, shared with every function through the store, so the
// batch's replacement pass does not launch into it again: a spot warning's
// spot offering (Karpenter-AWS v1.14.1 interruption/utils.go
// markUnavailableOfferings), a capacity reservation warning's reservation
// (there, capacityReservationProvider.MarkUnavailable: no instance is
// launched into it until its availability is read again).
func (c *Controller) markICE(ctx context.Context, w *work) {
	if c.d.ICE == nil {
		return
	}
	key, reason, ok := iceKeyFor(w.item.Msg.Kind, w.claim.Labels)
	if !ok {
		if reason != "" {
			w.log.WarnContext(ctx, "interrupted claim lacks the labels of its offering; nothing marked unavailable", "missing", reason)
		}
		return
	}
	if err := c.d.ICE.MarkUnavailable(ctx, key, reason); err != nil {
		// The local set holds it for this function; the launch goes on.
		w.log.WarnContext(ctx, "recording the interrupted offering", "offering", key.String(), "error", err)
		return
	}
	w.log.InfoContext(ctx, "interrupted offering marked unavailable", "offering", key.String(), "ttl", spotICETTL.String())
}

// iceKeyFor is the offering a message of kind takes away from a claim with
// labels, and the ICE reason; ok is false when there is none (then reason,
// if set, names the labels that are missing).
func iceKeyFor(kind Kind, labels map[string]string) (key nwaws.OfferingKey, reason string, ok bool) {
	key = nwaws.OfferingKey{InstanceType: labels[catalog.LabelInstanceType], Zone: labels[catalog.LabelTopologyZone]}
	switch kind {
	case SpotInterruption:
		key.CapacityType = apis.CapacityTypeSpot
		reason = "SpotInterruptionWarning"
	case CapacityReservationInterruption:
		key.CapacityType, key.ReservationID = apis.CapacityTypeReserved, labels[apis.CapacityReservationIDLabelKey]
		if key.ReservationID == "" {
			return key, "capacity-reservation-id", false
		}
		reason = "CapacityReservationInterruptionWarning"
	default:
		return key, "", false
	}
	if key.InstanceType == "" || key.Zone == "" {
		return key, "instance-type or zone", false
	}
	return key, reason, true
}

// mark sets the claim's deletion mark through termination.Mark (kept if
// already there: duplicates and the lifecycle's own marks are never moved).
func (c *Controller) mark(ctx context.Context, w *work) error {
	msg := describe(w.item.Msg)
	updated, first, err := termination.Mark(ctx, c.d.Store, w.claim.Name, apis.DeletionReasonInterrupted, msg, c.d.Now())
	if errors.Is(err, store.ErrNotFound) {
		// Terminated meanwhile: nothing left to do.
		w.log.InfoContext(ctx, "nodeclaim already gone")
		w.out.Action = ActionNone
		return nil
	}
	if err != nil {
		return fmt.Errorf("interruption: %w", err)
	}
	w.claim = updated
	w.out.First = first
	if first {
		w.log.InfoContext(ctx, "nodeclaim marked for deletion", "reason", apis.DeletionReasonInterrupted, "message", msg)
		c.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": apis.DeletionReasonInterrupted, "nodepool": updated.NodePoolName()})
		reason, text := eventFor(w.item.Msg)
		c.event(ctx, w, kube.EventWarning, reason, "%s", text)
	} else {
		w.log.InfoContext(ctx, "nodeclaim already marked for deletion (duplicate or earlier decision)", "reason", updated.DeletionReason())
	}
	return nil
}

// markDisrupting sets Disrupting=True without the deletion mark: the node
// takes no new pods and the provisioner moves its pods to new capacity,
// while the lifecycle leaves it running until the mark follows.
func (c *Controller) markDisrupting(ctx context.Context, w *work) error {
	if w.claim.Deleting() {
		return nil
	}
	now := metav1.NewTime(c.d.Now())
	updated, err := c.d.Store.MutateNodeClaim(ctx, w.claim.Name, func(x *apis.NodeClaim) error {
		if !x.IsTrue(apis.ConditionDisrupting) {
			x.SetCondition(apis.ConditionDisrupting, metav1.ConditionTrue, "RebalanceRecommendation", "replacement being provisioned", now)
		}
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		w.out.Action = ActionNone
		return nil
	}
	if err != nil {
		return fmt.Errorf("interruption: mark nodeclaim %s disrupting: %w", w.claim.Name, err)
	}
	w.claim = updated
	return nil
}

// undoDisrupting clears a rebalance's Disrupting condition when its
// replacement could not be provisioned, so the node takes pods again until
// the redelivered message tries once more.
func (c *Controller) undoDisrupting(ctx context.Context, w *work) {
	_, err := c.d.Store.MutateNodeClaim(ctx, w.claim.Name, func(x *apis.NodeClaim) error {
		if x.Deleting() {
			return nil
		}
		if c := x.Condition(apis.ConditionDisrupting); c != nil && c.Reason == "RebalanceRecommendation" {
			x.ClearCondition(apis.ConditionDisrupting)
		}
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		w.log.WarnContext(ctx, "clearing the rebalance's Disrupting condition", "error", err)
	}
}

func (c *Controller) event(ctx context.Context, w *work, typ, reason, format string, args ...any) {
	if w.node == nil {
		return
	}
	if err := c.d.Cluster.NodeEvent(ctx, w.node, typ, reason, format, args...); err != nil {
		w.log.DebugContext(ctx, "node event", "reason", reason, "error", err)
	}
}

// eventFor is the node event (Karpenter's reasons and wording) of a message.
func eventFor(m Message) (reason, text string) {
	switch m.Kind {
	case SpotInterruption:
		return ReasonSpotInterrupted, "Spot interruption warning was triggered"
	case RebalanceRecommended:
		return ReasonRebalance, "Spot rebalance recommendation was triggered; replacing the node (rebalance policy replace)"
	case CapacityReservationInterruption:
		return ReasonCapacityReservationInterrupted, "Capacity Reservation interruption warning was triggered"
	case ScheduledChange:
		return ReasonInstanceUnhealthy, "An unhealthy warning was triggered for the instance (AWS Health scheduled change)"
	case StateChange:
		if m.State == "stopping" || m.State == "stopped" {
			return ReasonInstanceStopping, "Instance is stopping"
		}
		return ReasonInstanceTerminating, "Instance is terminating"
	}
	return "Interrupted", m.DetailType
}

// describe is the deletion mark's message.
func describe(m Message) string {
	s := m.DetailType
	if m.State != "" {
		s += " (" + m.State + ")"
	}
	if m.ID != "" {
		s += ", event " + m.ID
	}
	return s
}
