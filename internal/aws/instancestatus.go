package aws

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// impairedFilters are DescribeInstanceStatus's filter sets for failed
// status checks: EC2 ANDs filters of different names, so the instance and
// the system check are asked apart (Karpenter v1.14.1
// pkg/providers/instancestatus, which also asks for scheduled events;
// nodewright's interruption queue receives those from AWS Health).
var impairedFilters = [][]ec2types.Filter{
	{{Name: aws.String("instance-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("system-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
}

// ImpairedInstances are the region's instances with a failed instance or
// system status check, each with when its earliest failed check began
// (EC2 API reference, DescribeInstanceStatus: InstanceStatusDetails
// ImpairedSince). A failed check without ImpairedSince counts from now:
// its age is unknown, so the caller's toleration starts over rather than
// treating it as old.
func (p *Provider) ImpairedInstances(ctx context.Context) (map[string]time.Time, error) {
	now := p.opts.Now()
	out := map[string]time.Time{}
	for _, filters := range impairedFilters {
		pager := ec2.NewDescribeInstanceStatusPaginator(p.clients.EC2, &ec2.DescribeInstanceStatusInput{Filters: filters})
		for pager.HasMorePages() {
			page, err := pager.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describe instance status: %w", err)
			}
			for _, s := range page.InstanceStatuses {
				since, failed := earliestFailure(s, now)
				id := aws.ToString(s.InstanceId)
				if prev, seen := out[id]; failed && (!seen || since.Before(prev)) {
					out[id] = since
				}
			}
		}
	}
	return out, nil
}

// earliestFailure is when the earliest failed instance or system check
// of s began; EBS checks are left out, as Karpenter does (a volume of a
// pod's claim failing says nothing of the node).
func earliestFailure(s ec2types.InstanceStatus, now time.Time) (time.Time, bool) {
	var details []ec2types.InstanceStatusDetails
	if s.InstanceStatus != nil {
		details = append(details, s.InstanceStatus.Details...)
	}
	if s.SystemStatus != nil {
		details = append(details, s.SystemStatus.Details...)
	}
	var since time.Time
	failed := false
	for _, d := range details {
		if d.Status != ec2types.StatusTypeFailed {
			continue
		}
		t := now
		if d.ImpairedSince != nil {
			t = *d.ImpairedSince
		}
		if !failed || t.Before(since) {
			since, failed = t, true
		}
	}
	return since, failed
}
