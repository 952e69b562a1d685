package localcloud

import (
	"encoding/json"
	"fmt"

	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/eventsim"
)

// interruptionRules are the CDK stack's EventBridge rules feeding the
// interruption queue: what each matches (source and detail-type) and the
// rule's name after the deployment's prefix.
var interruptionRules = [...]struct{ name, source, detailType string }{
	{"SpotInterruptionRule", "aws.ec2", "EC2 Spot Instance Interruption Warning"},
	{"RebalanceRule", "aws.ec2", "EC2 Instance Rebalance Recommendation"},
	{"InstanceStateChangeRule", "aws.ec2", "EC2 Instance State-change Notification"},
	{"CapacityReservationInterruptionRule", "aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning"},
	{"ScheduledChangeRule", "aws.health", "AWS Health Event"},
}

// RouteInterruptionEvents puts the stack's five rules (spot interruption
// warning, rebalance recommendation, instance state change, capacity
// reservation interruption warning, AWS Health) on
// the simulator's event bus, named prefix + the rule's name, each
// targeting the SQS queue queueARN: the simulator's own events then reach
// the interruption queue as in AWS.
func RouteInterruptionEvents(sim *awssim.Server, prefix, queueARN string) error {
	bus := sim.Events()
	for _, r := range interruptionRules {
		name := prefix + r.name
		pattern, err := json.Marshal(map[string]any{"source": []string{r.source}, "detail-type": []string{r.detailType}})
		if err != nil {
			return fmt.Errorf("EventBridge rule %s pattern: %w", name, err)
		}
		if _, err := bus.PutRule(name, string(pattern)); err != nil {
			return fmt.Errorf("EventBridge rule %s: %w", name, err)
		}
		if err := bus.PutTargets(name, eventsim.Target{Id: "interruption-queue", Arn: queueARN}); err != nil {
			return fmt.Errorf("EventBridge rule %s target: %w", name, err)
		}
	}
	return nil
}
