package ec2sim

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// DescribeInstanceStatus, as the EC2 API Reference's DescribeInstanceStatus
// page describes it (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceStatus.html):
// only running instances unless IncludeAllInstances; each item carries
// InstanceId, AvailabilityZone, InstanceState, and the InstanceStatus and
// SystemStatus summaries (Status ok / impaired / initializing /
// insufficient-data / not-applicable, one "reachability" detail with
// Status passed / failed and ImpairedSince while failed); filters
// instance-id, instance-state-name, availability-zone,
// instance-status.status, instance-status.reachability,
// system-status.status, system-status.reachability; MaxResults 5-1000 and
// not with InstanceIds. Scheduled events (Events) and attached EBS status
// are not simulated: every instance reports none and ok.

// FailStatusCheck makes an instance's instance status check (system
// false) or system status check (system true) fail from since on, as a
// broken guest OS or a host fault does.
func (c *Cloud) FailStatusCheck(id string, system bool, since time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.instances[id]
	if in == nil {
		return fmt.Errorf("fail status check %s: no such instance", id)
	}
	if system {
		in.systemImpaired = since
	} else {
		in.instanceImpaired = since
	}
	return nil
}

// PassStatusChecks makes both of an instance's status checks pass again.
func (c *Cloud) PassStatusChecks(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in := c.instances[id]; in != nil {
		in.instanceImpaired, in.systemImpaired = time.Time{}, time.Time{}
	}
}

// DescribeInstanceStatus answers the action (see above).
func (c *Cloud) DescribeInstanceStatus(_ context.Context, in *ec2.DescribeInstanceStatusInput) (*ec2.DescribeInstanceStatusOutput, error) {
	if len(in.InstanceIds) > 0 && in.MaxResults != nil {
		return nil, protocol.Errorf("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := c.order
	if len(in.InstanceIds) > 0 {
		if err := c.checkInstanceIDs(in.InstanceIds); err != nil {
			return nil, err
		}
		ids = in.InstanceIds
	}
	all := aws.ToBool(in.IncludeAllInstances)
	return describe(in.Filters, paging{in.MaxResults, in.NextToken, 5, 1000}, func(yield func(types.InstanceStatus, attrs) bool) {
		for _, id := range ids {
			inst := c.instances[id]
			if inst.unseen || (!all && inst.State.Name != types.InstanceStateNameRunning) {
				continue
			}
			if !yield(inst.status()) {
				return
			}
		}
	}, func(items []types.InstanceStatus, next *string) *ec2.DescribeInstanceStatusOutput {
		return &ec2.DescribeInstanceStatusOutput{InstanceStatuses: items, NextToken: next}
	})
}

// status is the instance's DescribeInstanceStatus item and its filters'
// values. Caller holds mu.
func (in *instance) status() (types.InstanceStatus, attrs) {
	running := in.State.Name == types.InstanceStateNameRunning
	inst, sys := checkSummary(running, in.instanceImpaired), checkSummary(running, in.systemImpaired)
	item := types.InstanceStatus{
		InstanceId: in.InstanceId, AvailabilityZone: in.Placement.AvailabilityZone, InstanceState: in.State,
		InstanceStatus: &inst, SystemStatus: &sys,
		AttachedEbsStatus: &types.EbsStatusSummary{Status: types.SummaryStatusOk},
	}
	values := map[string][]string{
		"instance-id": one(in.InstanceId), "instance-state-name": {string(in.State.Name)},
		"availability-zone":      one(in.Placement.AvailabilityZone),
		"instance-status.status": {string(inst.Status)}, "system-status.status": {string(sys.Status)},
		"instance-status.reachability": {reachability(inst)}, "system-status.reachability": {reachability(sys)},
	}
	return item, func(name string) ([]string, bool) { v, ok := values[name]; return v, ok }
}

// checkSummary is one status check's summary: not-applicable for an
// instance that is not running, else ok or impaired since impaired.
func checkSummary(running bool, impaired time.Time) types.InstanceStatusSummary {
	if !running {
		return types.InstanceStatusSummary{Status: types.SummaryStatusNotApplicable}
	}
	if impaired.IsZero() {
		return types.InstanceStatusSummary{Status: types.SummaryStatusOk,
			Details: []types.InstanceStatusDetails{{Name: types.StatusNameReachability, Status: types.StatusTypePassed}}}
	}
	return types.InstanceStatusSummary{Status: types.SummaryStatusImpaired,
		Details: []types.InstanceStatusDetails{{Name: types.StatusNameReachability, Status: types.StatusTypeFailed, ImpairedSince: aws.Time(impaired.UTC())}}}
}

func reachability(s types.InstanceStatusSummary) string {
	if len(s.Details) == 0 {
		return ""
	}
	return string(s.Details[0].Status)
}
