package awssim

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/eventsim"
)

// Detail types of the events EC2 and AWS Health put on the default bus.
const (
	DetailStateChange = "EC2 Instance State-change Notification"
	DetailSpotWarning = "EC2 Spot Instance Interruption Warning"
	DetailRebalance   = "EC2 Instance Rebalance Recommendation"
	DetailHealthEvent = "AWS Health Event"
	// DetailCapacityReservationWarning: EC2 User Guide, "Monitor
	// interruptible Capacity Reservations with EventBridge and CloudTrail".
	DetailCapacityReservationWarning = "EC2 Capacity Reservation Instance Interruption Warning"
	healthRetirement                 = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
	spotTerminatReason               = "Server.SpotInstanceTermination: Spot instance termination"
)

func (s *Server) deliverToSQS(arn, body string) error {
	if !strings.HasPrefix(arn, "arn:aws:sqs:") {
		return fmt.Errorf("target %s: only SQS queue targets are simulated", arn)
	}
	queue := arn[strings.LastIndex(arn, ":")+1:]
	if delay := s.eventDelay.Load(); delay != nil {
		if d := (*delay)(arn); d > 0 {
			s.after(d, func() {
				if _, err := s.sqs.Send(queue, body, 0); err != nil {
					s.logger.Warn("deliver delayed event", "target", arn, "error", err)
				}
			})
			return nil
		}
	}
	_, err := s.sqs.Send(queue, body, 0)
	return err
}

// DelayEventDelivery makes EventBridge deliver each event to a target
// delay(targetARN) of simulated time after it was put on the bus, instead
// of at once: delivery to a target is asynchronous, at least once and
// unordered (EventBridge user guide, "Event delivery from AWS services"
// and "How EventBridge retries delivering events"). The returned func
// restores immediate delivery.
func (s *Server) DelayEventDelivery(delay func(targetARN string) time.Duration) (restore func()) {
	s.eventDelay.Store(&delay)
	return func() { s.eventDelay.Store(nil) }
}

func (s *Server) instanceARN(id string) string {
	return fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", s.opts.Region, s.opts.AccountID, id)
}

func (s *Server) publish(source, detailType string, detail any, resources ...string) {
	b, _ := json.Marshal(detail)
	if _, err := s.events.Publish(eventsim.Event{Source: source, DetailType: detailType, Detail: string(b), Resources: resources}); err != nil {
		s.logger.Warn("publish event", "detail-type", detailType, "error", err)
	}
}

// onTransition emits the state-change notification of every transition and
// drives the kubelet emulation.
func (s *Server) onTransition(t ec2sim.Transition) {
	id := aws.ToString(t.Instance.InstanceId)
	s.publish("aws.ec2", DetailStateChange, map[string]string{"instance-id": id, "state": string(t.To)}, s.instanceARN(id))
	s.observeKubelet(t)
}

// ReclaimSpot interrupts a spot instance the way EC2 does: the interruption
// warning now, termination after Delays.SpotInterruption (time scaled).
func (s *Server) ReclaimSpot(instanceID string) error {
	inst, capType, ok := s.ec2.Instance(instanceID)
	if !ok {
		return fmt.Errorf("reclaim spot %s: no such instance", instanceID)
	}
	if capType != "spot" {
		return fmt.Errorf("reclaim spot %s: instance is %s, not spot", instanceID, capType)
	}
	if inst.State.Name != types.InstanceStateNamePending && inst.State.Name != types.InstanceStateNameRunning {
		return fmt.Errorf("reclaim spot %s: instance is %s", instanceID, inst.State.Name)
	}
	s.publish("aws.ec2", DetailSpotWarning, map[string]string{"instance-id": instanceID, "instance-action": "terminate"}, s.instanceARN(instanceID))
	s.after(s.opts.Delays.SpotInterruption, func() {
		if err := s.ec2.Terminate(instanceID, spotTerminatReason); err != nil {
			s.logger.Warn("spot reclaim", "instance", instanceID, "error", err)
		}
	})
	return nil
}

