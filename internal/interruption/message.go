// Package interruption reads the EC2 and AWS Health events EventBridge
// delivers to the interruption queue and decides what each means for the
// nodes nodewright owns, then acts on it (the interruption function).
//
// For a batch of up to 10 SQS messages (Handler.HandleSQS):
//   - malformed messages are batch item failures, logged with their message
//     ID, so the queue's redrive policy parks them in the DLQ; instances
//     without a NodeClaim are acknowledged and nothing is touched;
//   - spot interruption warnings, capacity reservation interruption
//     warnings, AWS Health scheduled changes and stopping / shutting-down
//     instances: the spot offering (spot warnings) or the reservation
//     (capacity reservation warnings) is marked unavailable in the shared
//     ICE set, the claim is marked for deletion (apis.NodeClaim.
//     MarkForDeletion, reason Interrupted), one provisioning pass for the
//     whole batch launches replacement capacity for the pods that fit
//     nowhere else, then the node is cordoned and the first termination
//     step taints it and starts the evictions; the lifecycle function
//     carries the drain on (a requeued work message);
//   - stopped / terminated instances: claim and Node are removed at once
//     (after the same replacement pass), the pods deleted, a stopped
//     instance terminated;
//   - rebalance recommendations: acknowledged with a node event under the
//     default policy "ignore"; under "replace" the claim is set Disrupting,
//     the replacement provisioned, and only then marked and drained.
//
// Everything is idempotent: the deletion mark is kept by the first writer
// (conditional writes), a duplicate finds the node already tainted and
// starts nothing, and the provisioning pass launches nothing for pods an
// in-flight replacement already takes.
//
// # Safety rules
//
//   - It acts only on instances of its own claims: a message for any other
//     instance (another stack's, another autoscaler's) is acknowledged and
//     logged, never acted on.
//   - A node is taken away through the termination drain (taint, PDB-
//     respecting eviction). The named exception is a spot instance EC2 is
//     reclaiming: EC2 removes it after its two-minute warning whatever the
//     PDBs say, so the drain starts at once and pods of an instance already
//     gone are deleted so their controllers recreate them.
//   - A message it cannot parse is a batch item failure (the DLQ keeps it),
//     never dropped; one that needs no action (a scheduled change of a
//     Dedicated Host) is acknowledged and logged.
package interruption

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind is what an interruption message announces.
type Kind string

// Kinds, named like Karpenter's message types (they become the
// message_type metric dimension).
const (
	SpotInterruption     Kind = "spot_interrupted"
	RebalanceRecommended Kind = "rebalance_recommendation"
	ScheduledChange      Kind = "scheduled_change"
	StateChange          Kind = "state_change"
	// CapacityReservationInterruption: EC2 takes an instance of an
	// interruptible Capacity Reservation back in two minutes.
	CapacityReservationInterruption Kind = "capacity_reservation_interrupted"
	Unknown                         Kind = "no_op"
)

// The EventBridge detail-types and sources the interruption rules forward.
const (
	detailTypeSpot        = "EC2 Spot Instance Interruption Warning"
	detailTypeRebalance   = "EC2 Instance Rebalance Recommendation"
	detailTypeStateChange = "EC2 Instance State-change Notification"
	detailTypeHealth      = "AWS Health Event"
	// detailTypeCapacityReservation is the warning EC2 sends two minutes
	// before it terminates an instance of an interruptible Capacity
	// Reservation (EC2 User Guide, "Monitor interruptible Capacity
	// Reservations with EventBridge and CloudTrail"; Karpenter-AWS v1.14.1
	// messages/capacityreservationinterruption parses the same type).
	detailTypeCapacityReservation = "EC2 Capacity Reservation Instance Interruption Warning"
	sourceEC2                     = "aws.ec2"
	sourceHealth                  = "aws.health"
)

// Message is a parsed interruption event.
type Message struct {
	ID          string
	Kind        Kind
	DetailType  string
	InstanceIDs []string
	// State is the new instance state for StateChange messages.
	State string
	Time  time.Time
}

// Actionable reports whether the message may make nodewright act on its
// instances (drain or clean up), as opposed to being acknowledged only.
// Rebalance recommendations are actionable only under the `replace` policy;
// the controller applies that setting.
func (m Message) Actionable() bool {
	switch m.Kind {
	case SpotInterruption, ScheduledChange, RebalanceRecommended, CapacityReservationInterruption:
		return true
	case StateChange:
		return m.State == "stopping" || m.State == "stopped" || m.State == "shutting-down" || m.State == "terminated"
	}
	return false
}

// Gone reports whether the instance is already stopped or terminated, so the
// claim and node are cleaned up at once rather than drained.
func (m Message) Gone() bool {
	return m.Kind == StateChange && (m.State == "stopped" || m.State == "terminated")
}

// ErrMalformed marks messages that can never be processed; they are reported
// as batch item failures so SQS moves them to the dead-letter queue.
var ErrMalformed = errors.New("malformed interruption message")

type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       time.Time       `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// ec2DetailTypes are the aws.ec2 events whose detail names one instance.
var ec2DetailTypes = map[string]bool{
	detailTypeSpot: true, detailTypeRebalance: true, detailTypeStateChange: true, detailTypeCapacityReservation: true,
}

type ec2Detail struct {
	InstanceID string `json:"instance-id"`
	State      string `json:"state"`
}

type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCategory string `json:"eventTypeCategory"`
	EventTypeCode     string `json:"eventTypeCode"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// Parse decodes an EventBridge envelope. Events of other kinds parse to
// Unknown (acknowledged and counted); bodies that are not an envelope, or a
// known kind without its instance, are ErrMalformed.
func Parse(body string) (Message, error) {
	var env envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if env.DetailType == "" || env.Source == "" {
		return Message{}, fmt.Errorf("%w: no detail-type or source", ErrMalformed)
	}
	m := Message{ID: env.ID, DetailType: env.DetailType, Time: env.Time, Kind: Unknown}
	switch {
	case env.Source == sourceEC2 && ec2DetailTypes[env.DetailType]:
		var d ec2Detail
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			return Message{}, fmt.Errorf("%w: %s detail: %w", ErrMalformed, env.DetailType, err)
		}
		if !strings.HasPrefix(d.InstanceID, "i-") {
			return Message{}, fmt.Errorf("%w: %s without an instance-id", ErrMalformed, env.DetailType)
		}
		m.InstanceIDs = []string{d.InstanceID}
		switch env.DetailType {
		case detailTypeSpot:
			m.Kind = SpotInterruption
		case detailTypeRebalance:
			m.Kind = RebalanceRecommended
		case detailTypeCapacityReservation:
			m.Kind = CapacityReservationInterruption
		default:
			if d.State == "" {
				return Message{}, fmt.Errorf("%w: state-change without a state", ErrMalformed)
			}
			m.Kind, m.State = StateChange, d.State
		}
	case env.Source == sourceHealth && env.DetailType == detailTypeHealth:
		var d healthDetail
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			return Message{}, fmt.Errorf("%w: health detail: %w", ErrMalformed, err)
		}
		if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
			return m, nil
		}
		// A scheduled change may affect no instance at all (a Dedicated
		// Host's is about h-..., some name no entity): a legitimate event
		// with nothing to do, acknowledged like Karpenter does, not a
		// malformed one for the DLQ and its alarm.
		for _, e := range d.AffectedEntities {
			if strings.HasPrefix(e.EntityValue, "i-") {
				m.InstanceIDs = append(m.InstanceIDs, e.EntityValue)
			}
		}
		m.Kind = ScheduledChange
	}
	return m, nil
}