// ReclaimCapacityReservation takes an instance of an interruptible
// Capacity Reservation back the way EC2 does (EC2 User Guide, "Monitor
// interruptible Capacity Reservations with EventBridge and CloudTrail"):
// the "EC2 Capacity Reservation Instance Interruption Warning" now, with
// its instance-termination-time and the reservation's zone id, and
// termination two minutes later (Delays.SpotInterruption, the same notice,
// time scaled). The reservation itself is not shrunk: the slot comes back
// when the instance terminates.
func (s *Server) ReclaimCapacityReservation(instanceID string) error {
	inst, _, ok := s.ec2.Instance(instanceID)
	if !ok {
		return fmt.Errorf("reclaim capacity reservation %s: no such instance", instanceID)
	}
	crID := aws.ToString(inst.CapacityReservationId)
	if crID == "" {
		return fmt.Errorf("reclaim capacity reservation %s: instance is in no capacity reservation", instanceID)
	}
	out, err := s.ec2.DescribeCapacityReservations(context.Background(), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{crID}})
	if err != nil || len(out.CapacityReservations) != 1 {
		return fmt.Errorf("reclaim capacity reservation %s: describe %s: %w", instanceID, crID, err)
	}
	cr := out.CapacityReservations[0]
	if !aws.ToBool(cr.Interruptible) {
		return fmt.Errorf("reclaim capacity reservation %s: reservation %s is not interruptible", instanceID, crID)
	}
	if inst.State.Name != types.InstanceStateNamePending && inst.State.Name != types.InstanceStateNameRunning {
		return fmt.Errorf("reclaim capacity reservation %s: instance is %s", instanceID, inst.State.Name)
	}
	// instance-termination-time is stated in cloud time (the notice
	// unscaled), as the spot warning's two minutes are.
	at := s.opts.Now().Add(s.opts.Delays.SpotInterruption).UTC().Format(time.RFC3339)
	s.publish("aws.ec2", DetailCapacityReservationWarning, map[string]string{
		"instance-id": instanceID, "instance-action": "terminate", "instance-termination-time": at, "azId": aws.ToString(cr.AvailabilityZoneId),
	}, s.instanceARN(instanceID))
	s.after(s.opts.Delays.SpotInterruption, func() {
		if err := s.ec2.Terminate(instanceID, "Server.InterruptibleCapacityReservationReclaimed"); err != nil {
			s.logger.Warn("capacity reservation reclaim", "instance", instanceID, "error", err)
		}
	})
	return nil
}

// RecommendRebalance emits an EC2 Instance Rebalance Recommendation.
func (s *Server) RecommendRebalance(instanceID string) error {
	if _, _, ok := s.ec2.Instance(instanceID); !ok {
		return fmt.Errorf("rebalance %s: no such instance", instanceID)
	}
	s.publish("aws.ec2", DetailRebalance, map[string]string{"instance-id": instanceID}, s.instanceARN(instanceID))
	return nil
}

// ScheduleMaintenance emits an AWS Health scheduledChange event (instance
// retirement) for an instance, starting at start.
func (s *Server) ScheduleMaintenance(instanceID string, start time.Time) error {
	if _, _, ok := s.ec2.Instance(instanceID); !ok {
		return fmt.Errorf("schedule maintenance %s: no such instance", instanceID)
	}
	eventARN := fmt.Sprintf("arn:aws:health:%s::event/EC2/%s/%s_%s", s.opts.Region, healthRetirement, healthRetirement, instanceID)
	s.publish("aws.health", DetailHealthEvent, map[string]any{
		"eventArn": eventARN, "service": "EC2", "eventTypeCode": healthRetirement, "eventTypeCategory": "scheduledChange",
		"eventScopeCode": "ACCOUNT_SPECIFIC", "statusCode": "upcoming",
		"startTime": start.UTC().Format(time.RFC1123), "endTime": start.Add(time.Hour).UTC().Format(time.RFC1123),
		"eventDescription": []map[string]string{{"language": "en_US", "latestDescription": "EC2 has detected degradation of the underlying hardware hosting your instance " + instanceID + ". It is scheduled for retirement."}},
		"affectedEntities": []map[string]string{{"entityValue": instanceID}},
	}, instanceID)
	return nil
}
